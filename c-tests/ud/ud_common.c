/* Helpers of the UD tests: the IAs, UD EPs, resolutions and datagrams. */
#include "ud.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

const char *ud_ia_s(void)
{
    return dx_on_soft_device() ? "ud-soft2" : dx_ia_name();
}

const char *ud_ia_c(void)
{
    return dx_ia_name();
}

int ud_support(DAT_IA_HANDLE ia, unsigned long *max)
{
    DAT_PROVIDER_ATTR pa;
    int ud = -1;
    *max = 0;
    memset(&pa, 0, sizeof pa);
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa) != DAT_SUCCESS)
        return -1;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++) {
        const char *name = pa.provider_specific_attr[i].name, *value = pa.provider_specific_attr[i].value;
        if (!name || !value)
            continue;
        if (strcmp(name, DAT_IB_ATTR_UD) == 0)
            ud = strcmp(value, "TRUE") == 0 ? 1 : 0;
        else if (strcmp(name, "DAT2_UD_MAX_MESSAGE") == 0)
            *max = strtoul(value, NULL, 10);
    }
    return ud;
}

struct sockaddr_storage ud_ia_address(DAT_IA_HANDLE ia)
{
    struct sockaddr_storage a;
    DAT_IA_ATTR attr;
    memset(&a, 0, sizeof a);
    memset(&attr, 0, sizeof attr);
    if (dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL) == DAT_SUCCESS && attr.ia_address_ptr)
        memcpy(&a, attr.ia_address_ptr,
               attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    return a;
}

void ud_gid_of(const struct sockaddr_storage *a, unsigned char gid[16])
{
    memset(gid, 0, 16);
    if (a->ss_family == AF_INET6) {
        memcpy(gid, &((const struct sockaddr_in6 *)(const void *)a)->sin6_addr, 16);
    } else {
        gid[10] = 0xff;
        gid[11] = 0xff;
        memcpy(gid + 12, &((const struct sockaddr_in *)(const void *)a)->sin_addr, 4);
    }
}

const char *ud_addr_text(const void *sa, char *buf, size_t size)
{
    const struct sockaddr *s = sa;
    if (s->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)size);
    else if (s->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)size);
    else
        snprintf(buf, size, "(family %d)", (int)s->sa_family);
    return buf;
}

int ud_same_address(const DAT_SOCK_ADDR6 *ia_addr, const struct sockaddr_storage *a)
{
    const struct sockaddr *got = (const struct sockaddr *)(const void *)ia_addr;
    if (got->sa_family != a->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)(const void *)got)->sin_addr,
                      &((const struct sockaddr_in *)(const void *)a)->sin_addr, 4) == 0;
    return memcmp(&((const struct sockaddr_in6 *)(const void *)got)->sin6_addr,
                  &((const struct sockaddr_in6 *)(const void *)a)->sin6_addr, 16) == 0;
}

void ud_attr(DAT_EP_ATTR *a, DAT_VLEN max_msg)
{
    attr_init(a);
    a->service_type = (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD;
    a->max_message_size = max_msg;
    a->max_rdma_size = 0;
    a->max_rdma_read_in = 0;
    a->max_rdma_read_out = 0;
    a->max_rdma_read_iov = 0;
    a->max_rdma_write_iov = 0;
}

int ud_ep_make(struct node *n, DAT_VLEN max_msg, DAT_EP_HANDLE *ep)
{
    DAT_EP_ATTR a;
    ud_attr(&a, max_msg);
    return ep_make(n, &a, ep);
}

/* ---- resolutions ------------------------------------------------------------------------ */

const DAT_IB_EXTENSION_EVENT_DATA *ud_ext(const DAT_EVENT *ev)
{
    return (const DAT_IB_EXTENSION_EVENT_DATA *)(const void *)ev->event_extension_data;
}

void ud_peer_of(const DAT_EVENT *ev, struct ud_peer *p)
{
    const DAT_IB_EXTENSION_EVENT_DATA *x = ud_ext(ev);
    const DAT_CONNECTION_EVENT_DATA *cd = &ev->event_data.connect_event_data;
    memset(p, 0, sizeof *p);
    p->number = ev->event_number;
    p->ep = cd->ep_handle;
    p->type = x->type;
    p->status = x->status;
    p->ah = x->remote_ah;
    p->context = x->context;
    p->pdata_size = cd->private_data_size;
    if (cd->private_data && cd->private_data_size > 0 && cd->private_data_size <= (DAT_COUNT)sizeof p->pdata)
        memcpy(p->pdata, cd->private_data, (size_t)cd->private_data_size);
}

int ud_connect_at(int line, struct node *s, DAT_CONN_QUAL port, DAT_EP_HANDLE ce, const char *pdata)
{
    struct sockaddr_storage a = ud_ia_address(s->ia);
    if (a.ss_family == AF_UNSPEC) {
        harness_fail(line, "the server's IA reports no address");
        return 0;
    }
    return harness_expect_code(line, "dat_ep_connect (UD)",
                               dat_ep_connect(ce, (DAT_IA_ADDRESS_PTR)&a, port, 5000000, pdata ? (DAT_COUNT)strlen(pdata) + 1 : 0,
                                              (DAT_PVOID)pdata, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                               DAT_SUCCESS);
}

int ud_accept_next_at(int line, struct node *s, DAT_EP_HANDLE se, const char *pdata)
{
    DAT_EVENT ev;
    DAT_RETURN rc = wait_ev(s->cr, WAIT_MS, &ev);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "no connection request within %d ms (dat_evd_wait 0x%08x)", WAIT_MS, (unsigned)rc);
        return 0;
    }
    if (ev.event_number != (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT) {
        harness_fail(line, "request event 0x%x, expected DAT_IB_UD_CONNECTION_REQUEST_EVENT 0x40001",
                     (unsigned)ev.event_number);
        return 0;
    }
    return harness_expect_code(line, "dat_cr_accept (UD)",
                               dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, se,
                                             pdata ? (DAT_COUNT)strlen(pdata) + 1 : 0, (DAT_PVOID)pdata),
                               DAT_SUCCESS);
}

int ud_wait_established_at(int line, DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, DAT_IB_EXT_TYPE type,
                           const struct sockaddr_storage *peer_ia, struct ud_peer *p)
{
    DAT_EVENT ev;
    char want[64], got[64];
    DAT_RETURN rc = wait_ev(evd, WAIT_MS, &ev);
    memset(p, 0, sizeof *p);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "no UD connection event within %d ms (dat_evd_wait 0x%08x)", WAIT_MS, (unsigned)rc);
        return 0;
    }
    ud_peer_of(&ev, p);
    if (p->number != (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED) {
        harness_fail(line, "connection event 0x%x, expected DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED 0x40002",
                     (unsigned)p->number);
        return 0;
    }
    int ok = 1;
    if (p->ep != ep) {
        harness_fail(line, "UD ESTABLISHED names EP %p, expected %p", p->ep, ep);
        ok = 0;
    }
    if (p->type != type) {
        harness_fail(line, "UD ESTABLISHED of extension type %d, expected %d (%s)", (int)p->type, (int)type,
                     type == DAT_IB_UD_REMOTE_AH ? "DAT_IB_UD_REMOTE_AH" : "DAT_IB_UD_PASSIVE_REMOTE_AH");
        ok = 0;
    }
    if (p->status != DAT_OP_SUCCESS) {
        harness_fail(line, "UD ESTABLISHED with extension status %d", (int)p->status);
        ok = 0;
    }
    if (p->ah.ah == NULL) {
        harness_fail(line, "UD ESTABLISHED with a NULL remote_ah.ah");
        ok = 0;
    }
    if (p->context.as_64 == 0) {
        harness_fail(line, "UD ESTABLISHED with a zero context");
        ok = 0;
    }
    if (peer_ia && peer_ia->ss_family != AF_UNSPEC && !ud_same_address(&p->ah.ia_addr, peer_ia)) {
        harness_fail(line, "remote_ah.ia_addr is %s, expected the peer IA's %s", ud_addr_text(&p->ah.ia_addr, got, sizeof got),
                     ud_addr_text(peer_ia, want, sizeof want));
        ok = 0;
    }
    return ok;
}

int ud_resolve_at(int line, struct node *s, DAT_EP_HANDLE se, struct node *c, DAT_EP_HANDLE ce, struct ud_peer *at_s,
                  struct ud_peer *at_c)
{
    struct sockaddr_storage sa = ud_ia_address(s->ia), ca = ud_ia_address(c->ia);
    if (!ud_connect_at(line, s, s->port, ce, "req") || !ud_accept_next_at(line, s, se, "acc") ||
        !ud_wait_established_at(line, s->conn, se, DAT_IB_UD_PASSIVE_REMOTE_AH, &ca, at_s) ||
        !ud_wait_established_at(line, c->conn, ce, DAT_IB_UD_REMOTE_AH, &sa, at_c))
        return 0;
    int ok = 1;
    if (at_s->pdata_size != 4 || memcmp(at_s->pdata, "req", 4) != 0) {
        harness_fail(line, "the passive side's ESTABLISHED carries %d bytes of private data, expected the request's \"req\"",
                     (int)at_s->pdata_size);
        ok = 0;
    }
    if (at_c->pdata_size != 4 || memcmp(at_c->pdata, "acc", 4) != 0) {
        harness_fail(line, "the active side's ESTABLISHED carries %d bytes of private data, expected the accept's \"acc\"",
                     (int)at_c->pdata_size);
        ok = 0;
    }
    return ok;
}

/* ---- the rig -------------------------------------------------------------------------- */

int ud_rig_up_at(int line, struct ud_rig *r, DAT_CONN_QUAL port, DAT_VLEN max_msg, int resolve)
{
    unsigned long cmax = 0;
    memset(r, 0, sizeof *r);
    if (!node_open(&r->s, ud_ia_s(), 64, 64) || !node_open(&r->c, ud_ia_c(), 64, 64))
        return 0;
    r->sa = ud_ia_address(r->s.ia);
    r->ca = ud_ia_address(r->c.ia);
    if (ud_support(r->s.ia, &r->max) != 1 || ud_support(r->c.ia, &cmax) != 1) {
        harness_fail(line, "the IAs do not report DAT_IB_UD=TRUE");
        return 0;
    }
    DAT_EP_ATTR a;
    ud_attr(&a, max_msg);
    if (!harness_expect_code(line, "UD dat_ep_create (server)",
                             dat_ep_create(r->s.ia, r->s.pz, r->s.rcv, r->s.req, r->s.conn, &a, &r->se), DAT_SUCCESS) ||
        !harness_expect_code(line, "UD dat_ep_create (client)",
                             dat_ep_create(r->c.ia, r->c.pz, r->c.rcv, r->c.req, r->c.conn, &a, &r->ce), DAT_SUCCESS) ||
        !mr_make(&r->s, r->s.pz, 65536, PRIV_ALL, &r->sm) || !mr_make(&r->c, r->c.pz, 65536, PRIV_ALL, &r->cm) ||
        !node_listen(&r->s, port))
        return 0;
    return !resolve || ud_resolve_at(line, &r->s, r->se, &r->c, r->ce, &r->at_s, &r->at_c);
}

void ud_rig_down(struct ud_rig *r)
{
    node_close(&r->c);
    node_close(&r->s);
    mr_drop(&r->sm);
    mr_drop(&r->cm);
}

/* ---- datagrams ------------------------------------------------------------------------ */

int ud_send_at(int line, DAT_EP_HANDLE ep, const struct mr *m, size_t off, DAT_SEG_LENGTH len,
               const DAT_IB_ADDR_HANDLE *ah, uint64_t cookie)
{
    DAT_LMR_TRIPLET t = lt(m, off, len);
    return harness_expect_code(line, "dat_ib_post_send_ud",
                               dat_ib_post_send_ud(ep, 1, &t, ah, ck(cookie), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
}

int ud_wait_dto_at(int line, DAT_EVD_HANDLE evd, DAT_IB_EXT_TYPE type, DAT_EVENT *ev)
{
    DAT_RETURN rc = wait_ev(evd, WAIT_MS, ev);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "no %s completion within %d ms (dat_evd_wait 0x%08x)", type == DAT_IB_UD_SEND ? "UD send" : "UD receive",
                     WAIT_MS, (unsigned)rc);
        return 0;
    }
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
    if (ev->event_number != (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT) {
        harness_fail(line, "event 0x%x (status %u), expected DAT_IB_DTO_EVENT 0x40000", (unsigned)ev->event_number,
                     (unsigned)d->status);
        return 0;
    }
    DAT_DTOS op = type == DAT_IB_UD_SEND ? (DAT_DTOS)DAT_IB_DTO_SEND_UD : (DAT_DTOS)DAT_IB_DTO_RECV_UD;
    int ok = 1;
    if (ud_ext(ev)->type != type) {
        harness_fail(line, "extension type %d, expected %d (%s)", (int)ud_ext(ev)->type, (int)type,
                     type == DAT_IB_UD_SEND ? "DAT_IB_UD_SEND" : "DAT_IB_UD_RECV");
        ok = 0;
    }
    if (d->operation != op) {
        harness_fail(line, "operation %d, expected %d (%s)", (int)d->operation, (int)op,
                     type == DAT_IB_UD_SEND ? "DAT_IB_DTO_SEND_UD" : "DAT_IB_DTO_RECV_UD");
        ok = 0;
    }
    return ok;
}

int ud_wait_sent_at(int line, DAT_EVD_HANDLE evd, uint64_t cookie)
{
    DAT_EVENT ev;
    if (!ud_wait_dto_at(line, evd, DAT_IB_UD_SEND, &ev))
        return 0;
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
    if (d->status != DAT_DTO_SUCCESS || d->user_cookie.as_64 != cookie) {
        harness_fail(line, "send completion: status %u cookie %llu, expected success and cookie %llu", (unsigned)d->status,
                     (unsigned long long)d->user_cookie.as_64, (unsigned long long)cookie);
        return 0;
    }
    if (ud_ext(&ev)->status != DAT_OP_SUCCESS) {
        harness_fail(line, "send completion: extension status %d", (int)ud_ext(&ev)->status);
        return 0;
    }
    return 1;
}

static void hex(const unsigned char *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

int ud_check_recv_at(int line, const DAT_EVENT *ev, DAT_EP_HANDLE ep, uint64_t cookie, const unsigned char *buf,
                     const unsigned char *want, size_t len, const struct sockaddr_storage *sender,
                     const struct sockaddr_storage *receiver)
{
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
    unsigned char sgid[16], dgid[16];
    char a[48], b[48];
    int ok = 1;
    if (d->status != DAT_DTO_SUCCESS) {
        harness_fail(line, "receive status %u, expected success", (unsigned)d->status);
        return 0;
    }
    if (d->ep_handle != ep) {
        harness_fail(line, "receive reported for EP %p, expected %p", d->ep_handle, ep);
        ok = 0;
    }
    if (d->user_cookie.as_64 != cookie) {
        harness_fail(line, "receive cookie %llu, expected %llu", (unsigned long long)d->user_cookie.as_64,
                     (unsigned long long)cookie);
        ok = 0;
    }
    if (d->transfered_length != GRH + len) {
        harness_fail(line, "receive length %llu, expected %d + %zu (GRH and payload)", (unsigned long long)d->transfered_length,
                     GRH, len);
        return 0;
    }
    if (memcmp(buf + GRH, want, len) != 0) {
        harness_fail(line, "the payload at offset %d differs from what was sent (%zu bytes)", GRH, len);
        ok = 0;
    }
    /* RoCE v2 between IPv4 addresses (the verbs device on rxe): the hardware writes the
     * datagram's IPv4 header in the last 20 bytes of the area, the first 20 left as they were
     * (zero here); its source and destination are at 32 and 36. */
    static const unsigned char zero[20];
    if (buf[20] >> 4 == 4 && memcmp(buf, zero, 20) == 0 && sender && sender->ss_family == AF_INET && receiver &&
        receiver->ss_family == AF_INET) {
        const void *src = &((const struct sockaddr_in *)(const void *)sender)->sin_addr;
        const void *dst = &((const struct sockaddr_in *)(const void *)receiver)->sin_addr;
        if (memcmp(buf + 32, src, 4) != 0 || memcmp(buf + 36, dst, 4) != 0) {
            hex(buf + 20, 20, a);
            harness_fail(line, "the GRH area's IPv4 header (bytes 20..40) %s does not name sender and receiver", a);
            ok = 0;
        }
        return ok;
    }
    if (buf[0] >> 4 != 6) {
        harness_fail(line, "GRH byte 0 is 0x%02x: IP version %d, expected 6", buf[0], buf[0] >> 4);
        ok = 0;
    }
    if (sender && sender->ss_family != AF_UNSPEC) {
        ud_gid_of(sender, sgid);
        if (memcmp(buf + 8, sgid, 16) != 0) {
            hex(buf + 8, 16, a);
            hex(sgid, 16, b);
            harness_fail(line, "GRH SGID (bytes 8..24) %s, expected the sender's %s", a, b);
            ok = 0;
        }
    }
    if (receiver && receiver->ss_family != AF_UNSPEC) {
        ud_gid_of(receiver, dgid);
        if (memcmp(buf + 24, dgid, 16) != 0) {
            hex(buf + 24, 16, a);
            hex(dgid, 16, b);
            harness_fail(line, "GRH DGID (bytes 24..40) %s, expected the receiver's %s", a, b);
            ok = 0;
        }
    }
    return ok;
}

int ud_drain(DAT_EVD_HANDLE evd, int ms)
{
    DAT_EVENT ev;
    int n = 0;
    double end = dx_now() + ms / 1000.0;
    for (;;) {
        double left = end - dx_now();
        if (left <= 0)
            break;
        if (wait_ev(evd, (int)(left * 1000) + 1, &ev) == DAT_SUCCESS)
            n++;
    }
    return n;
}
