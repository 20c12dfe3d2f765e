/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Part of dat2: compile-time configuration of the user-level DAT API.
 */
#ifndef _UDAT_CONFIG_H_
#define _UDAT_CONFIG_H_

/* API version requested by dat_ia_open(). */
#define DAT_VERSION_MAJOR 2
#define DAT_VERSION_MINOR 0

/*
 * Thread-safety level requested by dat_ia_open(). The registry keys on it,
 * and the dat.conf entries shipped with uDAPL are "nonthreadsafe", so the
 * value is fixed to DAT_FALSE here.
 */
#define DAT_THREADSAFE DAT_FALSE

/* Extension support (dat_extension_op and the *_EXTENSION_BASE values). */
#ifndef DAT_EXTENSIONS
#define DAT_EXTENSIONS 1
#endif

#endif /* _UDAT_CONFIG_H_ */
