/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Part of dat2: hook for vendor additions shared by kernel and user DAT.
 * dat2 defines none; the header exists so that code including it builds.
 */
#ifndef _DAT_VENDOR_SPECIFIC_H_
#define _DAT_VENDOR_SPECIFIC_H_

#endif /* _DAT_VENDOR_SPECIFIC_H_ */
