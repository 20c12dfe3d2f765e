/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Part of dat2: hook for vendor additions to the user-level API.
 * dat2 defines none; the header exists so that code including it builds.
 */
#ifndef _UDAT_VENDOR_SPECIFIC_H_
#define _UDAT_VENDOR_SPECIFIC_H_

#include <dat2/dat_vendor_specific.h>

#endif /* _UDAT_VENDOR_SPECIFIC_H_ */
