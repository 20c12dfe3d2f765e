/* Sends placed straight into the peer's posted receive (dat2-soft between verified peers on
 * one host, src/device/soft/recvring.rs): the data is in the receive's memory when the post
 * returns, as on an HCA a send lands without the receiver's thread. The receive completions
 * still come in order, with their lengths; nothing lands in a receive once it completed
 * flushed, or in memory once its dat_lmr_free returned. On other IAs (and over TCP, the _tcp
 * rerun) the same program checks only the order and the data. */
#include "dx.h"

#include <dat2/dat_ib_extensions.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dx_cases.h"

#define SLOT 64
#define NRECV 100 /* more than a ring holds (64): the rest are published as receives complete */
#define BIG (128 << 10)

/* Whether this run must see every small send in memory at once: dat2-soft with its
 * cross-memory path on (the pair lives in one process, whose peer is itself). */
static int placed_expected(struct pair *p)
{
    return dx_on_soft_device() && dx_cma_on(p->c.ia);
}

/* Receive j (the j-th posted, taken by send j): every 50th a large one, for a send larger than
 * a placed send may be (it goes the ordinary way, and must keep its place in the order); every
 * 7th of two elements (which no sender places into); the others one element of slot j %
 * NRECV. */
static int big_one(int j) { return j % 50 == 49; }

static int post_recv_j(struct pair *p, struct mr *rb, struct mr *big, int j)
{
    size_t off = (size_t)(j % NRECV) * SLOT;
    if (big_one(j))
        return post_recv1(p->se, big, 0, BIG, (uint64_t)j);
    memset(rb->buf + off, 0, SLOT);
    if (j % 7 != 3)
        return post_recv1(p->se, rb, off, SLOT, (uint64_t)j);
    DAT_LMR_TRIPLET two[2] = {lt(rb, off, 4), lt(rb, off + 4, SLOT - 4)};
    return EXPECT_RC(dat_ep_post_recv(p->se, 2, two, ck((uint64_t)j), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
}

/* 300 sends in a row into NRECV receives, each reposted as it completes: small ones (8 bytes,
 * and one of 0), large ones (BIG), some into receives of two elements. */
void case_send_placed_in_order(void)
{
    enum { N = 300 };
    struct pair p;
    struct mr sb = {0}, rb = {0}, big = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    int at_once = 0, small = 0;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 2 * NRECV) || !mr_make(&p.c, p.c.pz, BIG, PRIV_ALL, &sb) ||
        !mr_make(&p.s, p.s.pz, NRECV * SLOT, PRIV_ALL, &rb) || !mr_make(&p.s, p.s.pz, BIG, PRIV_ALL, &big))
        goto out;
    int must = placed_expected(&p);
    for (int j = 0; j < NRECV; j++)
        if (!post_recv_j(&p, &rb, &big, j))
            goto out;
    for (int k = 0; k < N; k++) {
        int large = big_one(k);
        uint32_t len = large ? BIG : (k == 10 ? 0 : 8);
        unsigned char *at = large ? big.buf : rb.buf + (size_t)(k % NRECV) * SLOT;
        uint64_t v = 0x5a00000000000000ull | (uint64_t)(k + 1);
        memcpy(sb.buf, &v, 8);
        if (large)
            fill(sb.buf + 8, BIG - 8, (unsigned)k);
        DAT_LMR_TRIPLET st = lt(&sb, 0, len);
        if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &st, ck(1000 + (uint64_t)k), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
        if (!large && len > 0 && k % 7 != 3) {
            uint64_t got;
            memcpy(&got, at, 8);
            small++;
            at_once += got == v;
        }
        if (!WAIT_DTO(p.c.req, &d) ||
            !EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == 1000 + (uint64_t)k, "send %d: status %u cookie %llu",
                    k, (unsigned)d.status, (unsigned long long)d.user_cookie.as_64))
            goto out;
        if (!WAIT_DTO(p.s.rcv, &d) ||
            !EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == (uint64_t)k && d.transfered_length == len,
                    "receive for send %d: status %u cookie %llu length %llu (want %u)", k, (unsigned)d.status,
                    (unsigned long long)d.user_cookie.as_64, (unsigned long long)d.transfered_length, len))
            goto out;
        if (len > 0) {
            uint64_t got;
            memcpy(&got, at, 8);
            if (!EXPECT(got == v, "receive for send %d holds %#llx, not %#llx", k, (unsigned long long)got,
                        (unsigned long long)v))
                goto out;
        }
        if (large && !EXPECT(memcmp(at + 8, sb.buf + 8, BIG - 8) == 0, "send %d's large payload differs", k))
            goto out;
        if (!post_recv_j(&p, &rb, &big, k + NRECV))
            goto out;
    }
    printf("  (%d of %d small sends were in the receive when the post returned)\n", at_once, small);
    if (must)
        EXPECT(at_once == small, "only %d of %d small sends were in the receive's memory when their post returned", at_once,
               small);
out:
    mr_drop(&sb);
    mr_drop(&rb);
    mr_drop(&big);
    pair_down(&p);
}

/* ---- no thread of the receiver's -------------------------------------------------------- */

static atomic_int agent_in, agent_out;

/* Holds the thread that delivers the event (the process's engine thread) for 400 ms. */
static void busy_agent(DAT_PVOID instance, DAT_EVD_HANDLE evd)
{
    (void)instance;
    (void)evd;
    if (atomic_exchange(&agent_in, 1) == 0) {
        dx_sleep_ms(400);
        atomic_store(&agent_out, 1);
    }
}

/* Holds the process's engine thread in busy_agent: q's receive EVD gets a CNO whose agent
 * sleeps, and an 8-byte send on q wakes it. Returns whether the agent has started. */
static int hold_engine(struct pair *q, struct mr *qs, struct mr *qr, DAT_CNO_HANDLE *cno)
{
    DAT_OS_WAIT_PROXY_AGENT a = {NULL, busy_agent};
    if (!EXPECT_RC(dat_cno_create(q->s.ia, a, cno), DAT_SUCCESS) || !EXPECT_RC(dat_evd_modify_cno(q->s.rcv, *cno), DAT_SUCCESS) ||
        !post_recv1(q->se, qr, 0, 64, 1))
        return 0;
    DAT_LMR_TRIPLET qt = lt(qs, 0, 8);
    if (!EXPECT_RC(dat_ep_post_send(q->ce, 1, &qt, ck(2), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
        return 0;
    double t0 = dx_now();
    while (!atomic_load(&agent_in) && dx_now() - t0 < 5)
        ;
    return EXPECT(atomic_load(&agent_in), "the agent never ran");
}

/* Waits for busy_agent to end, and takes its CNO away. */
static void release_engine(struct pair *q, DAT_CNO_HANDLE cno)
{
    double t0 = dx_now();
    while (atomic_load(&agent_in) && !atomic_load(&agent_out) && dx_now() - t0 < 5)
        dx_sleep_ms(5);
    if (cno != DAT_HANDLE_NULL) {
        dat_evd_modify_cno(q->s.rcv, DAT_HANDLE_NULL);
        dat_cno_free(cno);
    }
}

/* The end of a case with a held engine: the agent released, both pairs and four
 * registrations gone. */
static void held_pairs_down(struct pair *p, struct pair *q, DAT_CNO_HANDLE cno, struct mr *mrs[4])
{
    release_engine(q, cno);
    for (int k = 0; k < 4; k++)
        mr_drop(mrs[k]);
    pair_down(q);
    pair_down(p);
}

/* While the process's engine thread is held in a consumer's agent (a second connection's
 * receive EVD), 8-byte sends on the first connection must each be in their receive's memory
 * when their post returns: placed by the sender, as an HCA places them, with no thread of the
 * receiver's. Before, they waited on the socket for the engine (0 of 5). Their receive
 * completions follow once the engine is free. */
void case_send_placed_engine_busy(void)
{
    enum { N = 5 };
    struct pair p, q;
    struct mr sb = {0}, rb = {0}, qs = {0}, qr = {0};
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pairs_up(&p, 16, &q, &qs, &qr) || !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &sb) ||
        !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &rb))
        goto out;
    int must = placed_expected(&p);
    memset(rb.buf, 0, 4096);
    for (int k = 0; k < N; k++)
        if (!post_recv1(p.se, &rb, (size_t)k * SLOT, SLOT, (uint64_t)k))
            goto out;
    if (!hold_engine(&q, &qs, &qr, &cno))
        goto out;
    int at_once = 0;
    for (int k = 0; k < N; k++) {
        uint64_t v = 0xa5a5000000000000ull | (uint64_t)(k + 1), got;
        memcpy(sb.buf + (size_t)k * 8, &v, 8);
        DAT_LMR_TRIPLET st = lt(&sb, (size_t)k * 8, 8);
        if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &st, ck(100 + (uint64_t)k), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
        memcpy(&got, rb.buf + (size_t)k * SLOT, 8);
        at_once += got == v;
    }
    int held = !atomic_load(&agent_out);
    printf("  (%d of %d sends in their receive when the post returned, the engine %s)\n", at_once, N,
           held ? "held throughout" : "freed meanwhile");
    if (must && held)
        EXPECT(at_once == N, "only %d of %d sends were in their receive when the post returned, with the engine busy",
               at_once, N);
    for (int k = 0; k < N; k++) {
        if (!WAIT_DTO(p.s.rcv, &d) ||
            !EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == (uint64_t)k && d.transfered_length == 8,
                    "receive %d: status %u cookie %llu length %llu", k, (unsigned)d.status,
                    (unsigned long long)d.user_cookie.as_64, (unsigned long long)d.transfered_length))
            goto out;
        if (!WAIT_DTO(p.c.req, &d) || !EXPECT(d.status == DAT_DTO_SUCCESS, "send %d: status %u", k, (unsigned)d.status))
            goto out;
    }
out:
    held_pairs_down(&p, &q, cno, (struct mr *[]){&sb, &rb, &qs, &qr});
}

/* ---- placements after the end of their target ------------------------------------------ */

/* The target ends its receives while the process's engine is held, so that the sender has not
 * heard of it and still finds its receives published: `how` 0 frees the receives' LMR
 * (dat_lmr_free), 1 disconnects abruptly (its receives complete flushed). Sends posted after
 * that call returned must not land in that memory: the sender finds the key withdrawn, or the
 * ring, and sends them the ordinary way, which the target no longer runs. */
static void placed_target_ends(int how)
{
    enum { DEPTH = 16, BEFORE = 4, AFTER = 8 };
    int received_ok = 0;
    struct pair p, q;
    struct mr sb = {0}, rb = {0}, qs = {0}, qr = {0};
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_EVENT ev;
    if (!pairs_up(&p, 2 * DEPTH, &q, &qs, &qr) || !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &sb) ||
        !mr_make(&p.s, p.s.pz, DEPTH * SLOT, PRIV_ALL, &rb))
        goto out;
    memset(rb.buf, 0, DEPTH * SLOT);
    for (int k = 0; k < DEPTH; k++)
        if (!post_recv1(p.se, &rb, (size_t)k * SLOT, SLOT, (uint64_t)k))
            goto out;
    if (!hold_engine(&q, &qs, &qr, &cno))
        goto out;
    uint64_t v = 0x1111111111111111ull;
    memcpy(sb.buf, &v, 8);
    DAT_LMR_TRIPLET st = lt(&sb, 0, 8);
    for (int k = 0; k < BEFORE; k++)
        if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &st, ck((uint64_t)k), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
    if (how == 0) {
        if (!EXPECT_RC(dat_lmr_free(rb.h), DAT_SUCCESS))
            goto out;
        rb.h = DAT_HANDLE_NULL;
    } else {
        if (!EXPECT_RC(dat_ep_disconnect(p.se, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS))
            goto out;
        /* Every receive completes: flushed, but those the sends before took (an HCA's may
         * have completed them already); dat2-soft has them all queued when the disconnect
         * returns, an HCA flushes them soon. */
        int flushed = 0, done = 0;
        double end = dx_now() + 5;
        while (done < DEPTH && dx_now() < end)
            if (dat_evd_dequeue(p.s.rcv, &ev) == DAT_SUCCESS) {
                done++;
                flushed += ev.event_data.dto_completion_event_data.status == DAT_DTO_ERR_FLUSHED;
            }
        EXPECT(done == DEPTH && flushed >= DEPTH - BEFORE, "%d of %d receives completed, %d flushed", done, DEPTH, flushed);
        received_ok = done - flushed;
    }
    /* The consumer takes the memory back: it must stay as the consumer leaves it. */
    memset(rb.buf, 0xee, DEPTH * SLOT);
    v = 0x2222222222222222ull;
    memcpy(sb.buf, &v, 8);
    for (int k = 0; k < AFTER; k++)
        if (dat_ep_post_send(p.ce, 1, &st, ck(100 + (uint64_t)k), DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
            break;
    int held = !atomic_load(&agent_out);
    release_engine(&q, cno);
    cno = DAT_HANDLE_NULL;
    dx_sleep_ms(100);
    int changed = -1;
    for (int i = 0; i < DEPTH * SLOT && changed < 0; i++)
        if (rb.buf[i] != 0xee)
            changed = i;
    EXPECT(changed < 0, "a receive's memory changed at byte %d after %s returned (the engine %s)", changed,
           how == 0 ? "dat_lmr_free" : "dat_ep_disconnect", held ? "held throughout" : "freed meanwhile");
    if (how == 1) {
        /* A send succeeds only when its receive did, as on an HCA: the sends before the
         * disconnect that the target flushed complete flushed at the sender too. */
        int seen = 0, succeeded = 0;
        double end = dx_now() + 5;
        while (seen < BEFORE && dx_now() < end) {
            if (dat_evd_dequeue(p.c.req, &ev) != DAT_SUCCESS)
                continue;
            if (ev.event_data.dto_completion_event_data.user_cookie.as_64 < BEFORE) {
                seen++;
                succeeded += ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS;
            }
        }
        EXPECT(seen == BEFORE && succeeded == received_ok, "%d of the %d sends before the disconnect completed, %d "
               "successfully, but %d of their receives did", seen, BEFORE, succeeded, received_ok);
    }
out:
    held_pairs_down(&p, &q, cno, (struct mr *[]){&sb, &rb, &qs, &qr});
}

void case_send_placed_lmr_free(void) { placed_target_ends(0); }
void case_send_placed_disconnect(void) { placed_target_ends(1); }

/* ---- an EP used again ------------------------------------------------------------------- */

/* A receive posted while the EP's next connection is being set up must be published under
 * that connection's numbers. The client EP takes OLD receives on a first connection, is
 * disconnected, reset and connected again; one receive is posted while its handshake waits on
 * the (held) engine, after its claims (and receive ring) went to the server. Were it published
 * under the first connection's count (as receive OLD), the ring would still list it there
 * once the connection is set up: the server's send number OLD, with no receive of that
 * number posted yet, would be written into receive 0, long completed. (dat_ep_reset makes a
 * new QP, which counts from 0: this guards that.) */
void case_send_placed_ep_reuse(void)
{
    enum { OLD = 10 };
    struct pair p, q;
    struct mr sb = {0}, rb = {0}, qs = {0}, qr = {0};
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    DAT_EVENT ev;
    if (!pairs_up(&p, 32, &q, &qs, &qr) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sb) ||
        !mr_make(&p.c, p.c.pz, 2 * OLD * SLOT, PRIV_ALL, &rb))
        goto out;
    DAT_LMR_TRIPLET st = lt(&sb, 0, 8);
    /* The first connection: OLD sends from the server into the client's receives. */
    for (int k = 0; k < OLD; k++) {
        if (!post_recv1(p.ce, &rb, (size_t)k * SLOT, SLOT, (uint64_t)k) ||
            !EXPECT_RC(dat_ep_post_send(p.se, 1, &st, ck(50 + (uint64_t)k), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
            !WAIT_DTO(p.c.rcv, &d) || !WAIT_DTO(p.s.req, &d))
            goto out;
    }
    if (!EXPECT_RC(dat_ep_disconnect(p.ce, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS) || !EXPECT_CONN_END(p.c.conn, WAIT_MS, "client") ||
        !EXPECT_CONN_END(p.s.conn, WAIT_MS, "server") || !EXPECT_RC(dat_ep_reset(p.ce), DAT_SUCCESS) ||
        !EXPECT_RC(dat_ep_reset(p.se), DAT_SUCCESS))
        goto out;
    /* The second connection, with the engine held once the server accepted: the client's
     * handshake waits for the server's answer, its claims (and ring) already given. */
    if (!EXPECT_RC(dat_ep_connect(p.ce, dx_loopback(0), p.s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS) ||
        !EXPECT_RC(wait_ev(p.s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "server got event 0x%x", (unsigned)ev.event_number))
        goto out;
    atomic_store(&agent_in, 0);
    atomic_store(&agent_out, 0);
    if (!hold_engine(&q, &qs, &qr, &cno) ||
        !EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p.se, 0, NULL), DAT_SUCCESS))
        goto out;
    dx_sleep_ms(150);
    memset(rb.buf, 0, 2 * OLD * SLOT);
    if (!post_recv1(p.ce, &rb, 0, SLOT, 100))
        goto out;
    release_engine(&q, cno);
    cno = DAT_HANDLE_NULL;
    if (!wait_established(__LINE__, p.s.conn, p.se, "server") || !wait_established(__LINE__, p.c.conn, p.ce, "client"))
        goto out;
    /* OLD sends, each into the receive posted just before it; then one with none posted. */
    for (int k = 0; k <= OLD; k++) {
        uint64_t v = 0x3300000000000000ull | (uint64_t)(k + 1), got;
        if (k == OLD)
            memset(rb.buf, 0xee, SLOT); /* receive 0's memory, the consumer's again */
        memcpy(sb.buf, &v, 8);
        if (!EXPECT_RC(dat_ep_post_send(p.se, 1, &st, ck(200 + (uint64_t)k), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
        if (k == OLD) {
            dx_sleep_ms(50);
            int changed = -1;
            for (int i = 0; i < SLOT && changed < 0; i++)
                if (rb.buf[i] != 0xee)
                    changed = i;
            if (!EXPECT(changed < 0, "send %d changed byte %d of receive 0, completed long before", k, changed) ||
                !post_recv1(p.ce, &rb, (size_t)k * SLOT, SLOT, 100 + (uint64_t)k))
                goto out;
        }
        if (!WAIT_DTO(p.c.rcv, &d) ||
            !EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == 100 + (uint64_t)k && d.transfered_length == 8,
                    "receive for send %d: status %u cookie %llu length %llu", k, (unsigned)d.status,
                    (unsigned long long)d.user_cookie.as_64, (unsigned long long)d.transfered_length) ||
            !WAIT_DTO(p.s.req, &d) || !EXPECT(d.status == DAT_DTO_SUCCESS, "send %d: status %u", k, (unsigned)d.status))
            goto out;
        memcpy(&got, rb.buf + (size_t)k * SLOT, 8);
        if (!EXPECT(got == v, "receive %d holds %#llx, not %#llx", k, (unsigned long long)got, (unsigned long long)v))
            goto out;
        if (k + 1 < OLD && !post_recv1(p.ce, &rb, (size_t)(k + 1) * SLOT, SLOT, 101 + (uint64_t)k))
            goto out;
    }
out:
    held_pairs_down(&p, &q, cno, (struct mr *[]){&sb, &rb, &qs, &qr});
}

/* ---- placed sends among other requests that take receives ------------------------------- */


/* Sends (8 bytes, placed where they can be; every 5th of 0 bytes, solicited) interleaved with
 * RDMA writes with immediate data, which take a receive too but never go placed, over more
 * receives than a ring holds, each reposted as it completes: every receive must complete in
 * order, with its cookie, its kind, its length and the right data. A placed send names its
 * receive by number, counted by the sender over both kinds. */
void case_send_placed_write_imm(void)
{
    enum { N = 200, DEPTH = 80, AREA = 8192 };
    struct pair p;
    struct mr sb = {0}, rb = {0};
    DAT_EVENT ev;
    if (dx_ia_lacks("DAT_IB_IMMED_DATA")) {
        printf("  (no immediate data on this IA)\n");
        return;
    }
    if (!pair_up(&p, dx_port(0), NULL, NULL, 2 * DEPTH) || !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &sb) ||
        !mr_make(&p.s, p.s.pz, AREA + 4096, PRIV_ALL, &rb))
        goto out;
    memset(rb.buf, 0, AREA + 4096);
    for (int j = 0; j < DEPTH; j++)
        if (!post_recv1(p.se, &rb, (size_t)j * SLOT, SLOT, (uint64_t)j))
            goto out;
    for (int k = 0; k < N; k++) {
        int imm = k % 3 == 1, zero = !imm && k % 5 == 4;
        uint64_t v = 0x7700000000000000ull | (uint64_t)(k + 1);
        size_t slot = (size_t)(k % DEPTH) * SLOT;
        memcpy(sb.buf, &v, 8);
        DAT_LMR_TRIPLET l = lt(&sb, 0, zero ? 0 : 8);
        DAT_RETURN rc;
        if (imm) {
            DAT_RMR_TRIPLET r = rt(&rb, AREA + (size_t)(k % 512) * 8, 8);
            rc = dat_ib_post_rdma_write_immed(p.ce, 1, &l, ck(1000 + (uint64_t)k), &r, (DAT_UINT32)k,
                                              DAT_COMPLETION_DEFAULT_FLAG);
        } else {
            rc = dat_ep_post_send(p.ce, 1, &l, ck(1000 + (uint64_t)k),
                                  zero ? DAT_COMPLETION_SOLICITED_WAIT_FLAG : DAT_COMPLETION_DEFAULT_FLAG);
        }
        if (!EXPECT_RC(rc, DAT_SUCCESS) || !EXPECT_RC(wait_ev(p.c.req, WAIT_MS, &ev), DAT_SUCCESS) ||
            !EXPECT(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS &&
                        ev.event_data.dto_completion_event_data.user_cookie.as_64 == 1000 + (uint64_t)k,
                    "request %d: status %u cookie %llu", k, (unsigned)ev.event_data.dto_completion_event_data.status,
                    (unsigned long long)ev.event_data.dto_completion_event_data.user_cookie.as_64))
            goto out;
        if (!EXPECT_RC(wait_ev(p.s.rcv, WAIT_MS, &ev), DAT_SUCCESS))
            goto out;
        const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        int is_ext = ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT;
        if (!EXPECT(d->status == DAT_DTO_SUCCESS && d->user_cookie.as_64 == (uint64_t)k && is_ext == imm,
                    "receive for request %d (%s): event 0x%x status %u cookie %llu", k, imm ? "write imm" : "send",
                    (unsigned)ev.event_number, (unsigned)d->status, (unsigned long long)d->user_cookie.as_64))
            goto out;
        if (imm) {
            const DAT_IB_EXTENSION_EVENT_DATA *x = (const DAT_IB_EXTENSION_EVENT_DATA *)ev.event_extension_data;
            uint64_t got;
            memcpy(&got, rb.buf + AREA + (size_t)(k % 512) * 8, 8);
            if (!EXPECT(x->type == DAT_IB_RDMA_WRITE_IMMED_DATA && x->val.immed.data == (DAT_UINT32)k && got == v,
                        "write imm %d: type %d imm %u data %#llx", k, (int)x->type, (unsigned)x->val.immed.data,
                        (unsigned long long)got))
                goto out;
        } else {
            uint64_t got;
            memcpy(&got, rb.buf + slot, 8);
            if (!EXPECT(d->transfered_length == (zero ? 0u : 8u) && (zero || got == v),
                        "send %d: length %llu data %#llx (want %#llx)", k, (unsigned long long)d->transfered_length,
                        (unsigned long long)got, (unsigned long long)v))
                goto out;
        }
        memset(rb.buf + slot, 0, SLOT);
        if (!post_recv1(p.se, &rb, slot, SLOT, (uint64_t)(k + DEPTH)))
            goto out;
    }
out:
    mr_drop(&sb);
    mr_drop(&rb);
    pair_down(&p);
}

/* ---- several threads posting on one EP -------------------------------------------------- */

enum { MT_THREADS = 2, MT_EACH = 100 };

struct mt_arg {
    DAT_EP_HANDLE ep;
    struct mr *sb;
    int t;
    int failed;
};

static void *mt_poster(void *a_)
{
    struct mt_arg *a = a_;
    for (int i = 0; i < MT_EACH; i++) {
        size_t off = ((size_t)a->t * MT_EACH + (size_t)i) * 8;
        uint64_t v = ((uint64_t)(a->t + 1) << 32) | (uint64_t)(i + 1);
        memcpy(a->sb->buf + off, &v, 8);
        DAT_LMR_TRIPLET l = lt(a->sb, off, 8);
        DAT_RETURN rc;
        while ((rc = dat_ep_post_send(a->ep, 1, &l, ck(v), DAT_COMPLETION_DEFAULT_FLAG)) != DAT_SUCCESS &&
               DAT_GET_TYPE(rc) == DAT_INSUFFICIENT_RESOURCES)
            dx_sleep_ms(1);
        if (rc != DAT_SUCCESS) {
            a->failed = 1;
            break;
        }
    }
    return NULL;
}

/* Two threads post 8-byte sends on one EP at once, into more receives than a ring holds: each
 * receive completes in order, holding the very send that completed it, and each thread's sends
 * land in the order it posted them (frames take their place in the stream under the QP's lock,
 * and a placed send names its receive by number). */
void case_send_placed_threads(void)
{
    enum { TOTAL = MT_THREADS * MT_EACH };
    struct pair p;
    struct mr sb = {0}, rb = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    pthread_t th[MT_THREADS];
    struct mt_arg args[MT_THREADS];
    int started = 0;
    if (!pair_up(&p, dx_port(0), NULL, NULL, TOTAL + 8) || !mr_make(&p.c, p.c.pz, TOTAL * 8, PRIV_ALL, &sb) ||
        !mr_make(&p.s, p.s.pz, TOTAL * SLOT, PRIV_ALL, &rb))
        goto out;
    memset(rb.buf, 0, TOTAL * SLOT);
    for (int j = 0; j < TOTAL; j++)
        if (!post_recv1(p.se, &rb, (size_t)j * SLOT, SLOT, (uint64_t)j))
            goto out;
    for (; started < MT_THREADS; started++) {
        args[started] = (struct mt_arg){p.ce, &sb, started, 0};
        if (pthread_create(&th[started], NULL, mt_poster, &args[started]) != 0)
            break;
    }
    uint32_t last[MT_THREADS] = {0};
    for (int j = 0; j < TOTAL; j++) {
        if (!WAIT_DTO(p.s.rcv, &d) ||
            !EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == (uint64_t)j && d.transfered_length == 8,
                    "receive %d: status %u cookie %llu length %llu", j, (unsigned)d.status,
                    (unsigned long long)d.user_cookie.as_64, (unsigned long long)d.transfered_length))
            break;
        uint64_t v;
        memcpy(&v, rb.buf + (size_t)j * SLOT, 8);
        unsigned t = (unsigned)(v >> 32) - 1;
        uint32_t i = (uint32_t)v;
        if (!EXPECT(t < MT_THREADS && i == last[t] + 1, "receive %d holds %#llx: thread %u's send %u after its %u", j,
                    (unsigned long long)v, t, i, t < MT_THREADS ? last[t] : 0))
            break;
        last[t] = i;
    }
    for (int j = 0; j < TOTAL; j++)
        if (!WAIT_DTO(p.c.req, &d) || !EXPECT(d.status == DAT_DTO_SUCCESS, "send completion %d: status %u", j, (unsigned)d.status))
            break;
out:
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        EXPECT(!args[t].failed, "thread %d could not post", t);
    }
    mr_drop(&sb);
    mr_drop(&rb);
    pair_down(&p);
}
