/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* dat2-info's parts: what one file offers the others. */
#ifndef DAT2_INFO_H
#define DAT2_INFO_H

#include <dat2/udat.h>

/* -v: every attribute, and the library's messages also for IAs that open. */
extern int verbose;

/* dat2-info-print.c: the text form, one "    label: value" line per field. */
void field(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_lines(const char *label, const char *text);
void ia_attributes(const DAT_IA_ATTR *a);
void provider_attributes(const DAT_PROVIDER_ATTR *p);

#endif
