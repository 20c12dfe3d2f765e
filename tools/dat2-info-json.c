/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * dat2-info's JSON form (--json): written to standard output as each IA is opened, because an
 * IA's attributes point into the provider's memory only while it is open.
 *
 * Every string is escaped (quotes, backslashes, control characters), and bytes that are not
 * UTF-8 become U+FFFD: names and messages come from dat.conf, providers and dlerror, and
 * may hold anything.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include "dat2-info.h"

#define MAX_DEPTH 16

static int depth;
static int has_members[MAX_DEPTH]; /* per open object or array: something was written */

/* The length of the UTF-8 sequence at s (at most `left` bytes), or 0 if it is not valid. */
static size_t utf8_length(const unsigned char *s, size_t left)
{
	size_t n;
	unsigned min, cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2, cp = s[0] & 0x1f, min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3, cp = s[0] & 0x0f, min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4, cp = s[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n > left)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static void quoted(const char *value, size_t len)
{
	const unsigned char *s = (const unsigned char *)value;

	putchar('"');
	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		size_t n;

		switch (c) {
		case '"': fputs("\\\"", stdout); i++; continue;
		case '\\': fputs("\\\\", stdout); i++; continue;
		case '\n': fputs("\\n", stdout); i++; continue;
		case '\r': fputs("\\r", stdout); i++; continue;
		case '\t': fputs("\\t", stdout); i++; continue;
		case '\b': fputs("\\b", stdout); i++; continue;
		case '\f': fputs("\\f", stdout); i++; continue;
		}
		if (c < 0x20 || c == 0x7f) {
			printf("\\u%04x", c);
			i++;
			continue;
		}
		n = utf8_length(s + i, len - i);
		if (n == 0) {
			fputs("\\ufffd", stdout);
			i++;
			continue;
		}
		fwrite(s + i, 1, n, stdout);
		i += n;
	}
	putchar('"');
}

/* The separator, indentation and key before a member or element. */
static void member(const char *key)
{
	if (depth > 0 && depth <= MAX_DEPTH) {
		if (has_members[depth - 1])
			putchar(',');
		has_members[depth - 1] = 1;
		printf("\n%*s", 2 * depth, "");
	}
	if (key) {
		quoted(key, strlen(key));
		fputs(": ", stdout);
	}
}

static void open_nested(const char *key, char bracket)
{
	member(key);
	putchar(bracket);
	if (depth < MAX_DEPTH)
		has_members[depth] = 0;
	depth++;
}

static void close_nested(char bracket)
{
	depth--;
	if (depth < MAX_DEPTH && has_members[depth])
		printf("\n%*s", 2 * depth, "");
	putchar(bracket);
}

void json_object_begin(const char *key)
{
	open_nested(key, '{');
}

void json_object_end(void)
{
	close_nested('}');
}

void json_array_begin(const char *key)
{
	open_nested(key, '[');
}

void json_array_end(void)
{
	close_nested(']');
}

void json_string_n(const char *key, const char *value, size_t len)
{
	member(key);
	if (value)
		quoted(value, len);
	else
		fputs("null", stdout);
}

void json_string(const char *key, const char *value)
{
	json_string_n(key, value, value ? strlen(value) : 0);
}

void json_int(const char *key, long long value)
{
	member(key);
	printf("%lld", value);
}

void json_uint(const char *key, unsigned long long value)
{
	member(key);
	printf("%llu", value);
}

void json_bool(const char *key, int value)
{
	member(key);
	fputs(value ? "true" : "false", stdout);
}

void json_finish(void)
{
	putchar('\n');
}

void json_lines(const char *key, const char *text)
{
	const char *p = text, *line;
	size_t len;

	json_array_begin(key);
	while (next_line(&p, &line, &len))
		json_string_n(NULL, line, len);
	json_array_end();
}

void json_dat_return(const char *key, DAT_RETURN rc)
{
	const char *major = NULL, *minor = NULL;

	if (dat_strerror(rc, &major, &minor) != DAT_SUCCESS)
		major = minor = NULL;
	json_object_begin(key);
	json_uint("code", (unsigned)rc);
	json_string("name", major);
	json_string("subtype", minor && *minor ? minor : NULL);
	json_object_end();
}

/* DAT names are fixed-size arrays that need not end in a NUL. */
static void json_name(const char *key, const char *name)
{
	json_string_n(key, name, strnlen(name, DAT_NAME_MAX_LENGTH));
}

/* Named attributes as an object; a name given twice keeps its first value. */
static void json_named(const char *key, DAT_COUNT n, const DAT_NAMED_ATTR *attrs)
{
	json_object_begin(key);
	for (DAT_COUNT i = 0; attrs && i < n; i++) {
		const char *name = attrs[i].name ? attrs[i].name : "(null)";
		int seen = 0;

		for (DAT_COUNT j = 0; j < i && !seen; j++)
			seen = attrs[j].name && strcmp(attrs[j].name, name) == 0;
		if (!seen)
			json_string(name, attrs[i].value);
	}
	json_object_end();
}

void json_ia_attributes(const char *key, const DAT_IA_ATTR *a)
{
	char text[128];

	json_object_begin(key);
	json_name("adapter", a->adapter_name);
	json_name("vendor", a->vendor_name);
	snprintf(text, sizeof text, "%u.%u", a->hardware_version_major, a->hardware_version_minor);
	json_string("hardware_version", text);
	snprintf(text, sizeof text, "%u.%u", a->firmware_version_major, a->firmware_version_minor);
	json_string("firmware_version", text);
	if (a->ia_address_ptr) {
		format_address(a->ia_address_ptr, text, sizeof text);
		json_string("ia_address", text);
	} else {
		json_string("ia_address", NULL);
	}
	json_int("max_eps", a->max_eps);
	json_int("max_dto_per_ep", a->max_dto_per_ep);
	json_int("max_evds", a->max_evds);
	json_int("max_evd_qlen", a->max_evd_qlen);
	json_int("max_pzs", a->max_pzs);
	json_int("max_lmrs", a->max_lmrs);
	json_uint("max_lmr_block_size", a->max_lmr_block_size);
	json_int("max_rmrs", a->max_rmrs);
	json_uint("max_message_size", a->max_message_size);
	json_uint("max_rdma_size", a->max_rdma_size);
	json_int("max_iov_segments_per_dto", a->max_iov_segments_per_dto);
	json_int("max_rdma_read_in", a->max_rdma_read_in);
	json_int("max_rdma_read_out", a->max_rdma_read_out);
	json_int("max_rdma_read_per_ep_in", a->max_rdma_read_per_ep_in);
	json_int("max_rdma_read_per_ep_out", a->max_rdma_read_per_ep_out);
	json_int("max_srqs", a->max_srqs);
	json_string("extension", extension_name(a->extension_supported));
	json_int("extension_version", a->extension_version);
	json_uint("max_lmr_virtual_address", a->max_lmr_virtual_address);
	json_uint("max_rmr_target_address", a->max_rmr_target_address);
	json_int("max_ep_per_srq", a->max_ep_per_srq);
	json_int("max_recv_per_srq", a->max_recv_per_srq);
	json_int("max_iov_segments_per_rdma_read", a->max_iov_segments_per_rdma_read);
	json_int("max_iov_segments_per_rdma_write", a->max_iov_segments_per_rdma_write);
	json_bool("rdma_read_per_ep_in_guaranteed", a->max_rdma_read_per_ep_in_guaranteed);
	json_bool("rdma_read_per_ep_out_guaranteed", a->max_rdma_read_per_ep_out_guaranteed);
	json_bool("zero_based_lmrs", a->zb_supported);
	json_named("transport_attr", a->num_transport_attr, a->transport_attr);
	json_named("vendor_attr", a->num_vendor_attr, a->vendor_attr);
	json_object_end();
}

void json_provider_attributes(const char *key, const DAT_PROVIDER_ATTR *p)
{
	char text[32];

	json_object_begin(key);
	json_name("provider", p->provider_name);
	snprintf(text, sizeof text, "%u.%u", p->provider_version_major, p->provider_version_minor);
	json_string("provider_version", text);
	snprintf(text, sizeof text, "%u.%u", p->dapl_version_major, p->dapl_version_minor);
	json_string("dat_version", text);
	json_bool("thread_safe", p->is_thread_safe);
	json_int("max_private_data_size", p->max_private_data_size);
	json_bool("srq_supported", p->srq_supported);
	json_uint("lmr_mem_types_supported", (unsigned)p->lmr_mem_types_supported);
	json_string("iov_ownership_on_return", iov_ownership_name(p->iov_ownership_on_return));
	json_uint("qos_supported", (unsigned)p->dat_qos_supported);
	json_uint("completion_flags_supported", (unsigned)p->completion_flags_supported);
	json_bool("supports_multipath", p->supports_multipath);
	json_string("ep_creator", ep_creator_name(p->ep_creator));
	json_string("pz_support", p->pz_support == DAT_PZ_SHAREABLE ? "shareable" : "unique");
	json_uint("optimal_buffer_alignment", p->optimal_buffer_alignment);
	json_array_begin("evd_stream_merging_supported");
	for (int i = 0; i < 6; i++) {
		char row[7];
		for (int j = 0; j < 6; j++)
			row[j] = p->evd_stream_merging_supported[i][j] ? '1' : '0';
		row[6] = '\0';
		json_string(NULL, row);
	}
	json_array_end();
	json_int("srq_watermarks_supported", p->srq_watermarks_supported);
	json_bool("srq_ep_pz_difference_supported", p->srq_ep_pz_difference_supported);
	json_int("srq_info_supported", p->srq_info_supported);
	json_int("ep_recv_info_supported", p->ep_recv_info_supported);
	json_bool("lmr_sync_req", p->lmr_sync_req);
	json_bool("dto_async_return_guaranteed", p->dto_async_return_guaranteed);
	json_bool("rdma_write_for_rdma_read_req", p->rdma_write_for_rdma_read_req);
	json_bool("rdma_read_lmr_rmr_context_exposure", p->rdma_read_lmr_rmr_context_exposure);
	json_string("rmr_scope_supported", rmr_scope_name(p->rmr_scope_supported));
	json_bool("is_signal_safe", p->is_signal_safe);
	json_bool("ha_supported", p->ha_supported);
	json_uint("ha_loadbalancing", (unsigned)p->ha_loadbalancing);
	json_named("provider_specific_attr", p->num_provider_specific_attr,
		   p->provider_specific_attr);
	json_object_end();
}
