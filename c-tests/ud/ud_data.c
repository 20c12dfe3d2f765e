/* UD cases about datagrams: contents and GRH, boundaries, truncation, drops, the size limit,
 * stale address handles, the operations a UD EP refuses, and receives from an SRQ. */
#include "ud.h"

#include <stdlib.h>

#include "ud_cases.h"

/* A datagram each way, the first gathered from two segments, with receives posted before the
 * resolution: each receive holds a 40-byte GRH naming sender and receiver, then the payload;
 * nothing beyond it is written. */
void case_round_trip_grh(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    unsigned char want[300];
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0) || !post_recv1(r.se, &r.sm, 0, GRH + 1024, 1) ||
        !post_recv1(r.ce, &r.cm, 0, GRH + 1024, 2) || !UD_RESOLVE(&r.s, r.se, &r.c, r.ce, &r.at_s, &r.at_c))
        goto out;
    fill(r.cm.buf + 8192, 100, 1);
    fill(r.cm.buf + 12288, 200, 2);
    memcpy(want, r.cm.buf + 8192, 100);
    memcpy(want + 100, r.cm.buf + 12288, 200);
    DAT_LMR_TRIPLET two[2] = {lt(&r.cm, 8192, 100), lt(&r.cm, 12288, 200)};
    if (!EXPECT_RC(dat_ib_post_send_ud(r.ce, 2, two, &r.at_c.ah, ck(7), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
        !UD_WAIT_SENT(r.c.req, 7) || !UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
        goto out;
    if (UD_CHECK_RECV(&ev, r.se, 1, r.sm.buf, want, 300, &r.ca, &r.sa))
        EXPECT(ud_ext(&ev)->status == DAT_OP_SUCCESS, "receive's extension status %d", (int)ud_ext(&ev)->status);
    for (size_t i = GRH + 300; i < GRH + 1024; i++)
        if (!EXPECT(r.sm.buf[i] == 0, "byte %zu of the receive buffer, past the datagram, was written", i))
            break;
    /* the answer, through the passive side's handle */
    fill(r.sm.buf + 8192, 64, 3);
    if (UD_SEND(r.se, &r.sm, 8192, 64, &r.at_s.ah, 8) && UD_WAIT_SENT(r.s.req, 8) && UD_WAIT_DTO(r.c.rcv, DAT_IB_UD_RECV, &ev))
        UD_CHECK_RECV(&ev, r.ce, 2, r.cm.buf, r.sm.buf + 8192, 64, &r.sa, &r.ca);
out:
    ud_rig_down(&r);
}

/* Two datagrams, three receives: each datagram fills one receive of its own (never merged,
 * never split), and the third receive stays posted until a third datagram. */
void case_boundaries(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    static const size_t len[3] = {100, 200, 50};
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1))
        goto out;
    for (int i = 0; i < 3; i++)
        if (!post_recv1(r.se, &r.sm, (size_t)i * 2048, GRH + 1024, 1 + (uint64_t)i))
            goto out;
    for (int i = 0; i < 3; i++)
        fill(r.cm.buf + 8192 + i * 1024, len[i], 10 + (unsigned)i);
    if (!UD_SEND(r.ce, &r.cm, 8192, (DAT_SEG_LENGTH)len[0], &r.at_c.ah, 1) ||
        !UD_SEND(r.ce, &r.cm, 9216, (DAT_SEG_LENGTH)len[1], &r.at_c.ah, 2) || !UD_WAIT_SENT(r.c.req, 1) ||
        !UD_WAIT_SENT(r.c.req, 2))
        goto out;
    int got[2] = {0};
    for (int i = 0; i < 2; i++) {
        if (!UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
            goto out;
        const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        uint64_t c = d->user_cookie.as_64;
        int k = d->transfered_length == GRH + len[0] ? 0 : d->transfered_length == GRH + len[1] ? 1 : -1;
        if (!EXPECT(c == 1 || c == 2, "receive %d used the receive with cookie %llu (the third must stay posted)", i,
                    (unsigned long long)c) ||
            !EXPECT(k >= 0, "receive %d has length %llu: neither datagram's (%d + %zu or %d + %zu)", i,
                    (unsigned long long)d->transfered_length, GRH, len[0], GRH, len[1]))
            continue;
        if (UD_CHECK_RECV(&ev, r.se, c, r.sm.buf + (c - 1) * 2048, r.cm.buf + 8192 + k * 1024, len[k], &r.ca, &r.sa))
            EXPECT(!got[k]++, "datagram %d received twice", k);
    }
    EXPECT(ud_drain(r.s.rcv, 300) == 0, "a third receive completed with two datagrams sent");
    if (UD_SEND(r.ce, &r.cm, 10240, (DAT_SEG_LENGTH)len[2], &r.at_c.ah, 3) && UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
        UD_CHECK_RECV(&ev, r.se, 3, r.sm.buf + 2 * 2048, r.cm.buf + 10240, len[2], &r.ca, &r.sa);
out:
    ud_rig_down(&r);
}

/* A datagram longer than the receive: the receive completes with DAT_DTO_ERR_LOCAL_LENGTH
 * (on the soft device; an adapter may drop the datagram instead and keep the receive posted)
 * and nothing past it is written. */
void case_truncation(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1))
        goto out;
    memset(r.sm.buf, 0xee, 4096);
    if (!post_recv1(r.se, &r.sm, 0, GRH + 16, 1))
        goto out;
    fill(r.cm.buf, 100, 4);
    if (!UD_SEND(r.ce, &r.cm, 0, 100, &r.at_c.ah, 2))
        goto out;
    DAT_RETURN got = wait_ev(r.s.rcv, WAIT_MS, &ev);
    if (got != DAT_SUCCESS && !dx_on_soft_device()) {
        /* rxe drops a UD datagram too long for its receive, which stays posted: then the
         * next datagram that fits fills it (whatever the adapter does, nothing is written past
         * the receive). */
        fill(r.cm.buf + 1024, 10, 5);
        if (UD_SEND(r.ce, &r.cm, 1024, 10, &r.at_c.ah, 3) && EXPECT_RC(wait_ev(r.s.rcv, WAIT_MS, &ev), DAT_SUCCESS))
            UD_CHECK_RECV(&ev, r.se, 1, r.sm.buf, r.cm.buf + 1024, 10, &r.ca, &r.sa);
        EXPECT_RC(wait_ev(r.c.req, WAIT_MS, &ev), DAT_SUCCESS);
    } else if (EXPECT_RC(got, DAT_SUCCESS)) {
        const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        EXPECT(ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT || ev.event_number == DAT_DTO_COMPLETION_EVENT,
               "event 0x%x, expected a DTO completion", (unsigned)ev.event_number);
        EXPECT(d->status == DAT_DTO_ERR_LOCAL_LENGTH, "receive status %u, expected DAT_DTO_ERR_LOCAL_LENGTH %u",
               (unsigned)d->status, (unsigned)DAT_DTO_ERR_LOCAL_LENGTH);
        EXPECT(d->user_cookie.as_64 == 1 && d->ep_handle == r.se, "receive cookie %llu for EP %p, expected 1 for %p",
               (unsigned long long)d->user_cookie.as_64, d->ep_handle, r.se);
    }
    for (size_t i = GRH + 16; i < 4096; i++)
        if (!EXPECT(r.sm.buf[i] == 0xee, "byte %zu, past the %d-byte receive, was written", i, GRH + 16))
            break;
    /* the send itself completes (UD does not tell the sender) */
    EXPECT_RC(wait_ev(r.c.req, WAIT_MS, &ev), DAT_SUCCESS);
out:
    ud_rig_down(&r);
}

/* A datagram that finds no receive is dropped silently: the sender's completion is a success,
 * a receive posted later stays posted, and the next datagram fills it. */
void case_drop_no_receive(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1))
        goto out;
    memset(r.cm.buf, 'x', 64);
    memset(r.cm.buf + 64, 'y', 32);
    if (!UD_SEND(r.ce, &r.cm, 0, 64, &r.at_c.ah, 1) || !UD_WAIT_SENT(r.c.req, 1))
        goto out;
    /* the datagram has landed (and found no receive) long before this, even on a busy host */
    EXPECT(ud_drain(r.s.rcv, 1000) == 0, "an event on the receive EVD with no receive posted");
    if (!post_recv1(r.se, &r.sm, 0, GRH + 1024, 5))
        goto out;
    EXPECT(ud_drain(r.s.rcv, 500) == 0, "the receive posted after the datagram arrived completed");
    EXPECT_EMPTY(r.s.async, "server's async EVD after a dropped datagram");
    if (UD_SEND(r.ce, &r.cm, 64, 32, &r.at_c.ah, 2) && UD_WAIT_SENT(r.c.req, 2) && UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
        UD_CHECK_RECV(&ev, r.se, 5, r.sm.buf, r.cm.buf + 64, 32, &r.ca, &r.sa);
out:
    ud_rig_down(&r);
}

static DAT_VLEN max_message_of(DAT_EP_HANDLE ep)
{
    DAT_EP_PARAM p;
    memset(&p, 0, sizeof p);
    if (!EXPECT_RC(dat_ep_query(ep, DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE, &p), DAT_SUCCESS))
        return 0;
    return p.ep_attr.max_message_size;
}

/* The EP's max_message_size (the provider's limit, or less if asked) is sent whole; one byte
 * more is DAT_LENGTH_ERROR at the post, and nothing is sent. */
void case_max_size(void)
{
    struct ud_rig r;
    DAT_EVENT ev;
    DAT_EP_HANDLE small;
    struct ud_peer s2, c2;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1))
        goto out;
    DAT_VLEN max = max_message_of(r.ce);
    if (!EXPECT(max == r.max && max > 0 && max + GRH <= 8192, "the UD EP's max_message_size is %llu, expected the limit %lu",
                (unsigned long long)max, r.max))
        goto out;
    fill(r.cm.buf, (size_t)max + 1, 5);
    if (!post_recv1(r.se, &r.sm, 0, (DAT_SEG_LENGTH)(GRH + max + 1), 1))
        goto out;
    if (UD_SEND(r.ce, &r.cm, 0, (DAT_SEG_LENGTH)max, &r.at_c.ah, 2) && UD_WAIT_SENT(r.c.req, 2) &&
        UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
        UD_CHECK_RECV(&ev, r.se, 1, r.sm.buf, r.cm.buf, (size_t)max, &r.ca, &r.sa);
    DAT_LMR_TRIPLET t = lt(&r.cm, 0, (DAT_SEG_LENGTH)max + 1);
    EXPECT_RC(dat_ib_post_send_ud(r.ce, 1, &t, &r.at_c.ah, ck(3), DAT_COMPLETION_DEFAULT_FLAG), RC_LENGTH);
    /* an EP that asked for less: the bound is its own, over all segments */
    if (!ud_ep_make(&r.c, 1000, &small) || !EXPECT(max_message_of(small) == 1000, "a UD EP asking 1000 has max_message_size %llu",
                                                 (unsigned long long)max_message_of(small)) ||
        !UD_RESOLVE(&r.s, r.se, &r.c, small, &s2, &c2) || !post_recv1(r.se, &r.sm, 16384, GRH + 2048, 4))
        goto out;
    DAT_LMR_TRIPLET over[2] = {lt(&r.cm, 0, 600), lt(&r.cm, 600, 401)};
    EXPECT_RC(dat_ib_post_send_ud(small, 2, over, &c2.ah, ck(5), DAT_COMPLETION_DEFAULT_FLAG), RC_LENGTH);
    EXPECT(ud_drain(r.c.req, 300) == 0, "a refused send completed");
    EXPECT(ud_drain(r.s.rcv, 1) == 0, "a refused send was received");
    DAT_LMR_TRIPLET exact[2] = {lt(&r.cm, 0, 600), lt(&r.cm, 600, 400)};
    if (EXPECT_RC(dat_ib_post_send_ud(small, 2, exact, &c2.ah, ck(6), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        UD_WAIT_SENT(r.c.req, 6) && UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
        UD_CHECK_RECV(&ev, r.se, 4, r.sm.buf + 16384, r.cm.buf, 1000, &r.ca, &r.sa);
out:
    ud_rig_down(&r);
}

/* dat_ib_post_send_ud refuses an address handle that was freed, one of another EP, a forged
 * one and NULL (DAT_INVALID_PARAMETER | DAT_INVALID_ARG4) and sends nothing; a handle still
 * held goes on working. */
void case_stale_ah(void)
{
    struct ud_rig r;
    struct ud_peer s2, c2;
    DAT_EVENT ev;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1) || !UD_RESOLVE(&r.s, r.se, &r.c, r.ce, &s2, &c2) ||
        !post_recv1(r.se, &r.sm, 0, GRH + 1024, 1))
        goto out;
    memset(r.cm.buf, 's', 64);
    DAT_LMR_TRIPLET t = lt(&r.cm, 0, 64);
    if (!EXPECT_RC(dat_ib_ud_ah_free(r.ce, &r.at_c.ah), DAT_SUCCESS))
        goto out;
    DAT_IB_ADDR_HANDLE forged = c2.ah;
    forged.ah = (struct ibv_ah *)(uintptr_t)0x7777;
    EXPECT_RC(dat_ib_post_send_ud(r.ce, 1, &t, &r.at_c.ah, ck(1), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG4); /* freed */
    EXPECT_RC(dat_ib_post_send_ud(r.ce, 1, &t, NULL, ck(2), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG4);
    EXPECT_RC(dat_ib_post_send_ud(r.ce, 1, &t, &forged, ck(3), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG4);
    EXPECT_RC(dat_ib_post_send_ud(r.ce, 1, &t, &r.at_s.ah, ck(4), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG4); /* the server EP's */
    EXPECT(ud_drain(r.s.rcv, 300) == 0, "a refused send was received");
    EXPECT(ud_drain(r.c.req, 1) == 0, "a refused send completed");
    if (UD_SEND(r.ce, &r.cm, 0, 64, &c2.ah, 5) && UD_WAIT_SENT(r.c.req, 5) && UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
        UD_CHECK_RECV(&ev, r.se, 1, r.sm.buf, r.cm.buf, 64, &r.ca, &r.sa);
out:
    ud_rig_down(&r);
}

/* A UD EP takes no RDMA, atomics or plain sends, and an RC EP no datagrams:
 * DAT_MODEL_NOT_SUPPORTED, nothing posted, nothing touched. */
void case_refused_ops(void)
{
    struct ud_rig r;
    struct pair p;
    struct mr pm = {0};
    memset(&p, 0, sizeof p);
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1) || !post_recv1(r.se, &r.sm, 0, GRH + 1024, 1))
        goto out;
    memset(r.sm.buf + 4096, 0x11, 64);
    memset(r.cm.buf, 0x22, 64);
    DAT_LMR_TRIPLET l = lt(&r.cm, 0, 8);
    DAT_RMR_TRIPLET rr = rt(&r.sm, 4096, 8);
    EXPECT_RC(dat_ep_post_rdma_write(r.ce, 1, &l, ck(1), &rr, DAT_COMPLETION_DEFAULT_FLAG), RC_MODEL);
    EXPECT_RC(dat_ep_post_rdma_read(r.ce, 1, &l, ck(2), &rr, DAT_COMPLETION_DEFAULT_FLAG), RC_MODEL);
    EXPECT_RC(dat_ib_post_rdma_write_immed(r.ce, 1, &l, ck(3), &rr, 0x1234, DAT_COMPLETION_DEFAULT_FLAG), RC_MODEL);
    EXPECT_RC(dat_ib_post_cmp_and_swap(r.ce, 0x1111111111111111ull, 5, &l, ck(4), &rr, DAT_COMPLETION_DEFAULT_FLAG), RC_MODEL);
    EXPECT_RC(dat_ib_post_fetch_and_add(r.ce, 1, &l, ck(5), &rr, DAT_COMPLETION_DEFAULT_FLAG), RC_MODEL);
    EXPECT_RC(dat_ep_post_send(r.ce, 1, &l, ck(6), DAT_COMPLETION_DEFAULT_FLAG), RC_MODEL);
    EXPECT(ud_drain(r.c.req, 300) == 0, "a refused request completed");
    EXPECT(ud_drain(r.s.rcv, 1) == 0, "a refused send was received");
    for (int i = 0; i < 64; i++)
        if (!EXPECT(r.sm.buf[4096 + i] == 0x11 && r.cm.buf[i] == 0x22, "byte %d of the target or source changed", i))
            break;
    /* a datagram on a connected RC EP */
    if (!pair_up(&p, dx_port(4), NULL, NULL, 16) || !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &pm))
        goto out;
    DAT_LMR_TRIPLET pl = lt(&pm, 0, 8);
    EXPECT_RC(dat_ib_post_send_ud(p.ce, 1, &pl, &r.at_c.ah, ck(7), DAT_COMPLETION_DEFAULT_FLAG), RC_MODEL);
    EXPECT(ud_drain(p.c.req, 200) == 0, "the refused datagram on an RC EP completed");
out:
    mr_drop(&pm);
    pair_down(&p);
    ud_rig_down(&r);
}

/* UD EPs on a shared receive queue: datagrams to either EP complete receives posted with
 * dat_srq_post_recv, as UD receives of that EP. */
void case_srq(void)
{
    struct ud_rig r;
    DAT_SRQ_HANDLE srq;
    DAT_SRQ_ATTR sa;
    DAT_EP_ATTR a;
    DAT_EP_HANDLE se[2];
    struct ud_peer at_s[2], at_c[2];
    DAT_EVENT ev;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 0))
        goto out;
    sa.max_recv_dtos = 16;
    sa.max_recv_iov = 2;
    sa.low_watermark = 0;
    if (!EXPECT_RC(dat_srq_create(r.s.ia, r.s.pz, &sa, &srq), DAT_SUCCESS))
        goto out;
    ud_attr(&a, 0);
    for (int i = 0; i < 2; i++)
        if (!EXPECT_RC(dat_ep_create_with_srq(r.s.ia, r.s.pz, r.s.rcv, r.s.req, r.s.conn, srq, &a, &se[i]), DAT_SUCCESS))
            goto out;
    DAT_EP_PARAM ep;
    if (EXPECT_RC(dat_ep_query(se[1], DAT_EP_FIELD_ALL, &ep), DAT_SUCCESS))
        EXPECT(ep.srq_handle == srq && ep.ep_attr.service_type == (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD,
               "ep_query: srq_handle %p (expected %p), service type %d (expected UD)", (void *)ep.srq_handle, (void *)srq,
               (int)ep.ep_attr.service_type);
    for (int i = 0; i < 3; i++) {
        DAT_LMR_TRIPLET t = lt(&r.sm, (size_t)i * 1024, GRH + 512);
        if (!EXPECT_RC(dat_srq_post_recv(srq, 1, &t, ck(1 + (uint64_t)i)), DAT_SUCCESS))
            goto out;
    }
    for (int i = 0; i < 2; i++)
        if (!UD_RESOLVE(&r.s, se[i], &r.c, r.ce, &at_s[i], &at_c[i]))
            goto out;
    static const char *msg[2] = {"a datagram for the first EP on the SRQ", "and one for the second"};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(msg[i]) + 1;
        memcpy(r.cm.buf + 8192 + i * 1024, msg[i], len);
        if (!UD_SEND(r.ce, &r.cm, 8192 + (size_t)i * 1024, (DAT_SEG_LENGTH)len, &at_c[i].ah, 10 + (uint64_t)i) ||
            !UD_WAIT_SENT(r.c.req, 10 + (uint64_t)i) || !UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
            goto out;
        /* the SRQ's receives are taken in the order posted */
        UD_CHECK_RECV(&ev, se[i], 1 + (uint64_t)i, r.sm.buf + i * 1024, (const unsigned char *)msg[i], len, &r.ca, &r.sa);
    }
    DAT_SRQ_PARAM sp;
    if (EXPECT_RC(dat_srq_query(srq, DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT, &sp), DAT_SUCCESS))
        EXPECT(sp.available_dto_count == 1, "the SRQ has %d receives available, expected 1 of 3 after two datagrams",
               (int)sp.available_dto_count);
    /* an EP on an SRQ takes no receives of its own */
    DAT_LMR_TRIPLET t = lt(&r.sm, 8192, 64);
    EXPECT(dat_ep_post_recv(se[0], 1, &t, ck(99), DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS,
           "dat_ep_post_recv on a UD EP created with an SRQ succeeded");
out:
    ud_rig_down(&r);
}

/* An address handle belongs to the EP whose resolution made it, but as on verbs (where it
 * belongs to the protection domain) another UD EP of the same PZ may send through it; an EP
 * of another PZ may not, only the owner releases it, and once released it is refused to all. */
void case_ah_shared_in_pz(void)
{
    struct ud_rig r;
    struct ud_peer s2, c2, s3, c3;
    DAT_EP_HANDLE ce2, ce3;
    DAT_PZ_HANDLE pz2;
    DAT_EP_ATTR a;
    DAT_EVENT ev;
    if (!UD_RIG_UP(&r, dx_port(0), 0, 1) || !ud_ep_make(&r.c, 0, &ce2) ||
        !EXPECT_RC(dat_pz_create(r.c.ia, &pz2), DAT_SUCCESS))
        goto out;
    ud_attr(&a, 0);
    if (!EXPECT_RC(dat_ep_create(r.c.ia, pz2, r.c.rcv, r.c.req, r.c.conn, &a, &ce3), DAT_SUCCESS) ||
        !UD_RESOLVE(&r.s, r.se, &r.c, ce2, &s2, &c2) || !UD_RESOLVE(&r.s, r.se, &r.c, ce3, &s3, &c3) ||
        !post_recv1(r.se, &r.sm, 0, GRH + 1024, 1) || !post_recv1(r.se, &r.sm, 2048, GRH + 1024, 2))
        goto out;
    /* ce2 sends through ce's handle; its LMR is in the PZ of both */
    memset(r.cm.buf, 'p', 64);
    if (UD_SEND(ce2, &r.cm, 0, 64, &r.at_c.ah, 3) && UD_WAIT_SENT(r.c.req, 3) && UD_WAIT_DTO(r.s.rcv, DAT_IB_UD_RECV, &ev))
        UD_CHECK_RECV(&ev, r.se, 1, r.sm.buf, r.cm.buf, 64, &r.ca, &r.sa);
    /* ce3 is in another PZ */
    DAT_LMR_TRIPLET t = lt(&r.cm, 0, 64);
    EXPECT_RC(dat_ib_post_send_ud(ce3, 1, &t, &r.at_c.ah, ck(4), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG4);
    /* only the owner releases it */
    EXPECT_RC(dat_ib_ud_ah_free(ce2, &r.at_c.ah), RC_ARG3);
    EXPECT_RC(dat_ib_ud_ah_free(r.ce, &r.at_c.ah), DAT_SUCCESS);
    EXPECT_RC(dat_ib_post_send_ud(ce2, 1, &t, &r.at_c.ah, ck(5), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG4);
    EXPECT(ud_drain(r.s.rcv, 300) == 0, "a refused send was received");
out:
    ud_rig_down(&r);
}
