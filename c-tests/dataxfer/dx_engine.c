/* The soft device's progress engine (src/device/soft/engine.rs, qp/reader.rs): wake-ups that
 * a consumer call leaves for the engine must not be lost, and a consumer call made from the
 * engine's own delivery must not stop it. */
#include "dx.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dx_cases.h"

/* A send that came before any receive is held (stalled); the consumer then posts a large RDMA
 * READ and, while its response lands piece by piece (each piece under the QP's `exec`), posts
 * one receive. The receive's post finds `exec` taken and leaves the drain to its holder: the
 * held send must then complete into that receive, with nothing more from the peer. Over TCP
 * (the _tcp rerun) the response lands in pieces; the receive is posted at a different moment
 * of the landing each round. */
void case_engine_drain_after_read(void)
{
    enum { ROUNDS = 24, BIG = 8 << 20 };
    struct pair p;
    struct mr sm = {0}, cm = {0}, sb = {0}, rb = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, BIG, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, BIG, PRIV_ALL, &cm) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sb) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &rb))
        goto out;
    fill(sm.buf, BIG, 5);
    for (int k = 0; k < ROUNDS; k++) {
        DAT_LMR_TRIPLET st = lt(&sb, 0, 8);
        /* The send travels ahead of the read's response on the same stream: it is held. */
        if (!EXPECT_RC(dat_ep_post_send(p.se, 1, &st, ck(10 + (uint64_t)k), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            break;
        DAT_LMR_TRIPLET rd = lt(&cm, 0, BIG);
        DAT_RMR_TRIPLET r = rt(&sm, 0, BIG);
        if (!EXPECT_RC(dat_ep_post_rdma_read(p.ce, 1, &rd, ck(100 + (uint64_t)k), &r, DAT_COMPLETION_DEFAULT_FLAG),
                       DAT_SUCCESS))
            break;
        double until = dx_now() + (k % 8) * 0.0005;
        while (dx_now() < until)
            ;
        if (!post_recv1(p.ce, &rb, 0, 64, 200 + (uint64_t)k))
            break;
        if (!WAIT_DTO(p.c.req, &d) || !EXPECT(d.status == DAT_DTO_SUCCESS, "round %d: read status %u", k, (unsigned)d.status))
            break;
        DAT_EVENT ev;
        DAT_RETURN rc = wait_ev(p.c.rcv, 3000, &ev);
        if (!EXPECT(rc == DAT_SUCCESS, "round %d: the held send never completed into the receive posted meanwhile "
                                       "(dat_evd_wait 0x%08x)", k, (unsigned)rc))
            break;
        if (!WAIT_DTO(p.s.req, &d))
            break;
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    mr_drop(&sb);
    mr_drop(&rb);
    pair_down(&p);
}

/* ---- a consumer call from inside the engine's delivery ----------------------------------- */

static DAT_IA_HANDLE agent_ia;
static atomic_int agent_done; /* 1 + (dat_ia_close failed), once it returned */
static char agent_thread[16];  /* the name of the thread that ran the agent (15 bytes at most) */

static void close_in_agent(DAT_PVOID instance, DAT_EVD_HANDLE evd)
{
    (void)instance;
    (void)evd;
    DAT_IA_HANDLE ia = agent_ia;
    agent_ia = DAT_HANDLE_NULL;
    pthread_getname_np(pthread_self(), agent_thread, sizeof agent_thread);
    if (ia != DAT_HANDLE_NULL)
        atomic_store(&agent_done, dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) == DAT_SUCCESS ? 1 : 2);
}

/* An 8-byte send, its receive completed where the receive side's QP reads it (over TCP, on the
 * engine thread that serves every connection of the process): the proxy agent of the receive
 * EVD's CNO closes that IA, freeing the EP, its LMR and the EVD from inside the delivery. The
 * close must return, and a second connection of the process must still carry data. */
void case_engine_close_in_agent(void)
{
    struct pair p, q;
    struct mr sb = {0}, rb = {0}, qs = {0}, qr = {0};
    DAT_CNO_HANDLE cno;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pairs_up(&p, 16, &q, &qs, &qr) || !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &sb) ||
        !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &rb))
        goto out;
    DAT_OS_WAIT_PROXY_AGENT a = {NULL, close_in_agent};
    if (!EXPECT_RC(dat_cno_create(p.s.ia, a, &cno), DAT_SUCCESS) || !EXPECT_RC(dat_evd_modify_cno(p.s.rcv, cno), DAT_SUCCESS) ||
        !post_recv1(p.se, &rb, 0, 64, 1))
        goto out;
    agent_ia = p.s.ia;
    DAT_LMR_TRIPLET st = lt(&sb, 0, 8);
    if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &st, ck(2), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
        goto out;
    double t0 = dx_now();
    while (atomic_load(&agent_done) == 0 && dx_now() - t0 < 5.0)
        dx_sleep_ms(2);
    if (!EXPECT(atomic_load(&agent_done) != 0, "dat_ia_close in the proxy agent did not return within 5 s"))
        goto hang;
    EXPECT(atomic_load(&agent_done) == 1, "dat_ia_close in the proxy agent failed");
    const char *cma = getenv("DAT2_SOFT_CMA");
    if (dx_on_soft_device() && cma && strcmp(cma, "0") == 0)
        EXPECT(strcmp(agent_thread, "dat2-soft-engin") == 0, "the agent ran on thread \"%s\", not the engine", agent_thread);
    p.s.ia = DAT_HANDLE_NULL;
    rb.h = DAT_HANDLE_NULL;
    /* The other connection is still served. */
    if (!post_recv1(q.se, &qr, 0, 64, 3))
        goto out;
    DAT_LMR_TRIPLET qt = lt(&qs, 0, 8);
    if (EXPECT_RC(dat_ep_post_send(q.ce, 1, &qt, ck(4), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) && WAIT_DTO(q.s.rcv, &d))
        EXPECT(d.status == DAT_DTO_SUCCESS, "the other connection's receive: status %u", (unsigned)d.status);
out:
    mr_drop(&sb);
    mr_drop(&rb);
    mr_drop(&qs);
    mr_drop(&qr);
    pair_down(&q);
    pair_down(&p);
    return;
hang:
    /* Stuck in its close: leave it (the case's process ends). */
    return;
}

/* ---- one connection's large payloads against another's small requests ------------------- */

#define BULK_LEN ((size_t)64 << 20)
#define BULK_SECONDS 3.0
#define PROBES 40
#define PROBE_LIMIT 0.25 /* seconds, as c-tests/hostile/engine.py */

/* The forked writer: connects to `port` and keeps four RDMA writes of BULK_LEN in flight into
 * the window the parent names on `from`, for BULK_SECONDS. */
static int bulk_writer(DAT_CONN_QUAL port, int from)
{
    struct node c;
    DAT_EP_HANDLE ep;
    struct mr m = {0};
    uint64_t win[2];
    DAT_EVENT ev;
    if (read(from, win, sizeof win) != sizeof win || !node_open(&c, PROVIDER, 16, 16) || !ep_make(&c, NULL, &ep) ||
        !mr_make(&c, c.pz, BULK_LEN, PRIV_ALL, &m))
        return 2;
    if (dat_ep_connect(ep, dx_loopback(0), port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG) !=
            DAT_SUCCESS ||
        wait_ev(c.conn, 5000, &ev) != DAT_SUCCESS || ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
        return 3;
    DAT_LMR_TRIPLET l = lt(&m, 0, (DAT_SEG_LENGTH)BULK_LEN);
    DAT_RMR_TRIPLET r = {.rmr_context = (DAT_RMR_CONTEXT)win[1], .virtual_address = win[0], .segment_length = BULK_LEN};
    int inflight = 0;
    double t0 = dx_now();
    while (dx_now() - t0 < BULK_SECONDS || inflight > 0) {
        while (inflight < 4 && dx_now() - t0 < BULK_SECONDS) {
            if (dat_ep_post_rdma_write(ep, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
                return 4;
            inflight++;
        }
        if (wait_ev(c.req, 5000, &ev) != DAT_SUCCESS || ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
            return 5;
        inflight--;
    }
    (void)dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG);
    return 0;
}

/* Another process streams 64 MiB RDMA writes into this one over TCP (the _tcp rerun), as fast
 * as the socket takes them; meanwhile a second connection of this process times 8-byte RDMA
 * reads, each served by the same engine thread. The engine serves a connection a bounded
 * number of frames per turn; a frame's payload must be bounded too, or one peer with a large
 * window holds every other connection of the process for the length of its payloads. */
void case_engine_bulk_write_fair(void)
{
    int pfd[2];
    struct node s;
    struct pair q;
    struct mr win = {0}, qs = {0}, qc = {0};
    DAT_EP_HANDLE se = DAT_HANDLE_NULL;
    DAT_EVENT ev;
    int status = -1;
    memset(&s, 0, sizeof s);
    memset(&q, 0, sizeof q);
    pid_t pid = dx_fork_peer(NULL, pfd);
    if (pid == 0)
        _exit(bulk_writer(dx_port(0), pfd[0]));
    if (pid < 0)
        return;
    if (!node_open(&s, PROVIDER, 16, 16) || !ep_make(&s, NULL, &se) || !node_listen(&s, dx_port(0)) ||
        !mr_make(&s, s.pz, BULK_LEN, PRIV_ALL, &win))
        goto out;
    uint64_t named[2] = {(uint64_t)(uintptr_t)win.buf, (uint64_t)win.rkey};
    if (!EXPECT(write(pfd[1], named, sizeof named) == sizeof named, "pipe write failed") ||
        !EXPECT_RC(wait_ev(s.cr, 10000, &ev), DAT_SUCCESS) ||
        !EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, se, 0, NULL), DAT_SUCCESS) ||
        !wait_established(__LINE__, s.conn, se, "bulk server"))
        goto out;
    if (!pair_up_mrs(&q, dx_port(1), &qc, &qs))
        goto out;
    dx_sleep_ms(300);
    double worst = 0;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    for (int k = 0; k < PROBES; k++) {
        DAT_LMR_TRIPLET l = lt(&qc, 0, 8);
        DAT_RMR_TRIPLET r = rt(&qs, 0, 8);
        double t0 = dx_now();
        if (!EXPECT_RC(dat_ep_post_rdma_read(q.ce, 1, &l, ck(10 + (uint64_t)k), &r, DAT_COMPLETION_DEFAULT_FLAG),
                       DAT_SUCCESS) ||
            !WAIT_DTO(q.c.req, &d))
            break;
        double took = dx_now() - t0;
        worst = took > worst ? took : worst;
        dx_sleep_ms(20);
    }
    harness_verdict_note("slowest 8-byte read %.1f ms", worst * 1e3);
    EXPECT(worst <= PROBE_LIMIT, "an 8-byte read took %.0f ms while another connection streamed 64 MiB writes", worst * 1e3);
out:
    close(pfd[1]);
    if (pid > 0) {
        waitpid(pid, &status, 0);
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer ended with status 0x%x", (unsigned)status);
    }
    mr_drop(&qs);
    mr_drop(&qc);
    pair_down(&q);
    mr_drop(&win);
    node_close(&s);
}

/* ---- a free from the engine's delivery while a verified peer owes an answer -------------- */

static DAT_EP_HANDLE free_ep;
static DAT_LMR_HANDLE free_lmr; /* set: the agent frees this LMR instead of the EP */
static atomic_int free_ms; /* 1 + how long dat_ep_free took in the agent, once it returned */

static void free_in_agent(DAT_PVOID instance, DAT_EVD_HANDLE evd)
{
    (void)instance;
    (void)evd;
    DAT_EP_HANDLE ep = free_ep;
    free_ep = DAT_HANDLE_NULL;
    if (ep == DAT_HANDLE_NULL)
        return;
    double t0 = dx_now();
    DAT_RETURN rc = free_lmr != DAT_HANDLE_NULL ? dat_lmr_free(free_lmr) : dat_ep_free(ep);
    atomic_store(&free_ms, rc == DAT_SUCCESS ? 1 + (int)((dx_now() - t0) * 1e3) : -1);
}

/* The peer: accepts one connection on `port`, names its window (BULK_LEN) on `to`, and serves
 * the connection (its engine does) until it is killed. */
static int copying_peer(DAT_CONN_QUAL port, int to)
{
    struct node s;
    DAT_EP_HANDLE ep;
    struct mr m = {0};
    DAT_EVENT ev;
    if (!node_open(&s, PROVIDER, 16, 16) || !ep_make(&s, NULL, &ep) || !node_listen(&s, port) ||
        !mr_make(&s, s.pz, BULK_LEN, PRIV_ALL, &m))
        return 2;
    uint64_t named[2] = {(uint64_t)(uintptr_t)m.buf, (uint64_t)m.rkey};
    if (write(to, named, sizeof named) != sizeof named || wait_ev(s.cr, 10000, &ev) != DAT_SUCCESS ||
        dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL) != DAT_SUCCESS ||
        wait_ev(s.conn, 5000, &ev) != DAT_SUCCESS || ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
        return 3;
    char ok = 1;
    if (write(to, &ok, 1) != 1)
        return 4;
    for (;;)
        pause();
}

/* A 64 MiB cross-memory-attach RDMA READ is outstanding to a verified peer, which is copying
 * into our sink (a free waits for its answer, up to PEER_WAIT, so that the copy is over when
 * the sink's LMR can be freed). The consumer frees that EP from the proxy agent of another
 * connection's request EVD, run by the engine thread while it delivers that connection's READ
 * completion. The peer's answer comes within milliseconds, but only the engine reads it:
 * waiting there held the free, and every connection of the process, for all of PEER_WAIT
 * (2005 ms measured). */
static void free_in_agent_cma(int lmr)
{
    int pfd[2];
    struct node c;
    struct pair q;
    struct mr sink = {0}, qs = {0}, qc = {0};
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_CNO_HANDLE cno;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    uint64_t win[2];
    char ok = 0;
    memset(&c, 0, sizeof c);
    memset(&q, 0, sizeof q);
    pid_t pid = dx_fork_peer(pfd, NULL);
    if (pid == 0)
        _exit(copying_peer(dx_port(0), pfd[1]));
    if (pid < 0)
        return;
    if (!EXPECT(read(pfd[0], win, sizeof win) == sizeof win, "the peer did not start"))
        goto out;
    if (!node_open(&c, PROVIDER, 16, 16) || !ep_make(&c, NULL, &ep) || !mr_make(&c, c.pz, BULK_LEN, PRIV_ALL, &sink) ||
        !EXPECT_RC(dat_ep_connect(ep, dx_loopback(0), dx_port(0), 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS) ||
        !wait_established(__LINE__, c.conn, ep, "client") || !EXPECT(read(pfd[0], &ok, 1) == 1, "the peer did not connect"))
        goto out;
    if (strcmp(path_of(ep), "cma") != 0) {
        harness_skip("the peer moves a read's data itself only on the soft device's cma path");
        goto out;
    }
    if (!pair_up_mrs(&q, dx_port(1), &qc, &qs))
        goto out;
    DAT_OS_WAIT_PROXY_AGENT a = {NULL, free_in_agent};
    if (!EXPECT_RC(dat_cno_create(q.c.ia, a, &cno), DAT_SUCCESS) || !EXPECT_RC(dat_evd_modify_cno(q.c.req, cno), DAT_SUCCESS))
        goto out;
    DAT_LMR_TRIPLET l = lt(&sink, 0, (DAT_SEG_LENGTH)BULK_LEN);
    DAT_RMR_TRIPLET r = {.rmr_context = (DAT_RMR_CONTEXT)win[1], .virtual_address = win[0], .segment_length = BULK_LEN};
    free_ep = ep;
    free_lmr = lmr ? sink.h : DAT_HANDLE_NULL;
    /* The big read, then at once the small one, whose completion runs the agent. */
    if (!EXPECT_RC(dat_ep_post_rdma_read(ep, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
        goto out;
    DAT_LMR_TRIPLET ql = lt(&qc, 0, 8);
    DAT_RMR_TRIPLET qr = rt(&qs, 0, 8);
    if (!EXPECT_RC(dat_ep_post_rdma_read(q.ce, 1, &ql, ck(2), &qr, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
        !WAIT_DTO(q.c.req, &d))
        goto out;
    double t0 = dx_now();
    while (atomic_load(&free_ms) == 0 && dx_now() - t0 < 15.0)
        dx_sleep_ms(2);
    int ms = atomic_load(&free_ms);
    if (!EXPECT(ms != 0, "dat_ep_free in the proxy agent did not return within 15 s"))
        goto out;
    const char *what = lmr ? "dat_lmr_free" : "dat_ep_free";
    if (lmr)
        sink.h = DAT_HANDLE_NULL;
    else
        ep = DAT_HANDLE_NULL;
    EXPECT(ms > 0, "%s in the proxy agent failed", what);
    harness_verdict_note("%s in the agent took %d ms", what, ms - 1);
    EXPECT(ms - 1 < 500, "%s in the engine's delivery took %d ms, every connection of the process held", what, ms - 1);
    /* It returned once the peer's copy was over: the read completed with its answer. */
    if (WAIT_DTO(c.req, &d))
        EXPECT(d.status == DAT_DTO_SUCCESS, "the big read: status %u, not its answer", (unsigned)d.status);
out:
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    close(pfd[0]);
    mr_drop(&qs);
    mr_drop(&qc);
    pair_down(&q);
    mr_drop(&sink);
    node_close(&c);
}

void case_engine_free_in_agent_cma(void)
{
    free_in_agent_cma(0);
}

/* The same with the sink's LMR freed in the agent: the revoke waits for the read's leases,
 * which only the peer's answer, read by the engine, gives back. */
void case_engine_lmr_free_in_agent_cma(void)
{
    free_in_agent_cma(1);
}
