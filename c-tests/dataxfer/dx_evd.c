/* EVD and CNO cases. */
#include "dx.h"

#include <pthread.h>
#include <stdatomic.h>

#include "dx_cases.h"

static int ia_only(struct node *n)
{
    return node_open(n, PROVIDER, 16, 16);
}

static DAT_EVENT software_event(void *pointer)
{
    DAT_EVENT ev;
    memset(&ev, 0, sizeof ev);
    ev.event_number = DAT_SOFTWARE_EVENT;
    ev.event_data.software_event_data.pointer = pointer;
    return ev;
}

static DAT_COUNT evd_qlen(DAT_EVD_HANDLE evd)
{
    DAT_EVD_PARAM p;
    memset(&p, 0x5a, sizeof p);
    if (!EXPECT_RC(dat_evd_query(evd, DAT_EVD_FIELD_EVD_QLEN, &p), DAT_SUCCESS))
        return -1;
    return p.evd_qlen;
}

/* ---- EVD ------------------------------------------------------------------------ */

void case_evd_qlen(void)
{
    struct node n;
    static const DAT_COUNT lens[] = {1, 2, 7, 100, 1000, 4097};
    if (!ia_only(&n))
        goto out;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        DAT_EVD_HANDLE e;
        if (!EXPECT_RC(dat_evd_create(n.ia, lens[i], DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &e), DAT_SUCCESS))
            continue;
        DAT_COUNT got = evd_qlen(e);
        EXPECT(got == lens[i], "evd_query qlen %d, created with %d", (int)got, (int)lens[i]);
        EXPECT_RC(dat_evd_free(e), DAT_SUCCESS);
    }
out:
    node_close(&n);
}

void case_evd_dequeue_empty(void)
{
    struct node n;
    DAT_EVENT ev;
    if (ia_only(&n)) {
        EXPECT_RC(dat_evd_dequeue(n.req, &ev), RC_QUEUE_EMPTY);
        EXPECT_RC(dat_evd_dequeue(n.rcv, &ev), RC_QUEUE_EMPTY);
        EXPECT_RC(dat_evd_dequeue(n.async, &ev), RC_QUEUE_EMPTY);
    }
    node_close(&n);
}

void case_evd_wait_timeout(void)
{
    struct node n;
    DAT_EVENT ev;
    DAT_COUNT nmore;
    if (ia_only(&n)) {
        double t0 = dx_now();
        EXPECT_RC(dat_evd_wait(n.req, 0, 1, &ev, &nmore), RC_TIMEOUT);
        double t1 = dx_now();
        EXPECT_RC(dat_evd_wait(n.req, 10000, 1, &ev, &nmore), RC_TIMEOUT);
        double t2 = dx_now();
        EXPECT(t1 - t0 < 0.5, "timeout 0 took %.3f s", t1 - t0);
        EXPECT(t2 - t1 >= 0.009 && t2 - t1 < 1.0, "timeout 10000 us took %.3f s", t2 - t1);
    }
    node_close(&n);
}

void case_evd_wait_threshold(void)
{
    struct node n;
    DAT_EVENT ev;
    DAT_COUNT nmore;
    DAT_EVD_HANDLE e;
    if (ia_only(&n) && EXPECT_RC(dat_evd_create(n.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS)) {
        EXPECT_RC(dat_evd_wait(e, 0, 0, &ev, &nmore), RC_ARG3);
        EXPECT_RC(dat_evd_wait(e, 10000, 0, &ev, &nmore), RC_ARG3);
        EXPECT_RC(dat_evd_wait(e, 0, 5, &ev, &nmore), RC_ARG3);
        EXPECT_RC(dat_evd_wait(e, 0, -1, &ev, &nmore), RC_ARG3);
        /* threshold == qlen is legal */
        EXPECT_RC(dat_evd_wait(e, 0, 4, &ev, &nmore), RC_TIMEOUT);
        EXPECT_RC(dat_evd_free(e), DAT_SUCCESS);
    }
    node_close(&n);
}

void case_evd_wait_event_null(void)
{
    struct node n;
    DAT_COUNT nmore;
    if (ia_only(&n)) {
        EXPECT_RC(dat_evd_wait(n.req, 0, 1, NULL, &nmore), RC_ARG4);
        EXPECT_RC(dat_evd_wait(n.req, 10000, 1, NULL, &nmore), RC_ARG4);
    }
    node_close(&n);
}

struct waiter {
    DAT_EVD_HANDLE evd;
    DAT_TIMEOUT timeout;
    DAT_COUNT threshold; /* 0: 1 */
    DAT_RETURN rc;
    DAT_EVENT ev;
    double took;
    atomic_int started, done;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    DAT_COUNT nmore;
    atomic_store(&w->started, 1);
    double t0 = dx_now();
    w->rc = dat_evd_wait(w->evd, w->timeout, w->threshold ? w->threshold : 1, &w->ev, &nmore);
    w->took = dx_now() - t0;
    atomic_store(&w->done, 1);
    return NULL;
}

static int start_waiter(struct waiter *w, pthread_t *t, DAT_EVD_HANDLE evd)
{
    memset(w, 0, sizeof *w);
    w->evd = evd;
    w->timeout = 5000000;
    if (!EXPECT(pthread_create(t, NULL, waiter_main, w) == 0, "pthread_create failed"))
        return 0;
    while (!atomic_load(&w->started))
        dx_sleep_ms(1);
    dx_sleep_ms(150); /* let it block in dat_evd_wait */
    return 1;
}

void case_evd_second_waiter(void)
{
    struct node n;
    DAT_EVD_HANDLE e;
    struct waiter w;
    pthread_t t;
    DAT_EVENT ev;
    DAT_COUNT nmore;
    static int marker;
    if (ia_only(&n) && EXPECT_RC(dat_evd_create(n.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS) &&
        start_waiter(&w, &t, e)) {
        EXPECT_RC(dat_evd_wait(e, 0, 1, &ev, &nmore), RC_STATE_EVD_WAITER);
        EXPECT_RC(dat_evd_wait(e, 10000, 1, &ev, &nmore), RC_STATE_EVD_WAITER);
        ev = software_event(&marker);
        EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
        pthread_join(t, NULL);
        EXPECT_RC(w.rc, DAT_SUCCESS);
        EXPECT(w.ev.event_number == DAT_SOFTWARE_EVENT && w.ev.event_data.software_event_data.pointer == &marker,
               "the first waiter got event 0x%x pointer %p", (unsigned)w.ev.event_number,
               w.ev.event_data.software_event_data.pointer);
        /* once the first waiter is gone, waiting works again */
        EXPECT_RC(dat_evd_wait(e, 0, 1, &ev, &nmore), RC_TIMEOUT);
    }
    node_close(&n);
}

void case_evd_unwaitable(void)
{
    struct node n;
    DAT_EVD_HANDLE e;
    struct waiter w;
    pthread_t t;
    DAT_EVENT ev;
    DAT_COUNT nmore;
    static int marker;
    if (ia_only(&n) && EXPECT_RC(dat_evd_create(n.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS) &&
        start_waiter(&w, &t, e)) {
        EXPECT_RC(dat_evd_set_unwaitable(e), DAT_SUCCESS);
        pthread_join(t, NULL);
        EXPECT_RC(w.rc, RC_STATE_UNWAITABLE);
        EXPECT(w.took < 2.0, "the waiter woke after %.3f s", w.took);
        EXPECT_RC(dat_evd_wait(e, 0, 1, &ev, &nmore), RC_STATE_UNWAITABLE);
        EXPECT_RC(dat_evd_wait(e, 10000, 1, &ev, &nmore), RC_STATE_UNWAITABLE);
        ev = software_event(&marker);
        EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
        EXPECT_RC(dat_evd_wait(e, 10000, 1, &ev, &nmore), RC_STATE_UNWAITABLE);
        EXPECT_RC(dat_evd_clear_unwaitable(e), DAT_SUCCESS);
        EXPECT_RC(dat_evd_wait(e, 10000, 1, &ev, &nmore), DAT_SUCCESS);
        EXPECT(ev.event_data.software_event_data.pointer == &marker, "wrong event after clear_unwaitable");
        EXPECT_RC(dat_evd_wait(e, 10000, 1, &ev, &nmore), RC_TIMEOUT);
    }
    node_close(&n);
}

/* An unwaitable spell that ends before the waiter runs again still ends its wait: the man page
 * (dat_evd_create.3) says set_unwaitable wakes the waiter, which returns UNWAITABLE. A wake-up
 * that only re-reads the current state misses a set/clear pair and sleeps on to the timeout. */
void case_evd_unwaitable_brief(void)
{
    struct node n;
    DAT_EVD_HANDLE e;
    struct waiter w;
    pthread_t t;
    if (ia_only(&n) && EXPECT_RC(dat_evd_create(n.ia, 8, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS) &&
        start_waiter(&w, &t, e)) {
        EXPECT_RC(dat_evd_set_unwaitable(e), DAT_SUCCESS);
        EXPECT_RC(dat_evd_clear_unwaitable(e), DAT_SUCCESS);
        pthread_join(t, NULL);
        EXPECT_RC(w.rc, RC_STATE_UNWAITABLE);
        EXPECT(w.took < 2.0, "the waiter woke after %.3f s", w.took);
    }
    node_close(&n);
}

/* Events already queued answer a wait at once, whatever its timeout (0 too), oldest first,
 * with nmore what is left; a threshold the queue does not reach makes it wait (here: time
 * out, 0 or 10 ms), and takes nothing. Each call counts as a wait (DCNT_EVD_WAIT). */
void case_evd_wait_queued(void)
{
    struct node n;
    DAT_EVD_HANDLE e;
    DAT_EVENT ev, got;
    DAT_COUNT nmore;
    DAT_UINT64 waits = 0;
    static int marker[3];
    if (!ia_only(&n) || !EXPECT_RC(dat_evd_create(n.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS))
        goto out;
    for (int k = 0; k < 3; k++) {
        ev = software_event(&marker[k]);
        EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
    }
    /* threshold 3 of 3 queued, timeout 0: the oldest at once */
    nmore = -1;
    memset(&got, 0, sizeof got);
    if (EXPECT_RC(dat_evd_wait(e, 0, 3, &got, &nmore), DAT_SUCCESS)) {
        EXPECT(got.event_number == DAT_SOFTWARE_EVENT && got.evd_handle == e &&
                   got.event_data.software_event_data.pointer == &marker[0],
               "threshold 3: event 0x%x pointer %p, expected the first", (unsigned)got.event_number,
               got.event_data.software_event_data.pointer);
        EXPECT(nmore == 2, "threshold 3: nmore %d, expected 2", (int)nmore);
    }
    /* 2 queued: threshold 3 is not reached, with or without time to wait; nothing is taken */
    memset(&got, 0x5a, sizeof got);
    EXPECT_RC(dat_evd_wait(e, 0, 3, &got, &nmore), RC_TIMEOUT);
    EXPECT_RC(dat_evd_wait(e, 10000, 3, &got, &nmore), RC_TIMEOUT);
    EXPECT(got.event_number == (DAT_EVENT_NUMBER)0x5a5a5a5a, "a wait that timed out wrote the event");
    /* threshold 2, infinite timeout: the second, at once */
    if (EXPECT_RC(dat_evd_wait(e, DAT_TIMEOUT_INFINITE, 2, &got, &nmore), DAT_SUCCESS)) {
        EXPECT(got.event_data.software_event_data.pointer == &marker[1], "threshold 2: not the second event");
        EXPECT(nmore == 1, "threshold 2: nmore %d, expected 1", (int)nmore);
    }
    /* nmore may be NULL */
    if (EXPECT_RC(dat_evd_wait(e, 10000, 1, &got, NULL), DAT_SUCCESS))
        EXPECT(got.event_data.software_event_data.pointer == &marker[2], "threshold 1: not the third event");
    EXPECT_RC(dat_evd_wait(e, 0, 1, &got, &nmore), RC_TIMEOUT);
    EXPECT(nmore == 0, "nmore %d after the queue emptied, expected 0", (int)nmore);
    if (EXPECT_RC(dat_ib_query_counters(e, DCNT_EVD_WAIT, &waits, 0), DAT_SUCCESS))
        EXPECT(waits == 6, "DCNT_EVD_WAIT %llu, expected 6", (unsigned long long)waits);
    EXPECT_RC(dat_evd_free(e), DAT_SUCCESS);
out:
    node_close(&n);
}

/* A wait short of its threshold times out on time while events keep coming and going: each
 * wakes it (a notification event), none brings the queue to its threshold (another thread
 * takes it back), and the sleeps between them must not carry the wait past its deadline. */
void case_evd_wait_timeout_woken(void)
{
    struct node n;
    DAT_EVD_HANDLE e;
    struct waiter w;
    pthread_t t;
    DAT_EVENT ev, got;
    static int marker;
    unsigned long rounds = 0;
    if (ia_only(&n) && EXPECT_RC(dat_evd_create(n.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS)) {
        memset(&w, 0, sizeof w);
        w.evd = e;
        w.timeout = 300000;
        w.threshold = 2;
        if (EXPECT(pthread_create(&t, NULL, waiter_main, &w) == 0, "pthread_create failed")) {
            while (!atomic_load(&w.started))
                dx_sleep_ms(1);
            double t0 = dx_now();
            ev = software_event(&marker);
            while (!atomic_load(&w.done) && dx_now() - t0 < 3.0) {
                EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
                EXPECT_RC(dat_evd_dequeue(e, &got), DAT_SUCCESS);
                rounds++;
            }
            pthread_join(t, NULL);
            EXPECT_RC(w.rc, RC_TIMEOUT);
            EXPECT(w.took >= 0.29 && w.took < 1.5, "a 300 ms wait woken %lu times took %.3f s", rounds, w.took);
        }
        EXPECT_RC(dat_evd_free(e), DAT_SUCCESS);
    }
    node_close(&n);
}

void case_evd_post_se(void)
{
    struct node n;
    DAT_EVD_HANDLE e;
    DAT_EVENT ev, got;
    static int marker;
    if (ia_only(&n) && EXPECT_RC(dat_evd_create(n.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS)) {
        ev = software_event(&marker);
        EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
        memset(&got, 0, sizeof got);
        if (EXPECT_RC(dat_evd_dequeue(e, &got), DAT_SUCCESS)) {
            EXPECT(got.event_number == DAT_SOFTWARE_EVENT, "event number 0x%x", (unsigned)got.event_number);
            EXPECT(got.evd_handle == e, "evd_handle %p, expected %p", got.evd_handle, e);
            EXPECT(got.event_data.software_event_data.pointer == &marker, "pointer %p, expected %p",
                   got.event_data.software_event_data.pointer, (void *)&marker);
        }
        EXPECT_RC(dat_evd_dequeue(e, &got), RC_QUEUE_EMPTY);
        /* also through a wait */
        EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
        EXPECT_RC(wait_ev(e, 100, &got), DAT_SUCCESS);
        EXPECT(got.event_data.software_event_data.pointer == &marker, "waited event has the wrong pointer");
    }
    node_close(&n);
}

void case_evd_post_se_full(void)
{
    struct node n;
    DAT_EVD_HANDLE e;
    DAT_EVENT ev, got;
    static int marker[3];
    if (ia_only(&n) && EXPECT_RC(dat_evd_create(n.ia, 2, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS)) {
        ev = software_event(&marker[0]);
        EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
        ev = software_event(&marker[1]);
        EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
        ev = software_event(&marker[2]);
        EXPECT_RC(dat_evd_post_se(e, &ev), RC_QUEUE_FULL);
        EXPECT_RC(dat_evd_dequeue(e, &got), DAT_SUCCESS);
        EXPECT(got.event_data.software_event_data.pointer == &marker[0], "first event out is not the first in");
        EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
        EXPECT_RC(dat_evd_dequeue(e, &got), DAT_SUCCESS);
        EXPECT(got.event_data.software_event_data.pointer == &marker[1], "second event out is wrong");
        EXPECT_RC(dat_evd_dequeue(e, &got), DAT_SUCCESS);
        EXPECT(got.event_data.software_event_data.pointer == &marker[2], "third event out is wrong");
        /* the refused post left nothing behind */
        EXPECT_RC(dat_evd_dequeue(e, &got), RC_QUEUE_EMPTY);
    }
    node_close(&n);
}

void case_evd_resize_below(void)
{
    struct node n;
    DAT_EVD_HANDLE e;
    DAT_EVENT ev;
    static int marker;
    if (ia_only(&n) && EXPECT_RC(dat_evd_create(n.ia, 4, DAT_HANDLE_NULL, DAT_EVD_SOFTWARE_FLAG, &e), DAT_SUCCESS)) {
        ev = software_event(&marker);
        for (int i = 0; i < 3; i++)
            EXPECT_RC(dat_evd_post_se(e, &ev), DAT_SUCCESS);
        EXPECT_TYPE(dat_evd_resize(e, 2), RC_STATE);
        EXPECT_TYPE(dat_evd_resize(e, 1), RC_STATE);
        EXPECT(evd_qlen(e) == 4, "a refused resize changed qlen to %d", (int)evd_qlen(e));
        EXPECT_RC(dat_evd_resize(e, 3), DAT_SUCCESS);
        EXPECT(evd_qlen(e) == 3, "qlen %d after resize to 3", (int)evd_qlen(e));
        EXPECT_RC(dat_evd_post_se(e, &ev), RC_QUEUE_FULL);
        EXPECT_RC(dat_evd_resize(e, 10), DAT_SUCCESS);
        EXPECT(evd_qlen(e) == 10, "qlen %d after resize to 10", (int)evd_qlen(e));
        int queued = 0;
        while (dat_evd_dequeue(e, &ev) == DAT_SUCCESS)
            queued++;
        EXPECT(queued == 3, "%d events survived the resizes, expected 3", queued);
    }
    node_close(&n);
}

void case_evd_overflow(void)
{
    struct pair p;
    struct mr sm, cm;
    DAT_EVENT ev;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    memset(&p, 0, sizeof p);
    /* the client's request EVD holds 2 events; 4 sends complete on it */
    if (!node_open(&p.s, PROVIDER, 16, 16) || !node_open(&p.c, PROVIDER, 2, 16) || !ep_make(&p.s, NULL, &p.se) ||
        !ep_make(&p.c, NULL, &p.ce) || !node_listen(&p.s, dx_port(0)) ||
        !connect_eps(&p.s, p.se, &p.c, p.ce, 0))
        goto out;
    if (!mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) || !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    for (int i = 0; i < 4; i++)
        post_recv1(p.se, &sm, (size_t)i * 64, 64, (uint64_t)i);
    for (int i = 0; i < 4; i++) {
        DAT_LMR_TRIPLET t = lt(&cm, (size_t)i * 64, 64);
        EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck(100 + (uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    }
    for (int i = 0; i < 4; i++)
        if (WAIT_DTO(p.s.rcv, &d))
            EXPECT(d.status == DAT_DTO_SUCCESS, "receive %d status %u", i, (unsigned)d.status);
    dx_sleep_ms(100);
    int overflows = 0, other = 0;
    while (wait_ev(p.c.async, overflows ? 200 : 2000, &ev) == DAT_SUCCESS) {
        if (ev.event_number == DAT_ASYNC_ERROR_EVD_OVERFLOW) {
            overflows++;
            EXPECT(ev.event_data.asynch_error_event_data.dat_handle == (DAT_HANDLE)p.c.req,
                   "overflow event names handle %p, expected the request EVD %p",
                   ev.event_data.asynch_error_event_data.dat_handle, (void *)p.c.req);
        } else {
            other++;
        }
    }
    EXPECT(overflows >= 1, "no DAT_ASYNC_ERROR_EVD_OVERFLOW (0x8001) on the IA's async EVD");
    EXPECT(other == 0, "%d other events on the async EVD", other);
    harness_note("overflow events: %d (2 completions did not fit)", overflows);
    /* the two that fit are there, in order */
    int kept = 0;
    while (dat_evd_dequeue(p.c.req, &ev) == DAT_SUCCESS) {
        EXPECT(ev.event_data.dto_completion_event_data.user_cookie.as_64 == 100 + (uint64_t)kept,
               "kept completion %d has cookie %llu", kept,
               (unsigned long long)ev.event_data.dto_completion_event_data.user_cookie.as_64);
        kept++;
    }
    EXPECT(kept == 2, "%d completions queued on a qlen-2 EVD, expected 2", kept);
    mr_drop(&sm);
    mr_drop(&cm);
out:
    pair_down(&p);
}

void case_evd_free_in_use(void)
{
    struct node n;
    DAT_EP_HANDLE ep;
    if (ia_only(&n) && ep_make(&n, NULL, &ep)) {
        EXPECT_RC(dat_evd_free(n.req), RC_STATE_EVD_IN_USE);
        EXPECT_RC(dat_evd_free(n.rcv), RC_STATE_EVD_IN_USE);
        EXPECT_RC(dat_evd_free(n.conn), RC_STATE_EVD_IN_USE);
        EXPECT_RC(dat_ep_free(ep), DAT_SUCCESS);
        EXPECT_RC(dat_evd_free(n.req), DAT_SUCCESS);
        EXPECT_RC(dat_evd_free(n.rcv), DAT_SUCCESS);
        EXPECT_RC(dat_evd_free(n.conn), DAT_SUCCESS);
    }
    node_close(&n);
}

/* ---- CNO ------------------------------------------------------------------------ */

void case_cno_wait_timeout(void)
{
    struct node n;
    DAT_CNO_HANDLE cno;
    DAT_EVD_HANDLE got = DAT_HANDLE_NULL;
    if (ia_only(&n) && EXPECT_RC(dat_cno_create(n.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS)) {
        double t0 = dx_now();
        EXPECT_RC(dat_cno_wait(cno, 0, &got), RC_TIMEOUT);
        double t1 = dx_now();
        EXPECT_RC(dat_cno_wait(cno, 10000, &got), RC_TIMEOUT);
        double t2 = dx_now();
        EXPECT(t1 - t0 < 0.5, "timeout 0 took %.3f s", t1 - t0);
        EXPECT(t2 - t1 >= 0.009 && t2 - t1 < 1.0, "timeout 10000 us took %.3f s", t2 - t1);
        EXPECT_RC(dat_cno_free(cno), DAT_SUCCESS);
    }
    node_close(&n);
}

/* Sends one message from the client so that the server's receive EVD gets a completion. */
static int one_message(struct pair *p, struct mr *sm, struct mr *cm)
{
    if (!mr_make(&p->s, p->s.pz, 4096, PRIV_ALL, sm) || !mr_make(&p->c, p->c.pz, 4096, PRIV_ALL, cm))
        return 0;
    if (!post_recv1(p->se, sm, 0, 4096, 7))
        return 0;
    DAT_LMR_TRIPLET t = lt(cm, 0, 100);
    return EXPECT_RC(dat_ep_post_send(p->ce, 1, &t, ck(8), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
}

void case_cno_trigger(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_CNO_HANDLE cno;
    DAT_EVD_HANDLE got = DAT_HANDLE_NULL;
    DAT_EVD_PARAM ep;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16))
        goto out;
    if (!EXPECT_RC(dat_cno_create(p.s.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_modify_cno(p.s.rcv, cno), DAT_SUCCESS))
        goto out;
    if (EXPECT_RC(dat_evd_query(p.s.rcv, DAT_EVD_FIELD_CNO, &ep), DAT_SUCCESS))
        EXPECT(ep.cno_handle == cno, "evd_query cno %p, expected %p", ep.cno_handle, cno);
    EXPECT_RC(dat_cno_wait(cno, 0, &got), RC_TIMEOUT);
    if (!one_message(&p, &sm, &cm))
        goto out;
    if (EXPECT_RC(dat_cno_wait(cno, 5000000, &got), DAT_SUCCESS))
        EXPECT(got == p.s.rcv, "cno_wait returned EVD %p, expected the receive EVD %p", got, p.s.rcv);
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (WAIT_DTO(p.s.rcv, &d))
        EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == 7, "receive status %u cookie %llu",
               (unsigned)d.status, (unsigned long long)d.user_cookie.as_64);
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

static atomic_int agent_calls;
static void *_Atomic agent_instance;
static void *_Atomic agent_evd;

static void agent(DAT_PVOID instance, DAT_EVD_HANDLE evd)
{
    atomic_store(&agent_instance, instance);
    atomic_store(&agent_evd, (void *)evd);
    atomic_fetch_add(&agent_calls, 1);
}

void case_cno_proxy_agent(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_CNO_HANDLE cno;
    DAT_CNO_PARAM cp;
    static int instance;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16))
        goto out;
    if (!EXPECT_RC(dat_cno_create(p.s.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_modify_cno(p.s.rcv, cno), DAT_SUCCESS))
        goto out;
    DAT_OS_WAIT_PROXY_AGENT a = {&instance, agent};
    if (!EXPECT_RC(dat_cno_modify_agent(cno, a), DAT_SUCCESS))
        goto out;
    memset(&cp, 0, sizeof cp);
    if (EXPECT_RC(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp), DAT_SUCCESS))
        EXPECT(cp.proxy.agent.instance_data == &instance && cp.proxy.agent.proxy_agent_func == agent,
               "cno_query does not return the agent");
    if (!one_message(&p, &sm, &cm))
        goto out;
    double t0 = dx_now();
    while (atomic_load(&agent_calls) == 0 && dx_now() - t0 < 5.0)
        dx_sleep_ms(2);
    if (EXPECT(atomic_load(&agent_calls) >= 1, "the proxy agent was not called within 5 s")) {
        EXPECT(atomic_load(&agent_instance) == (void *)&instance, "agent got instance %p, expected %p",
               atomic_load(&agent_instance), (void *)&instance);
        EXPECT(atomic_load(&agent_evd) == (void *)p.s.rcv, "agent got EVD %p, expected %p", atomic_load(&agent_evd),
               (void *)p.s.rcv);
    }
    DAT_DTO_COMPLETION_EVENT_DATA d;
    WAIT_DTO(p.s.rcv, &d);
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_cno_free_in_use(void)
{
    struct node n;
    DAT_CNO_HANDLE cno;
    DAT_EVD_HANDLE e;
    if (ia_only(&n) && EXPECT_RC(dat_cno_create(n.ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS) &&
        EXPECT_RC(dat_evd_create(n.ia, 8, cno, DAT_EVD_DTO_FLAG, &e), DAT_SUCCESS)) {
        EXPECT_RC(dat_cno_free(cno), RC_STATE_CNO_IN_USE);
        EXPECT_RC(dat_evd_free(e), DAT_SUCCESS);
        /* attached later through modify_cno, detached the same way */
        EXPECT_RC(dat_evd_modify_cno(n.rcv, cno), DAT_SUCCESS);
        EXPECT_RC(dat_cno_free(cno), RC_STATE_CNO_IN_USE);
        EXPECT_RC(dat_evd_modify_cno(n.rcv, DAT_HANDLE_NULL), DAT_SUCCESS);
        EXPECT_RC(dat_cno_free(cno), DAT_SUCCESS);
    }
    node_close(&n);
}
