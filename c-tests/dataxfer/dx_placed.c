/* Sends placed straight into the peer's posted receive (dat2-soft between verified peers on
 * one host, src/device/soft/recvring.rs): the data is in the receive's memory when the post
 * returns, as on an HCA a send lands without the receiver's thread. The receive completions
 * still come in order, with their lengths; nothing lands in a receive once it completed
 * flushed, or in memory once its dat_lmr_free returned. On other IAs (and over TCP, the _tcp
 * rerun) the same program checks only the order and the data. */
#include "dx.h"

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
    memset(&q, 0, sizeof q);
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !pair_up(&q, dx_port(1), NULL, NULL, 16) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &sb) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &rb) ||
        !mr_make(&q.c, q.c.pz, 4096, PRIV_ALL, &qs) || !mr_make(&q.s, q.s.pz, 4096, PRIV_ALL, &qr))
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
    release_engine(&q, cno);
    mr_drop(&sb);
    mr_drop(&rb);
    mr_drop(&qs);
    mr_drop(&qr);
    pair_down(&q);
    pair_down(&p);
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
    struct pair p, q;
    struct mr sb = {0}, rb = {0}, qs = {0}, qr = {0};
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_EVENT ev;
    memset(&q, 0, sizeof q);
    if (!pair_up(&p, dx_port(0), NULL, NULL, 2 * DEPTH) || !pair_up(&q, dx_port(1), NULL, NULL, 16) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &sb) || !mr_make(&p.s, p.s.pz, DEPTH * SLOT, PRIV_ALL, &rb) ||
        !mr_make(&q.c, q.c.pz, 4096, PRIV_ALL, &qs) || !mr_make(&q.s, q.s.pz, 4096, PRIV_ALL, &qr))
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
out:
    release_engine(&q, cno);
    pair_down(&p);
    pair_down(&q);
    mr_drop(&sb);
    mr_drop(&rb);
    mr_drop(&qs);
    mr_drop(&qr);
}

void case_send_placed_lmr_free(void) { placed_target_ends(0); }
void case_send_placed_disconnect(void) { placed_target_ends(1); }
