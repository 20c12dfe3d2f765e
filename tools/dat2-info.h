/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* dat2-info's parts: what one file offers the others. */
#ifndef DAT2_INFO_H
#define DAT2_INFO_H

#include <stddef.h>
#include <dat2/udat.h>

/* -v: every attribute, and the library's messages also for IAs that open. */
extern int verbose;

/* ---- dat2-info-print.c: the detailed text form, one "    label: value" line per field */

void field(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_lines(const char *label, const char *text);
void ia_attributes(const DAT_IA_ATTR *a);
void provider_attributes(const DAT_PROVIDER_ATTR *p);

/* The next non-empty line of a captured text at *p, without the library's "DAT Registry: "
 * prefix and trailing blanks; advances *p. Returns 0 when there is none. */
int next_line(const char **p, const char **line, size_t *len);
/* "a.b.c.d", "a.b.c.d port N", "none", ... */
void format_address(const DAT_SOCK_ADDR *sa, char *buf, size_t size);
/* The value of the named attribute `name`, or NULL. */
const char *named_value(DAT_COUNT n, const DAT_NAMED_ATTR *attrs, const char *name);
/* The transport an open IA says it uses (points into the attributes or is static). */
const char *transport_of(const DAT_IA_ATTR *a, const DAT_PROVIDER_ATTR *p);
const char *yes_no(DAT_BOOLEAN b);
const char *extension_name(DAT_EXTENSION e);
const char *iov_ownership_name(DAT_IOV_OWNERSHIP o);
const char *ep_creator_name(DAT_EP_CREATOR_FOR_PSP c);
const char *rmr_scope_name(DAT_RMR_SCOPE s);

/* ---- dat2-info-json.c: the JSON form, written to standard output as it goes ------------ */

/* Members of the innermost open object take a key; elements of an array take NULL. */
void json_object_begin(const char *key);
void json_object_end(void);
void json_array_begin(const char *key);
void json_array_end(void);
void json_string(const char *key, const char *value); /* NULL value: null */
void json_string_n(const char *key, const char *value, size_t len);
void json_int(const char *key, long long value);
void json_uint(const char *key, unsigned long long value);
void json_bool(const char *key, int value);
/* An array of the non-empty lines of a captured text (as next_line gives them). */
void json_lines(const char *key, const char *text);
/* {"code": N, "name": "DAT_...", "subtype": "DAT_..." or null} for a DAT_RETURN. */
void json_dat_return(const char *key, DAT_RETURN rc);
void json_ia_attributes(const char *key, const DAT_IA_ATTR *a);
void json_provider_attributes(const char *key, const DAT_PROVIDER_ATTR *p);
/* Ends the document with a newline. */
void json_finish(void);

/* ---- dat2-info-summary.c: the default form, what opens and why the rest does not -------- */

void summary_opens(const char *name, const char *device, const char *library,
		   const char *transport, const char *address, const char *memlock);
/* `from_conf`: named by dat.conf (else a built-in IA without an entry); `reason`: what
 * reason_summary gave; `lib_path` and `device` (NULL if none): what it replaced by <library>
 * and <device>. */
void summary_fails(const char *name, int from_conf, DAT_RETURN rc, const char *reason,
		   const char *lib_path, const char *device);
/* The table of the IAs that open, then one line per group of those that do not. */
void summary_print(void);
/* The groups as a JSON array. */
void summary_json_groups(const char *key);
/*
 * The first message of `log` with what belongs to one entry taken out, so that entries that
 * fail the same way compare equal: the "dat.conf:line: " and "ia_name: " prefixes and a dapl
 * provider's time stamp go, and the IA name, library path and device (first word of the
 * ia_params) become <ia>, <library> and <device>. Any of the strings may be NULL. Returns a
 * new string, or NULL when out of memory.
 */
char *reason_summary(const char *log, const char *ia_name, const char *origin,
		     const char *lib_path, const char *ia_params);
void summary_free(void);

#endif
