/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * dat2-info's text output: one "label: value" line per field, and the attributes an IA that
 * opens reports (dat_ia_query), in the order of the DAT structures.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "dat2-info.h"

#define LABEL_WIDTH 35

/* ---- lines ---------------------------------------------------------------------------- */

void field(const char *label, const char *fmt, ...)
{
	va_list ap;
	int pad = LABEL_WIDTH - (int)strlen(label);

	printf("    %s:%*s", label, pad > 1 ? pad : 1, "");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

int next_line(const char **p, const char **line, size_t *len)
{
	static const char prefix[] = "DAT Registry: ";

	while (*p && **p) {
		const char *start = *p, *end = strchr(start, '\n');
		size_t n = end ? (size_t)(end - start) : strlen(start);

		*p = end ? end + 1 : NULL;
		if (n >= sizeof prefix - 1 && strncmp(start, prefix, sizeof prefix - 1) == 0) {
			start += sizeof prefix - 1;
			n -= sizeof prefix - 1;
		}
		while (n > 0 && (start[n - 1] == '\r' || start[n - 1] == ' '))
			n--;
		if (n > 0) {
			*line = start;
			*len = n;
			return 1;
		}
	}
	return 0;
}

/* One field line per non-empty line of `text`, without the library's own prefix. */
void text_lines(const char *label, const char *text)
{
	const char *p = text, *line;
	size_t len;

	while (next_line(&p, &line, &len))
		field(label, "%.*s", (int)len, line);
}

const char *yes_no(DAT_BOOLEAN b)
{
	return b ? "yes" : "no";
}

static void named_attrs(const char *label, DAT_COUNT n, const DAT_NAMED_ATTR *attrs)
{
	for (DAT_COUNT i = 0; attrs && i < n; i++)
		field(label, "%s=%s", attrs[i].name ? attrs[i].name : "(null)",
		      attrs[i].value ? attrs[i].value : "(null)");
}

void format_address(const DAT_SOCK_ADDR *sa, char *buf, size_t size)
{
	char text[INET6_ADDRSTRLEN] = "";
	unsigned port = 0;

	if (!sa) {
		snprintf(buf, size, "none");
		return;
	}
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
		port = ntohs(in6->sin6_port);
	} else {
		snprintf(buf, size, "address family %d", sa->sa_family);
		return;
	}
	if (port)
		snprintf(buf, size, "%s port %u", text, port);
	else
		snprintf(buf, size, "%s", text);
}

static void address(const DAT_SOCK_ADDR *sa)
{
	char text[INET6_ADDRSTRLEN + 64];

	format_address(sa, text, sizeof text);
	field("ia_address", "%s", text);
}

const char *named_value(DAT_COUNT n, const DAT_NAMED_ATTR *attrs, const char *name)
{
	for (DAT_COUNT i = 0; attrs && i < n; i++)
		if (attrs[i].name && attrs[i].value && strcmp(attrs[i].name, name) == 0)
			return attrs[i].value;
	return NULL;
}

const char *transport_of(const DAT_IA_ATTR *a, const DAT_PROVIDER_ATTR *p)
{
	const char *verbs = named_value(p->num_provider_specific_attr, p->provider_specific_attr,
					"DAT2_VERBS_TRANSPORT");
	const char *device = named_value(p->num_provider_specific_attr, p->provider_specific_attr,
					 "DAT2_DEVICE");

	if (verbs && *verbs)
		return verbs;
	if (device && strcmp(device, "soft") == 0)
		return "TCP";
	/* Another provider's DAT extension names the verbs family it speaks, not the link. */
	if (a->extension_supported == DAT_EXTENSION_IW)
		return "iWARP";
	return "unknown";
}

const char *extension_name(DAT_EXTENSION e)
{
	switch (e) {
	case DAT_EXTENSION_NONE: return "none";
	case DAT_EXTENSION_IB: return "InfiniBand";
	case DAT_EXTENSION_IW: return "iWARP";
	}
	return "unknown";
}

const char *iov_ownership_name(DAT_IOV_OWNERSHIP o)
{
	switch (o) {
	case DAT_IOV_CONSUMER: return "consumer";
	case DAT_IOV_PROVIDER_NOMOD: return "provider, unmodified";
	case DAT_IOV_PROVIDER_MOD: return "provider, modified";
	}
	return "unknown";
}

const char *ep_creator_name(DAT_EP_CREATOR_FOR_PSP c)
{
	switch (c) {
	case DAT_PSP_CREATES_EP_NEVER: return "never";
	case DAT_PSP_CREATES_EP_IFASKED: return "if asked";
	case DAT_PSP_CREATES_EP_ALWAYS: return "always";
	}
	return "unknown";
}

const char *rmr_scope_name(DAT_RMR_SCOPE s)
{
	switch (s) {
	case DAT_RMR_SCOPE_EP: return "EP";
	case DAT_RMR_SCOPE_PZ: return "PZ";
	case DAT_RMR_SCOPE_ANY: return "any";
	}
	return "unknown";
}

void ia_attributes(const DAT_IA_ATTR *a)
{
	field("adapter", "%.*s", DAT_NAME_MAX_LENGTH, a->adapter_name);
	field("vendor", "%.*s", DAT_NAME_MAX_LENGTH, a->vendor_name);
	field("hardware_version", "%u.%u", a->hardware_version_major, a->hardware_version_minor);
	field("firmware_version", "%u.%u", a->firmware_version_major, a->firmware_version_minor);
	address(a->ia_address_ptr);
	field("max_eps", "%d", a->max_eps);
	field("max_dto_per_ep", "%d", a->max_dto_per_ep);
	field("max_evds", "%d", a->max_evds);
	field("max_evd_qlen", "%d", a->max_evd_qlen);
	field("max_pzs", "%d", a->max_pzs);
	field("max_lmrs", "%d", a->max_lmrs);
	field("max_lmr_block_size", "%llu", (unsigned long long)a->max_lmr_block_size);
	field("max_rmrs", "%d", a->max_rmrs);
	field("max_message_size", "%llu", (unsigned long long)a->max_message_size);
	field("max_rdma_size", "%llu", (unsigned long long)a->max_rdma_size);
	field("max_iov_segments_per_dto", "%d", a->max_iov_segments_per_dto);
	field("max_rdma_read_in", "%d", a->max_rdma_read_in);
	field("max_rdma_read_out", "%d", a->max_rdma_read_out);
	field("max_rdma_read_per_ep_in", "%d", a->max_rdma_read_per_ep_in);
	field("max_rdma_read_per_ep_out", "%d", a->max_rdma_read_per_ep_out);
	field("max_srqs", "%d", a->max_srqs);
	field("extension", "%s (version %d)", extension_name(a->extension_supported),
	      a->extension_version);
	if (!verbose)
		return;
	field("max_lmr_virtual_address", "%#llx", (unsigned long long)a->max_lmr_virtual_address);
	field("max_rmr_target_address", "%#llx", (unsigned long long)a->max_rmr_target_address);
	field("max_ep_per_srq", "%d", a->max_ep_per_srq);
	field("max_recv_per_srq", "%d", a->max_recv_per_srq);
	field("max_iov_segments_per_rdma_read", "%d", a->max_iov_segments_per_rdma_read);
	field("max_iov_segments_per_rdma_write", "%d", a->max_iov_segments_per_rdma_write);
	field("rdma_read_per_ep_in_guaranteed", "%s", yes_no(a->max_rdma_read_per_ep_in_guaranteed));
	field("rdma_read_per_ep_out_guaranteed", "%s", yes_no(a->max_rdma_read_per_ep_out_guaranteed));
	field("zero_based_lmrs", "%s", yes_no(a->zb_supported));
	named_attrs("transport_attr", a->num_transport_attr, a->transport_attr);
	named_attrs("vendor_attr", a->num_vendor_attr, a->vendor_attr);
}

void provider_attributes(const DAT_PROVIDER_ATTR *p)
{
	field("provider", "%.*s %u.%u", DAT_NAME_MAX_LENGTH, p->provider_name,
	      p->provider_version_major, p->provider_version_minor);
	field("dat_version", "%u.%u", p->dapl_version_major, p->dapl_version_minor);
	field("thread_safe", "%s", yes_no(p->is_thread_safe));
	field("max_private_data_size", "%d", p->max_private_data_size);
	field("srq_supported", "%s", yes_no(p->srq_supported));
	if (verbose) {
		field("lmr_mem_types_supported", "%#x", (unsigned)p->lmr_mem_types_supported);
		field("iov_ownership_on_return", "%s", iov_ownership_name(p->iov_ownership_on_return));
		field("qos_supported", "%#x", (unsigned)p->dat_qos_supported);
		field("completion_flags_supported", "%#x", (unsigned)p->completion_flags_supported);
		field("supports_multipath", "%s", yes_no(p->supports_multipath));
		field("ep_creator", "%s", ep_creator_name(p->ep_creator));
		field("pz_support", "%s", p->pz_support == DAT_PZ_SHAREABLE ? "shareable" : "unique");
		field("optimal_buffer_alignment", "%u", p->optimal_buffer_alignment);
		for (int i = 0; i < 6; i++) {
			char row[7];
			for (int j = 0; j < 6; j++)
				row[j] = p->evd_stream_merging_supported[i][j] ? '1' : '0';
			row[6] = '\0';
			field("evd_stream_merging_supported", "%s", row);
		}
		field("srq_watermarks_supported", "%d", p->srq_watermarks_supported);
		field("srq_ep_pz_difference_supported", "%s", yes_no(p->srq_ep_pz_difference_supported));
		field("srq_info_supported", "%d", p->srq_info_supported);
		field("ep_recv_info_supported", "%d", p->ep_recv_info_supported);
		field("lmr_sync_req", "%s", yes_no(p->lmr_sync_req));
		field("dto_async_return_guaranteed", "%s", yes_no(p->dto_async_return_guaranteed));
		field("rdma_write_for_rdma_read_req", "%s", yes_no(p->rdma_write_for_rdma_read_req));
		field("rdma_read_lmr_rmr_context_exposure", "%s",
		      yes_no(p->rdma_read_lmr_rmr_context_exposure));
		field("rmr_scope_supported", "%s", rmr_scope_name(p->rmr_scope_supported));
		field("is_signal_safe", "%s", yes_no(p->is_signal_safe));
		field("ha_supported", "%s", yes_no(p->ha_supported));
		field("ha_loadbalancing", "%u", (unsigned)p->ha_loadbalancing);
	}
	named_attrs("provider_attr", p->num_provider_specific_attr, p->provider_specific_attr);
}
