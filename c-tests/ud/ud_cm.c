/* UD cases about attributes, address resolution (dat_ep_connect / dat_cr_accept on UD EPs)
 * and the release of what resolutions hand out (dat_ib_ud_ah_free, dat_ib_ud_cm_free). */
#include "ud.h"

#include <netinet/in.h>
#include <stdlib.h>

#include "ud_cases.h"

/* ---- attributes ----------------------------------------------------------------------- */

static void check_ud_ep_attr(struct node *n, DAT_VLEN asked, DAT_VLEN want, const char *ia)
{
    DAT_EP_HANDLE ep;
    DAT_EP_ATTR a;
    DAT_EP_PARAM p;
    ud_attr(&a, asked);
    if (!EXPECT_RC(dat_ep_create(n->ia, n->pz, n->rcv, n->req, n->conn, &a, &ep), DAT_SUCCESS))
        return;
    memset(&p, 0x5a, sizeof p);
    if (EXPECT_RC(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p), DAT_SUCCESS)) {
        const DAT_EP_ATTR *q = &p.ep_attr;
        EXPECT(q->service_type == (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD, "%s: ep_query service_type %d, expected UD %d",
               ia, (int)q->service_type, (int)DAT_IB_SERVICE_TYPE_UD);
        EXPECT(q->max_message_size == want, "%s: UD EP asking max_message_size %llu has %llu, expected %llu", ia,
               (unsigned long long)asked, (unsigned long long)q->max_message_size, (unsigned long long)want);
        EXPECT(q->max_rdma_size == 0 && q->max_rdma_read_in == 0 && q->max_rdma_read_out == 0 &&
                   q->max_rdma_read_iov == 0 && q->max_rdma_write_iov == 0,
               "%s: UD EP's RDMA fields: max_rdma_size %llu, read_in %d, read_out %d, read_iov %d, write_iov %d; "
               "expected all 0",
               ia, (unsigned long long)q->max_rdma_size, (int)q->max_rdma_read_in, (int)q->max_rdma_read_out,
               (int)q->max_rdma_read_iov, (int)q->max_rdma_write_iov);
    }
    EXPECT_RC(dat_ep_free(ep), DAT_SUCCESS);
}

/* DAT_IB_UD=TRUE and DAT2_UD_MAX_MESSAGE (4096 on dat2-soft); a UD EP's max_message_size is
 * lowered to that limit, never raised, and it has no RDMA; an RC EP on the same IA keeps its
 * own limit. On dat2-soft UD is required: a soft device reporting FALSE fails here (the other
 * cases skip on it). */
void case_attributes(void)
{
    const char *names[2] = {ud_ia_c(), ud_ia_s()};
    for (int k = 0; k < 2; k++) {
        struct node n;
        unsigned long max = 0;
        if (k == 1 && strcmp(names[0], names[1]) == 0)
            break;
        if (!node_open(&n, names[k], 8, 8))
            continue;
        int ud = ud_support(n.ia, &max);
        harness_note("%s: DAT_IB_UD %s, DAT2_UD_MAX_MESSAGE %lu", names[k], ud < 0 ? "absent" : ud ? "TRUE" : "FALSE", max);
        if (ud != 1 && !dx_on_soft_device()) {
            harness_skip("%s reports DAT_IB_UD=%s", names[k], ud < 0 ? "(absent)" : "FALSE");
            node_close(&n);
            continue;
        }
        if (EXPECT(ud == 1, "%s: provider attribute DAT_IB_UD is %s, expected TRUE", names[k],
                   ud < 0 ? "absent" : "FALSE") &&
            EXPECT(max > 0, "%s: DAT2_UD_MAX_MESSAGE is absent or 0", names[k])) {
            if (dx_on_soft_device())
                EXPECT(max == 4096, "%s: DAT2_UD_MAX_MESSAGE %lu, expected 4096 on the soft device", names[k], max);
            check_ud_ep_attr(&n, (DAT_VLEN)1 << 20, (DAT_VLEN)max, names[k]);
            check_ud_ep_attr(&n, (DAT_VLEN)max + 1, (DAT_VLEN)max, names[k]);
            check_ud_ep_attr(&n, 100, 100, names[k]);
            check_ud_ep_attr(&n, 0, (DAT_VLEN)max, names[k]);
            /* the limit is UD's alone */
            DAT_EP_HANDLE rc;
            DAT_EP_PARAM p;
            if (ep_make(&n, NULL, &rc) && EXPECT_RC(dat_ep_query(rc, DAT_EP_FIELD_ALL, &p), DAT_SUCCESS))
                EXPECT(p.ep_attr.service_type == DAT_SERVICE_TYPE_RC && p.ep_attr.max_message_size > max,
                       "%s: an RC EP has service type %d and max_message_size %llu (the UD limit is %lu)", names[k],
                       (int)p.ep_attr.service_type, (unsigned long long)p.ep_attr.max_message_size, max);
        }
        node_close(&n);
    }
}

/* Where the provider has no UD (DAT_IB_UD FALSE or absent), a UD EP is refused with
 * DAT_MODEL_NOT_SUPPORTED and nothing is created. */
void case_no_ud_refused(void)
{
    struct node n;
    unsigned long max;
    if (!node_open(&n, ud_ia_c(), 8, 8))
        return;
    if (ud_support(n.ia, &max) == 1) {
        harness_skip("%s reports DAT_IB_UD=TRUE (the refusal is checked on IAs without UD)", ud_ia_c());
    } else {
        DAT_EP_ATTR a;
        DAT_EP_HANDLE ep = (DAT_EP_HANDLE)(uintptr_t)0x5a5a;
        ud_attr(&a, 1024);
        EXPECT_RC(dat_ep_create(n.ia, n.pz, n.rcv, n.req, n.conn, &a, &ep), RC_MODEL);
        EXPECT(ep == (DAT_EP_HANDLE)(uintptr_t)0x5a5a, "the refused dat_ep_create wrote its out-parameter");
    }
    node_close(&n);
}

/* ---- resolution ------------------------------------------------------------------------ */

/* One resolution in detail: the request event and its CR, the two ESTABLISHED events with
 * the peers' address handles and each other's private data; releasing the connection
 * records leaves the address handles usable. */
void case_resolve_events(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    struct ud_peer at_s, at_c;
    static const char req[] = "hello, request", acc[] = "hello, accept";
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0))
        goto out;
    /* receives may be posted before any resolution (dtestx does) */
    if (!post_recv1(r.se, &r.sm, 0, GRH + 256, 1))
        goto out;
    if (!UD_CONNECT(&r.s, r.s.port, r.ce, req) || !EXPECT_RC(wait_ev(r.s.cr, WAIT_MS, &ev), DAT_SUCCESS))
        goto out;
    if (!EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT,
                "request event 0x%x, expected DAT_IB_UD_CONNECTION_REQUEST_EVENT 0x40001", (unsigned)ev.event_number))
        goto out;
    const DAT_CR_ARRIVAL_EVENT_DATA *cr = &ev.event_data.cr_arrival_event_data;
    EXPECT(cr->cr_handle != DAT_HANDLE_NULL, "the request event has no CR handle");
    EXPECT(cr->sp_handle.psp_handle == r.s.psp, "the request names service point %p, expected the PSP %p",
           (void *)cr->sp_handle.psp_handle, (void *)r.s.psp);
    EXPECT(cr->conn_qual == r.s.port, "the request's conn_qual %llu, expected %llu", (unsigned long long)cr->conn_qual,
           (unsigned long long)r.s.port);
    EXPECT(ud_ext(&ev)->type == DAT_IB_UD_CONNECT_REQUEST, "the request's extension type %d, expected DAT_IB_UD_CONNECT_REQUEST %d",
           (int)ud_ext(&ev)->type, (int)DAT_IB_UD_CONNECT_REQUEST);
    DAT_CR_PARAM cp;
    memset(&cp, 0, sizeof cp);
    if (EXPECT_RC(dat_cr_query(cr->cr_handle, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS)) {
        EXPECT(cp.private_data_size == (DAT_COUNT)sizeof req && cp.private_data &&
                   memcmp(cp.private_data, req, sizeof req) == 0,
               "the CR carries %d bytes of private data, expected the request's %zu", (int)cp.private_data_size, sizeof req);
        EXPECT(cp.remote_ia_address_ptr && ud_same_address((const DAT_SOCK_ADDR6 *)(const void *)cp.remote_ia_address_ptr, &r.ca),
               "the CR's remote address is not the client IA's");
    }
    if (!EXPECT_RC(dat_cr_accept(cr->cr_handle, r.se, sizeof acc, (DAT_PVOID)acc), DAT_SUCCESS) ||
        !UD_WAIT_ESTABLISHED(r.s.conn, r.se, DAT_IB_UD_PASSIVE_REMOTE_AH, &r.ca, &at_s) ||
        !UD_WAIT_ESTABLISHED(r.c.conn, r.ce, DAT_IB_UD_REMOTE_AH, &r.sa, &at_c))
        goto out;
    EXPECT(at_s.pdata_size == (DAT_COUNT)sizeof req && memcmp(at_s.pdata, req, sizeof req) == 0,
           "the passive side's ESTABLISHED carries %d bytes of private data, expected the request's %zu",
           (int)at_s.pdata_size, sizeof req);
    EXPECT(at_c.pdata_size == (DAT_COUNT)sizeof acc && memcmp(at_c.pdata, acc, sizeof acc) == 0,
           "the active side's ESTABLISHED carries %d bytes of private data, expected the accept's %zu",
           (int)at_c.pdata_size, sizeof acc);
    harness_note("active side: ah %p qpn %u; passive side: ah %p qpn %u", at_c.ah.ah, (unsigned)at_c.ah.qpn, at_s.ah.ah,
                 (unsigned)at_s.ah.qpn);
    /* one event each, nothing else */
    EXPECT_EMPTY(r.s.conn, "server's connection EVD after its ESTABLISHED");
    EXPECT_EMPTY(r.c.conn, "client's connection EVD after its ESTABLISHED");
    EXPECT_EMPTY(r.s.cr, "server's CR EVD after the one request");
    /* the connection records go; the address handles stay */
    EXPECT_RC(dat_ib_ud_cm_free(r.ce, at_c.context.as_ptr), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_cm_free(r.se, at_s.context.as_ptr), DAT_SUCCESS);
    fill(r.cm.buf + 8192, 200, 3);
    DAT_EVENT rv;
    if (UD_SEND(r.ce, &r.cm, 8192, 200, &at_c.ah, 5) && UD_WAIT_SENT(r.c.req, 5) && UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &rv))
        UD_CHECK_RECV(&rv, r.se, 1, r.sm.buf, r.cm.buf + 8192, 200, &r.ca, &r.sa);
out:
    ud_rig_down(&r);
}

/* A rejected request: DAT_IB_UD_CONNECTION_REJECT_EVENT at the requester; its EP resolves
 * again afterwards. */
void case_reject(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0) || !UD_CONNECT(&r.s, r.s.port, r.ce, "req") ||
        !EXPECT_RC(wait_ev(r.s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT, "request event 0x%x, expected 0x40001",
                (unsigned)ev.event_number) ||
        !EXPECT_RC(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL), DAT_SUCCESS))
        goto out;
    if (EXPECT_RC(wait_ev(r.c.conn, WAIT_MS, &ev), DAT_SUCCESS) &&
        EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REJECT_EVENT,
               "event 0x%x after a reject, expected DAT_IB_UD_CONNECTION_REJECT_EVENT 0x40003", (unsigned)ev.event_number)) {
        EXPECT(ev.event_data.connect_event_data.ep_handle == r.ce, "the reject names EP %p, expected %p",
               ev.event_data.connect_event_data.ep_handle, r.ce);
        EXPECT(ud_ext(&ev)->type == DAT_IB_UD_CONNECT_REJECT, "the reject's extension type %d, expected DAT_IB_UD_CONNECT_REJECT %d",
               (int)ud_ext(&ev)->type, (int)DAT_IB_UD_CONNECT_REJECT);
    }
    EXPECT_EMPTY(r.s.conn, "server's connection EVD after rejecting");
    /* the requester's EP still resolves */
    if (UD_RESOLVE(&r.s, r.se, &r.c, r.ce, &r.at_s, &r.at_c)) {
        DAT_EVENT rv;
        fill(r.cm.buf, 64, 9);
        if (post_recv1(r.se, &r.sm, 0, GRH + 64, 1) && UD_SEND(r.ce, &r.cm, 0, 64, &r.at_c.ah, 2) &&
            UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &rv))
            UD_CHECK_RECV(&rv, r.se, 1, r.sm.buf, r.cm.buf, 64, &r.ca, &r.sa);
    }
out:
    ud_rig_down(&r);
}

/* A UD EP whose resolution was refused is unconnected, with the QP it resolved with: a
 * dat_ep_modify of its request EVD then holds for the datagrams it sends once it resolves a
 * peer (they complete on the new EVD, none on the old one, which may be freed meanwhile). */
void case_modify_request_evd(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    DAT_EVD_HANDLE req2 = DAT_HANDLE_NULL;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0) || !UD_CONNECT(&r.s, r.s.port, r.ce, "req") ||
        !EXPECT_RC(wait_ev(r.s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT_RC(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL), DAT_SUCCESS) ||
        !EXPECT_RC(wait_ev(r.c.conn, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REJECT_EVENT, "event 0x%x after a reject, expected 0x40003",
                (unsigned)ev.event_number))
        goto out;
    if (!EXPECT_RC(dat_evd_create(r.c.ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &req2), DAT_SUCCESS))
        goto out;
    DAT_EP_PARAM p;
    memset(&p, 0, sizeof p);
    p.request_evd_handle = req2;
    if (!EXPECT_RC(dat_ep_modify(r.ce, DAT_EP_FIELD_REQUEST_EVD_HANDLE, &p), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_free(r.c.req), DAT_SUCCESS))
        goto out;
    r.c.req = DAT_HANDLE_NULL;
    if (!UD_RESOLVE(&r.s, r.se, &r.c, r.ce, &r.at_s, &r.at_c))
        goto out;
    fill(r.cm.buf, 64, 3);
    if (UD_SEND(r.ce, &r.cm, 0, 64, &r.at_c.ah, 7))
        UD_WAIT_SENT(req2, 7);
out:
    ud_rig_down(&r);
}

/* No service point at the address: DAT_IB_UD_CONNECTION_ERROR_EVENT; the EP still resolves
 * a real peer afterwards. */
void case_unreachable(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0))
        goto out;
    /* nothing listens on dx_port(5) of the server's address */
    if (!UD_CONNECT(&r.s, dx_port(5), r.ce, "nobody"))
        goto out;
    DAT_RETURN rc = wait_ev(r.c.conn, 10000, &ev);
    if (EXPECT(rc == DAT_SUCCESS, "no event within 10 s for a resolution of a port nobody listens on (0x%08x)", (unsigned)rc) &&
        EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_ERROR_EVENT,
               "event 0x%x, expected DAT_IB_UD_CONNECTION_ERROR_EVENT 0x40004", (unsigned)ev.event_number)) {
        EXPECT(ev.event_data.connect_event_data.ep_handle == r.ce, "the error names EP %p, expected %p",
               ev.event_data.connect_event_data.ep_handle, r.ce);
        EXPECT(ud_ext(&ev)->type == DAT_IB_UD_CONNECT_ERROR, "the error's extension type %d, expected DAT_IB_UD_CONNECT_ERROR %d",
               (int)ud_ext(&ev)->type, (int)DAT_IB_UD_CONNECT_ERROR);
    }
    EXPECT_EMPTY(r.s.cr, "server's CR EVD (the request went to another port)");
    UD_RESOLVE(&r.s, r.se, &r.c, r.ce, &r.at_s, &r.at_c);
out:
    ud_rig_down(&r);
}

/* A UD request accepted on an RC EP, and an RC request accepted on a UD EP: DAT_INVALID_PARAMETER
 * | DAT_INVALID_ARG2, and the request stays to be accepted by the right EP. */
void case_accept_wrong_service(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    DAT_EP_HANDLE rse, rce;
    struct ud_peer at_s, at_c;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0) || !ep_make(&r.s, NULL, &rse) || !ep_make(&r.c, NULL, &rce))
        goto out;
    /* a UD request */
    if (!UD_CONNECT(&r.s, r.s.port, r.ce, "req") || !EXPECT_RC(wait_ev(r.s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT, "request event 0x%x, expected 0x40001",
                (unsigned)ev.event_number))
        goto out;
    DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    EXPECT_RC(dat_cr_accept(cr, rse, 0, NULL), RC_ARG2);
    EXPECT_EMPTY(r.c.conn, "client's connection EVD after the refused accept");
    if (EXPECT_RC(dat_cr_accept(cr, r.se, 4, (DAT_PVOID) "acc"), DAT_SUCCESS)) {
        UD_WAIT_ESTABLISHED(r.s.conn, r.se, DAT_IB_UD_PASSIVE_REMOTE_AH, &r.ca, &at_s);
        UD_WAIT_ESTABLISHED(r.c.conn, r.ce, DAT_IB_UD_REMOTE_AH, &r.sa, &at_c);
    }
    /* an RC request at the same PSP */
    if (!EXPECT_RC(dat_ep_connect(rce, (DAT_IA_ADDRESS_PTR)&r.sa, r.s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS) ||
        !EXPECT_RC(wait_ev(r.s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "RC request event 0x%x, expected 0x2001",
                (unsigned)ev.event_number))
        goto out;
    cr = ev.event_data.cr_arrival_event_data.cr_handle;
    EXPECT_RC(dat_cr_accept(cr, r.se, 0, NULL), RC_ARG2);
    if (EXPECT_RC(dat_cr_accept(cr, rse, 0, NULL), DAT_SUCCESS)) {
        DAT_EVENT_NUMBER n = wait_conn_at(__LINE__, r.s.conn, WAIT_MS, &ev);
        EXPECT(n == DAT_CONNECTION_EVENT_ESTABLISHED && ev.event_data.connect_event_data.ep_handle == rse,
               "server: event 0x%x for EP %p, expected ESTABLISHED 0x4001 for the RC EP %p", (unsigned)n,
               ev.event_data.connect_event_data.ep_handle, rse);
        n = wait_conn_at(__LINE__, r.c.conn, WAIT_MS, &ev);
        EXPECT(n == DAT_CONNECTION_EVENT_ESTABLISHED && ev.event_data.connect_event_data.ep_handle == rce,
               "client: event 0x%x for EP %p, expected ESTABLISHED 0x4001 for the RC EP %p", (unsigned)n,
               ev.event_data.connect_event_data.ep_handle, rce);
    }
out:
    ud_rig_down(&r);
}

/* ---- many resolutions ------------------------------------------------------------------ */

#define MANY 8

struct many_side {
    struct node *n;
    DAT_EP_HANDLE ep;
    struct ud_peer active[MANY], passive[MANY];
    int nactive, npassive, naccepted;
    struct sockaddr_storage peer_addr;
};

/* Takes whatever is queued on one side's CR and connection EVDs. */
static void many_poll(struct many_side *x, const char *name)
{
    DAT_EVENT ev;
    while (dat_evd_dequeue(x->n->cr, &ev) == DAT_SUCCESS) {
        if (!EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT, "%s: request event 0x%x",
                    name, (unsigned)ev.event_number))
            continue;
        if (EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, x->ep, 4, (DAT_PVOID) "acc"),
                      DAT_SUCCESS))
            x->naccepted++;
    }
    while (dat_evd_dequeue(x->n->conn, &ev) == DAT_SUCCESS) {
        struct ud_peer p;
        ud_peer_of(&ev, &p);
        if (!EXPECT(p.number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED && p.ep == x->ep,
                    "%s: connection event 0x%x for EP %p, expected UD ESTABLISHED for %p", name, (unsigned)p.number, p.ep,
                    x->ep))
            continue;
        EXPECT(p.status == DAT_OP_SUCCESS && p.ah.ah != NULL && p.context.as_64 != 0,
               "%s: UD ESTABLISHED with status %d, ah %p, context 0x%llx", name, (int)p.status, p.ah.ah,
               (unsigned long long)p.context.as_64);
        char got[64], want[64];
        EXPECT(ud_same_address(&p.ah.ia_addr, &x->peer_addr),
               "%s: %s ESTABLISHED's remote_ah.ia_addr is %s, expected the peer IA's %s", name,
               p.type == DAT_IB_UD_REMOTE_AH ? "an active" : "a passive", ud_addr_text(&p.ah.ia_addr, got, sizeof got),
               ud_addr_text(&x->peer_addr, want, sizeof want));
        if (p.type == DAT_IB_UD_REMOTE_AH && x->nactive < MANY)
            x->active[x->nactive++] = p;
        else if (p.type == DAT_IB_UD_PASSIVE_REMOTE_AH && x->npassive < MANY)
            x->passive[x->npassive++] = p;
        else
            harness_fail(__LINE__, "%s: an extra ESTABLISHED of type %d", name, (int)p.type);
    }
}

/* The events of one side: N active ones with the accept's private data, N passive ones with
 * each request's; distinct address handles and contexts; one peer QP number throughout. */
static void many_check(struct many_side *x, const char *name, const char *peer_prefix)
{
    int seen[MANY] = {0};
    EXPECT(x->nactive == MANY && x->npassive == MANY, "%s: %d active and %d passive ESTABLISHED events, expected %d each",
           name, x->nactive, x->npassive, MANY);
    for (int i = 0; i < x->nactive; i++)
        EXPECT(x->active[i].pdata_size == 4 && memcmp(x->active[i].pdata, "acc", 4) == 0,
               "%s: active ESTABLISHED %d carries %d bytes, expected the accept's \"acc\"", name, i,
               (int)x->active[i].pdata_size);
    for (int i = 0; i < x->npassive; i++) {
        char want[32];
        int k = -1;
        for (int j = 0; j < MANY; j++) {
            snprintf(want, sizeof want, "%s%d", peer_prefix, j);
            if (x->passive[i].pdata_size == (DAT_COUNT)strlen(want) + 1 && memcmp(x->passive[i].pdata, want, strlen(want) + 1) == 0)
                k = j;
        }
        if (EXPECT(k >= 0, "%s: passive ESTABLISHED %d carries %d bytes that are no request's", name, i,
                   (int)x->passive[i].pdata_size))
            EXPECT(!seen[k]++, "%s: request %d reported twice", name, k);
    }
    struct ud_peer *all[2 * MANY];
    int n = 0;
    for (int i = 0; i < x->nactive; i++)
        all[n++] = &x->active[i];
    for (int i = 0; i < x->npassive; i++)
        all[n++] = &x->passive[i];
    for (int i = 0; i < n; i++) {
        EXPECT(all[i]->ah.qpn == all[0]->ah.qpn, "%s: resolutions of one peer EP name QP %u and %u", name,
               (unsigned)all[i]->ah.qpn, (unsigned)all[0]->ah.qpn);
        for (int j = 0; j < i; j++) {
            EXPECT(all[i]->ah.ah != all[j]->ah.ah, "%s: two resolutions gave the same address handle %p", name, all[i]->ah.ah);
            EXPECT(all[i]->context.as_64 != all[j]->context.as_64, "%s: two resolutions gave the same context 0x%llx", name,
                   (unsigned long long)all[i]->context.as_64);
        }
    }
}

/* What dtestx does, many times: each of two UD EPs connects to the other's PSP and accepts the
 * other's requests, all at once; every address handle so obtained reaches the peer; each
 * handle and record is released once. */
void case_many_resolutions(void)
{
    struct ud_rig r;
    struct many_side a, b;
    DAT_PSP_HANDLE cpsp = DAT_HANDLE_NULL;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0) ||
        !EXPECT_RC(dat_psp_create(r.c.ia, dx_port(1), r.c.cr, DAT_PSP_CONSUMER_FLAG, &cpsp), DAT_SUCCESS))
        goto out;
    a.n = &r.c, a.ep = r.ce, a.peer_addr = r.sa;
    b.n = &r.s, b.ep = r.se, b.peer_addr = r.ca;
    for (int k = 0; k < MANY; k++) {
        char pd[32];
        snprintf(pd, sizeof pd, "a%d", k);
        if (!UD_CONNECT(&r.s, r.s.port, r.ce, pd))
            goto out;
        snprintf(pd, sizeof pd, "b%d", k);
        if (!UD_CONNECT(&r.c, dx_port(1), r.se, pd))
            goto out;
    }
    double end = dx_now() + 10;
    while ((a.nactive + a.npassive < 2 * MANY || b.nactive + b.npassive < 2 * MANY) && dx_now() < end) {
        many_poll(&a, "a");
        many_poll(&b, "b");
        dx_sleep_ms(1);
    }
    EXPECT(a.naccepted == MANY && b.naccepted == MANY, "requests accepted: %d by a, %d by b; expected %d each", a.naccepted,
           b.naccepted, MANY);
    many_check(&a, "a", "b");
    many_check(&b, "b", "a");
    if (a.nactive != MANY || a.npassive != MANY || b.nactive != MANY || b.npassive != MANY)
        goto out;
    /* a datagram through each of a's handles reaches b (also when a check above failed: what
     * matters most is that the handles work) */
    for (int i = 0; i < 2 * MANY; i++)
        if (!post_recv1(r.se, &r.sm, (size_t)i * 1024, GRH + 64, 100 + (uint64_t)i))
            goto out;
    for (int i = 0; i < 2 * MANY; i++) {
        const DAT_IB_ADDR_HANDLE *ah = i < MANY ? &a.active[i].ah : &a.passive[i - MANY].ah;
        memset(r.cm.buf + i * 64, 'A' + i, 64);
        if (!UD_SEND(r.ce, &r.cm, (size_t)i * 64, 64, ah, (uint64_t)i) || !UD_WAIT_SENT(r.c.req, (uint64_t)i))
            goto out;
    }
    int got[2 * MANY] = {0};
    for (int i = 0; i < 2 * MANY; i++) {
        DAT_EVENT ev;
        if (!UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev)) {
            for (int k = 0; k < 2 * MANY; k++)
                if (!got[k])
                    harness_note("the datagram through a's %s handle %d did not arrive", k < MANY ? "active" : "passive",
                                 k < MANY ? k : k - MANY);
            goto out;
        }
        uint64_t c = ev.event_data.dto_completion_event_data.user_cookie.as_64;
        if (!EXPECT(c >= 100 && c < 100 + 2 * MANY, "receive cookie %llu", (unsigned long long)c))
            continue;
        const unsigned char *buf = r.sm.buf + (c - 100) * 1024;
        int k = buf[GRH] - 'A';
        if (EXPECT(k >= 0 && k < 2 * MANY, "receive %d holds byte 0x%02x", i, buf[GRH]) &&
            UD_CHECK_RECV(&ev, r.se, c, buf, r.cm.buf + k * 64, 64, &r.ca, &r.sa))
            EXPECT(!got[k]++, "the datagram through handle %d arrived twice", k);
    }
    /* release everything, once */
    struct many_side *sides[2] = {&a, &b};
    for (int s = 0; s < 2; s++) {
        struct many_side *x = sides[s];
        for (int i = 0; i < MANY; i++) {
            EXPECT_RC(dat_ib_ud_cm_free(x->ep, x->active[i].context.as_ptr), DAT_SUCCESS);
            EXPECT_RC(dat_ib_ud_cm_free(x->ep, x->passive[i].context.as_ptr), DAT_SUCCESS);
            EXPECT_RC(dat_ib_ud_ah_free(x->ep, &x->active[i].ah), DAT_SUCCESS);
            EXPECT_RC(dat_ib_ud_ah_free(x->ep, &x->passive[i].ah), DAT_SUCCESS);
        }
        for (int i = 0; i < MANY; i++) {
            EXPECT_RC(dat_ib_ud_cm_free(x->ep, x->active[i].context.as_ptr), RC_ARG3);
            EXPECT_RC(dat_ib_ud_ah_free(x->ep, &x->passive[i].ah), RC_ARG3);
        }
    }
out:
    ud_rig_down(&r);
}

/* One EP resolves three EPs of another IA, each behind its own PSP: each address handle
 * reaches its own EP and no other, and each of them answers through its passive handle. */
void case_many_peers(void)
{
    struct ud_rig r;
    DAT_EP_HANDLE se[3];
    DAT_PSP_HANDLE psp[3];
    struct ud_peer at_s[3], at_c[3];
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0))
        goto out;
    se[0] = r.se;
    for (int i = 1; i < 3; i++)
        if (!ud_ep_make(&r.s, 0, &se[i]))
            goto out;
    psp[0] = r.s.psp;
    for (int i = 1; i < 3; i++)
        if (!EXPECT_RC(dat_psp_create(r.s.ia, dx_port(i), r.s.cr, DAT_PSP_CONSUMER_FLAG, &psp[i]), DAT_SUCCESS))
            goto out;
    for (int i = 0; i < 3; i++) {
        DAT_CONN_QUAL port = i == 0 ? r.s.port : dx_port(i);
        if (!UD_CONNECT(&r.s, port, r.ce, "req") || !UD_ACCEPT_NEXT(&r.s, se[i], "acc") ||
            !UD_WAIT_ESTABLISHED(r.s.conn, se[i], DAT_IB_UD_PASSIVE_REMOTE_AH, &r.ca, &at_s[i]) ||
            !UD_WAIT_ESTABLISHED(r.c.conn, r.ce, DAT_IB_UD_REMOTE_AH, &r.sa, &at_c[i]))
            goto out;
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < i; j++)
            EXPECT(at_c[i].ah.qpn != at_c[j].ah.qpn, "EPs %d and %d of one IA were resolved to the same QP %u", i, j,
                   (unsigned)at_c[i].ah.qpn);
    for (int i = 1; i < 3; i++)
        EXPECT(at_s[i].ah.qpn == at_s[0].ah.qpn, "the client EP was seen as QP %u and QP %u", (unsigned)at_s[i].ah.qpn,
               (unsigned)at_s[0].ah.qpn);
    for (int i = 0; i < 3; i++) {
        if (!post_recv1(se[i], &r.sm, (size_t)i * 1024, GRH + 64, (uint64_t)i))
            goto out;
        memset(r.cm.buf + i * 64, 'a' + i, 64);
    }
    for (int i = 0; i < 3; i++)
        if (!UD_SEND(r.ce, &r.cm, (size_t)i * 64, 64, &at_c[i].ah, 10 + (uint64_t)i) || !UD_WAIT_SENT(r.c.req, 10 + (uint64_t)i))
            goto out;
    for (int i = 0; i < 3; i++) {
        DAT_EVENT ev;
        if (!UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
            goto out;
        uint64_t k = ev.event_data.dto_completion_event_data.user_cookie.as_64;
        if (EXPECT(k < 3, "receive cookie %llu", (unsigned long long)k))
            UD_CHECK_RECV(&ev, se[k], k, r.sm.buf + k * 1024, r.cm.buf + k * 64, 64, &r.ca, &r.sa);
    }
    /* the answers */
    for (int i = 0; i < 3; i++) {
        if (!post_recv1(r.ce, &r.cm, 8192 + (size_t)i * 1024, GRH + 64, 20 + (uint64_t)i))
            goto out;
        memset(r.sm.buf + 8192 + i * 64, 'x' + i, 64);
    }
    int got[3] = {0};
    for (int i = 0; i < 3; i++)
        if (!UD_SEND(se[i], &r.sm, 8192 + (size_t)i * 64, 64, &at_s[i].ah, 30 + (uint64_t)i) ||
            !UD_WAIT_SENT(r.s.req, 30 + (uint64_t)i))
            goto out;
    for (int i = 0; i < 3; i++) {
        DAT_EVENT ev;
        if (!UD_WAIT_DTO(r.c.rcv, DAT_IB_UD_RECV, &ev))
            goto out;
        uint64_t c = ev.event_data.dto_completion_event_data.user_cookie.as_64;
        if (!EXPECT(c >= 20 && c < 23, "receive cookie %llu", (unsigned long long)c))
            continue;
        const unsigned char *buf = r.cm.buf + 8192 + (c - 20) * 1024;
        int k = buf[GRH] - 'x';
        if (EXPECT(k >= 0 && k < 3, "answer %d holds byte 0x%02x", i, buf[GRH]) &&
            UD_CHECK_RECV(&ev, r.ce, c, buf, r.sm.buf + 8192 + k * 64, 64, &r.sa, &r.ca))
            EXPECT(!got[k]++, "the answer of EP %d arrived twice", k);
    }
out:
    ud_rig_down(&r);
}

/* ---- releasing address handles and connection records -------------------------------- */

/* dat_ib_ud_ah_free: an address handle is released once, only by its own EP; NULL, unknown
 * and already freed ones are DAT_INVALID_PARAMETER | DAT_INVALID_ARG3; on an RC EP the call is
 * DAT_MODEL_NOT_SUPPORTED. */
void case_ah_free_codes(void)
{
    struct ud_rig r;
    struct ud_peer s2, c2;
    DAT_EP_HANDLE rce;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1) || !UD_RESOLVE(&r.s, r.se, &r.c, r.ce, &s2, &c2) || !ep_make(&r.c, NULL, &rce))
        goto out;
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, &r.at_c.ah), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, &r.at_c.ah), RC_ARG3);   /* already freed */
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, NULL), RC_ARG3);
    DAT_IB_ADDR_HANDLE forged = c2.ah;
    forged.ah = (struct ibv_ah *)(uintptr_t)0x7777;
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, &forged), RC_ARG3);     /* unknown */
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, &r.at_s.ah), RC_ARG3);  /* the server EP's */
    EXPECT_RC(dat_ib_ud_ah_free(r.se, &c2.ah), RC_ARG3);      /* the client EP's, on the server EP */
    EXPECT_RC(dat_ib_ud_ah_free(rce, &c2.ah), RC_MODEL);      /* an RC EP */
    /* the refused calls freed nothing */
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, &c2.ah), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_ah_free(r.se, &r.at_s.ah), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_ah_free(r.se, &s2.ah), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_ah_free(r.se, &s2.ah), RC_ARG3);
out:
    ud_rig_down(&r);
}

/* dat_ib_ud_cm_free: the same for connection records (the event's context). */
void case_cm_free_codes(void)
{
    struct ud_rig r;
    struct ud_peer s2, c2;
    DAT_EP_HANDLE rce;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1) || !UD_RESOLVE(&r.s, r.se, &r.c, r.ce, &s2, &c2) || !ep_make(&r.c, NULL, &rce))
        goto out;
    EXPECT_RC(dat_ib_ud_cm_free(r.ce, r.at_c.context.as_ptr), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_cm_free(r.ce, r.at_c.context.as_ptr), RC_ARG3); /* already freed */
    EXPECT_RC(dat_ib_ud_cm_free(r.ce, (void *)(uintptr_t)0x7777), RC_ARG3); /* unknown */
    EXPECT_RC(dat_ib_ud_cm_free(r.ce, NULL), RC_ARG3);
    EXPECT_RC(dat_ib_ud_cm_free(r.ce, r.at_s.context.as_ptr), RC_ARG3); /* the server EP's */
    EXPECT_RC(dat_ib_ud_cm_free(r.se, c2.context.as_ptr), RC_ARG3);     /* the client EP's, on the server EP */
    EXPECT_RC(dat_ib_ud_cm_free(rce, c2.context.as_ptr), RC_MODEL);     /* an RC EP */
    EXPECT_RC(dat_ib_ud_cm_free(r.ce, c2.context.as_ptr), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_cm_free(r.se, r.at_s.context.as_ptr), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_cm_free(r.se, s2.context.as_ptr), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_cm_free(r.se, s2.context.as_ptr), RC_ARG3);
    /* the address handles are not released with the records */
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, &c2.ah), DAT_SUCCESS);
out:
    ud_rig_down(&r);
}

/* An EP freed with address handles and connection records unfreed (dat_ep_free succeeds and
 * releases them), and calls naming an EP that is gone or was never one (DAT_INVALID_HANDLE |
 * DAT_INVALID_HANDLE1: dat_extension_op's handle may be any object, so one that is no live
 * object at all is named as its first argument), or another object (DAT_INVALID_HANDLE_EP). */
void case_free_bad_handles(void)
{
    struct ud_rig r;
    struct ud_peer s2, c2;
    DAT_EP_HANDLE x;
    static char wild[64];
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1) || !ud_ep_make(&r.c, 0, &x) || !UD_RESOLVE(&r.s, r.se, &r.c, x, &s2, &c2))
        goto out;
    /* x holds an address handle and a record of this resolution */
    EXPECT_RC(dat_ep_free(x), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_ah_free(x, &c2.ah), RC_HANDLE1);
    EXPECT_RC(dat_ib_ud_cm_free(x, c2.context.as_ptr), RC_HANDLE1);
    EXPECT_RC(dat_ib_ud_ah_free((DAT_EP_HANDLE)wild, &r.at_c.ah), RC_HANDLE1);
    EXPECT_RC(dat_ib_ud_cm_free((DAT_EP_HANDLE)wild, r.at_c.context.as_ptr), RC_HANDLE1);
    EXPECT_RC(dat_ib_ud_ah_free((DAT_EP_HANDLE)r.c.rcv, &r.at_c.ah), RC_HANDLE_EP); /* an EVD */
    EXPECT_RC(dat_ib_ud_cm_free((DAT_EP_HANDLE)r.c.rcv, r.at_c.context.as_ptr), RC_HANDLE_EP);
    /* the live EP's own are still there */
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, &r.at_c.ah), DAT_SUCCESS);
    EXPECT_RC(dat_ib_ud_cm_free(r.ce, r.at_c.context.as_ptr), DAT_SUCCESS);
    /* both sides' EPs go with everything unfreed */
    EXPECT_RC(dat_ep_free(r.se), DAT_SUCCESS);
    EXPECT_RC(dat_ep_free(r.ce), DAT_SUCCESS);
out:
    ud_rig_down(&r);
}

/* UD QPs cost no thread each on dat2-soft: the process's engine reads every QP's datagrams
 * (before, each had a `dat2-soft-ud` thread). 20 more resolved pairs (a QP is made at the
 * resolution); resolutions_no_threads counts them while in flight. */
void case_many_eps_no_threads(void)
{
    enum { PAIRS = 20 };
    struct ud_rig r;
    DAT_EP_HANDLE se[PAIRS] = {0}, ce[PAIRS] = {0};
    int made = 0;
    if (!dx_on_soft_device()) {
        harness_skip("the soft device's threads only");
        return;
    }
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1))
        goto out;
    int threads0 = dx_threads();
    for (; made < PAIRS; made++) {
        struct ud_peer at_s, at_c;
        if (!ud_ep_make(&r.s, 0, &se[made]) || !ud_ep_make(&r.c, 0, &ce[made]) ||
            !UD_RESOLVE(&r.s, se[made], &r.c, ce[made], &at_s, &at_c)) {
            made++;
            break;
        }
    }
    int threads = dx_threads();
    harness_note("threads: %d before, %d with %d more resolved pairs of UD QPs", threads0, threads, made);
    EXPECT(made == PAIRS && threads0 > 0 && threads <= threads0, "%d more UD QP pairs: %d threads, %d before", made,
           threads, threads0);
out:
    for (int k = 0; k < made; k++) {
        if (se[k])
            EXPECT_RC(dat_ep_free(se[k]), DAT_SUCCESS);
        if (ce[k])
            EXPECT_RC(dat_ep_free(ce[k]), DAT_SUCCESS);
    }
    ud_rig_down(&r);
}

/* A resolution in flight costs no thread on dat2-soft: the process's engine drives each, the
 * TCP exchange and the proofs (before, every dat_ep_connect of a UD EP ran a dat2-soft-connect
 * thread until its event). RESOLVING resolutions wait for the server's consumer to answer; the
 * process's threads are counted then, and each is then accepted and resolved. */
void case_resolutions_no_threads(void)
{
    enum { RESOLVING = 8 };
    struct ud_rig r;
    DAT_CR_HANDLE cr[RESOLVING];
    int arrived = 0;
    if (!dx_on_soft_device()) {
        harness_skip("the soft device's threads only");
        return;
    }
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0))
        goto out;
    int threads0 = dx_threads();
    for (int k = 0; k < RESOLVING; k++)
        if (!UD_CONNECT(&r.s, r.s.port, r.ce, "req"))
            goto out;
    /* Each request reached the server's consumer: its resolution waits for the answer. */
    for (; arrived < RESOLVING; arrived++) {
        DAT_EVENT ev;
        if (!EXPECT_RC(wait_ev(r.s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
            !EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT, "request event 0x%x",
                    (unsigned)ev.event_number))
            goto out;
        cr[arrived] = ev.event_data.cr_arrival_event_data.cr_handle;
    }
    int threads = dx_threads();
    harness_note("threads: %d before, %d with %d UD resolutions in flight", threads0, threads, RESOLVING);
    EXPECT(threads0 > 0 && threads <= threads0, "%d UD resolutions in flight: %d threads, %d before", RESOLVING, threads,
           threads0);
    for (int k = 0; k < arrived; k++)
        if (!EXPECT_RC(dat_cr_accept(cr[k], r.se, 4, (DAT_PVOID) "acc"), DAT_SUCCESS))
            goto out;
    for (int k = 0; k < arrived; k++) {
        struct ud_peer at_s, at_c;
        if (!UD_WAIT_ESTABLISHED(r.s.conn, r.se, DAT_IB_UD_PASSIVE_REMOTE_AH, &r.ca, &at_s) ||
            !UD_WAIT_ESTABLISHED(r.c.conn, r.ce, DAT_IB_UD_REMOTE_AH, &r.sa, &at_c))
            goto out;
    }
out:
    ud_rig_down(&r);
}
