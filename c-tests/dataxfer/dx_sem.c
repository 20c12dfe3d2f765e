/*
 * Semantics DAT defines beyond moving data: solicited wait on a receive EVD, an EP's soft and
 * hard high watermarks, a connect timeout of 0, and the data path the passive side reports
 * once its connection is established.
 */
#include "dx.h"

#include <pthread.h>
#include <stdlib.h>

#include "dx_cases.h"

#define RC_ARG3_ 0x80060027u
#define RC_STATE_EVD_CONFIG_SOLICITED 0x8007004cu /* 76 */

/* ---- a waiter in a thread of its own ---------------------------------------------- */

struct waiter {
    DAT_EVD_HANDLE evd;
    int ms;
    pthread_t thread;
    volatile int done;
    DAT_RETURN rc;
    DAT_EVENT ev;
    DAT_COUNT nmore;
    double took; /* seconds */
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    double t0 = dx_now();
    w->nmore = -1;
    w->rc = dat_evd_wait(w->evd, (DAT_TIMEOUT)w->ms * 1000u, 1, &w->ev, &w->nmore);
    w->took = dx_now() - t0;
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* Starts a thread blocked in dat_evd_wait(evd, ms, threshold 1) and gives it time to block. */
static int waiter_start(struct waiter *w, DAT_EVD_HANDLE evd, int ms)
{
    memset(w, 0, sizeof *w);
    w->evd = evd;
    w->ms = ms;
    if (!EXPECT(pthread_create(&w->thread, NULL, waiter_main, w) == 0, "pthread_create failed"))
        return 0;
    dx_sleep_ms(100);
    return 1;
}

static int waiter_done(struct waiter *w)
{
    return __atomic_load_n(&w->done, __ATOMIC_SEQ_CST);
}

static void waiter_join(struct waiter *w)
{
    pthread_join(w->thread, NULL);
}

static uint64_t recv_cookie(const DAT_EVENT *ev)
{
    return ev->event_data.dto_completion_event_data.user_cookie.as_64;
}

/* The client sends `len` bytes with `flags` and waits for its own completion (by then the
 * server's receive has completed too: the response follows the receive). */
static int send_and_wait(struct pair *p, const struct mr *m, DAT_SEG_LENGTH len, uint64_t cookie,
                         DAT_COMPLETION_FLAGS flags)
{
    DAT_DTO_COMPLETION_EVENT_DATA d;
    DAT_LMR_TRIPLET t = lt(m, 0, len);
    return EXPECT_RC(dat_ep_post_send(p->ce, 1, &t, ck(cookie), flags), DAT_SUCCESS) && WAIT_DTO(p->c.req, &d);
}

/* ---- solicited wait ------------------------------------------------------------------- */

void case_sem_solicited_wait(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    struct waiter w;
    DAT_EVENT ev;
    DAT_COUNT nmore;
    DAT_EP_ATTR sattr;
    if (!dx_on_soft_device()) {
        /* verbs reports no per-completion "solicited" mark: there every receive wakes a waiter
         * (one wake too many, never one too few; see dat2(7)) */
        harness_skip("solicited-only waking is the soft device's (verbs completions carry no solicited mark)");
        return;
    }
    attr_init(&sattr);
    /* the server's receive stream: waiters wake for solicited receives only */
    sattr.recv_completion_flags = DAT_COMPLETION_SOLICITED_WAIT_FLAG;
    if (!pair_up(&p, dx_port(0), &sattr, NULL, 16) || !mr_make(&p.s, p.s.pz, 8192, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 8192, PRIV_ALL, &cm))
        goto out;
    for (int i = 0; i < 6; i++)
        post_recv1(p.se, &sm, (size_t)i * 512, 512, 1 + (uint64_t)i);

    /* a solicited-wait stream feeds the EVD: only threshold 1 is allowed */
    EXPECT_RC(dat_evd_wait(p.s.rcv, 1000, 2, &ev, &nmore), RC_STATE_EVD_CONFIG_SOLICITED);

    /* 1: an unsolicited receive does not wake a blocked waiter; a solicited one does, and the
     * waiter then gets the oldest event (the unsolicited receive), with the other still queued */
    if (waiter_start(&w, p.s.rcv, 5000)) {
        send_and_wait(&p, &cm, 100, 11, DAT_COMPLETION_DEFAULT_FLAG);
        dx_sleep_ms(300);
        EXPECT(!waiter_done(&w), "an unsolicited receive woke the waiter (dat_evd_wait returned 0x%08x)",
               (unsigned)w.rc);
        double t0 = dx_now();
        send_and_wait(&p, &cm, 100, 12, DAT_COMPLETION_SOLICITED_WAIT_FLAG);
        waiter_join(&w);
        if (EXPECT_RC(w.rc, DAT_SUCCESS)) {
            EXPECT(w.ev.event_number == DAT_DTO_COMPLETION_EVENT, "event 0x%x", (unsigned)w.ev.event_number);
            EXPECT(recv_cookie(&w.ev) == 1, "the waiter got receive %llu, expected 1 (the oldest)",
                   (unsigned long long)recv_cookie(&w.ev));
            EXPECT(w.nmore == 1, "nmore %d, expected 1 (the solicited receive)", (int)w.nmore);
            EXPECT(w.took > 0.3, "the waiter returned after %.3f s, before the solicited send", w.took);
            EXPECT(dx_now() - t0 < 2.0, "the solicited receive took %.3f s to wake the waiter", dx_now() - t0);
        }
        if (EXPECT_RC(dat_evd_dequeue(p.s.rcv, &ev), DAT_SUCCESS))
            EXPECT(recv_cookie(&ev) == 2, "dequeued receive %llu, expected 2", (unsigned long long)recv_cookie(&ev));
    }

    /* 2: a blocked waiter that only sees unsolicited receives times out, and the receive stays
     * queued (nmore counts it) */
    if (waiter_start(&w, p.s.rcv, 700)) {
        send_and_wait(&p, &cm, 100, 13, DAT_COMPLETION_DEFAULT_FLAG);
        waiter_join(&w);
        EXPECT_RC(w.rc, RC_TIMEOUT);
        EXPECT(w.nmore == 1, "nmore %d after the timeout, expected 1", (int)w.nmore);
        if (EXPECT_RC(dat_evd_dequeue(p.s.rcv, &ev), DAT_SUCCESS))
            EXPECT(recv_cookie(&ev) == 3, "dequeued receive %llu, expected 3", (unsigned long long)recv_cookie(&ev));
    }

    /* 3: an event already queued when the wait starts is returned at once */
    send_and_wait(&p, &cm, 100, 14, DAT_COMPLETION_DEFAULT_FLAG);
    dx_sleep_ms(50);
    if (EXPECT_RC(dat_evd_wait(p.s.rcv, 0, 1, &ev, &nmore), DAT_SUCCESS))
        EXPECT(recv_cookie(&ev) == 4, "waited receive %llu, expected 4", (unsigned long long)recv_cookie(&ev));

    /* 4: the client's receive stream has the default configuration: unsolicited receives wake */
    post_recv1(p.ce, &cm, 4096, 512, 21);
    if (waiter_start(&w, p.c.rcv, 5000)) {
        DAT_DTO_COMPLETION_EVENT_DATA d;
        DAT_LMR_TRIPLET t = lt(&sm, 4096, 64);
        EXPECT_RC(dat_ep_post_send(p.se, 1, &t, ck(31), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        WAIT_DTO(p.s.req, &d);
        waiter_join(&w);
        if (EXPECT_RC(w.rc, DAT_SUCCESS))
            EXPECT(recv_cookie(&w.ev) == 21 && w.took < 2.0, "client receive %llu after %.3f s",
                   (unsigned long long)recv_cookie(&w.ev), w.took);
    }

    /* 5: a failed receive notifies too: 600 bytes into a 512-byte receive end with
     * DAT_DTO_ERR_LOCAL_LENGTH, which wakes the waiter (and breaks the connection) */
    if (waiter_start(&w, p.s.rcv, 5000)) {
        DAT_LMR_TRIPLET t = lt(&cm, 0, 600);
        EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck(15), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
        waiter_join(&w);
        if (EXPECT_RC(w.rc, DAT_SUCCESS)) {
            EXPECT(recv_cookie(&w.ev) == 5, "the waiter got receive %llu, expected 5", (unsigned long long)recv_cookie(&w.ev));
            EXPECT(w.ev.event_data.dto_completion_event_data.status == DAT_DTO_ERR_LOCAL_LENGTH,
                   "status %u, expected DAT_DTO_ERR_LOCAL_LENGTH", (unsigned)w.ev.event_data.dto_completion_event_data.status);
            EXPECT(w.took < 2.0, "the failed receive took %.3f s to wake the waiter", w.took);
        }
    }
out:
    pair_down(&p);
    mr_drop(&sm);
    mr_drop(&cm);
}

/* ---- EP high watermarks ------------------------------------------------------------- */

/* The next async event is the soft high watermark event of `ep`. */
static void expect_soft_hw_at(int line, DAT_EVD_HANDLE async, DAT_EP_HANDLE ep, const char *when)
{
    DAT_EVENT ev;
    DAT_RETURN rc = wait_ev(async, 2000, &ev);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "%s: no async event (dat_evd_wait 0x%08x)", when, (unsigned)rc);
        return;
    }
    /* DAT gives the watermark events no number of their own: the general asynchronous one,
     * with the EP and the reason DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT (2) */
    if (ev.event_number != DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR ||
        ev.event_data.asynch_error_event_data.dat_handle != (DAT_HANDLE)ep ||
        ev.event_data.asynch_error_event_data.reason != DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT)
        harness_fail(line, "%s: event 0x%x handle %p reason %d, expected 0x8005 for EP %p with reason 2", when,
                (unsigned)ev.event_number, ev.event_data.asynch_error_event_data.dat_handle,
                (int)ev.event_data.asynch_error_event_data.reason, (void *)ep);
}
#define EXPECT_SOFT_HW(async, ep, when) expect_soft_hw_at(__LINE__, async, ep, when)

void case_sem_ep_watermark(void)
{
    struct pair p;
    struct mr sm = {0};
    DAT_EVENT ev;
    DAT_EP_STATE state;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 8192, PRIV_ALL, &sm))
        goto out;
    /* below DAT_WATERMARK_INFINITE (-1) is invalid: soft is the 2nd argument, hard the 3rd */
    EXPECT_RC(dat_ep_set_watermark(p.se, -2, 4), RC_ARG2);
    EXPECT_RC(dat_ep_set_watermark(p.se, 2, -2), RC_ARG3_);

    EXPECT_RC(dat_ep_set_watermark(p.se, 2, 4), DAT_SUCCESS);
    post_recv1(p.se, &sm, 0, 256, 1);
    post_recv1(p.se, &sm, 256, 256, 2);
    dx_sleep_ms(50);
    EXPECT_EMPTY(p.s.async, "async EVD with 2 receives held (soft watermark 2)");
    /* the third receive is above the soft watermark: one event */
    post_recv1(p.se, &sm, 512, 256, 3);
    EXPECT_SOFT_HW(p.s.async, p.se, "3 receives held, soft watermark 2");
    /* once per setting */
    post_recv1(p.se, &sm, 768, 256, 4);
    dx_sleep_ms(50);
    EXPECT_EMPTY(p.s.async, "async EVD after a second receive above the soft watermark");
    /* setting it again re-arms it, and the call itself reports a count already above it */
    EXPECT_RC(dat_ep_set_watermark(p.se, 1, 4), DAT_SUCCESS);
    EXPECT_SOFT_HW(p.s.async, p.se, "dat_ep_set_watermark(1) with 4 receives held");
    /* the connection is still up: 4 receives are not above the hard watermark 4 */
    if (EXPECT_RC(dat_ep_get_status(p.se, &state, NULL, NULL), DAT_SUCCESS))
        EXPECT(state == DAT_EP_STATE_CONNECTED, "EP state %d with 4 receives held (hard watermark 4)", (int)state);
    EXPECT_EMPTY(p.s.conn, "connection EVD with 4 receives held (hard watermark 4)");
    /* the fifth is above the hard watermark: the connection breaks and the receives flush */
    post_recv1(p.se, &sm, 1024, 256, 5);
    DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, p.s.conn, WAIT_MS, &ev);
    EXPECT(num == DAT_CONNECTION_EVENT_BROKEN, "connection event 0x%x above the hard watermark, expected BROKEN 0x4006",
           (unsigned)num);
    if (EXPECT_RC(dat_ep_get_status(p.se, &state, NULL, NULL), DAT_SUCCESS))
        EXPECT(state == DAT_EP_STATE_DISCONNECTED, "EP state %d after the hard watermark, expected 11", (int)state);
    for (int i = 0; i < 5; i++) {
        DAT_DTO_COMPLETION_EVENT_DATA d;
        if (WAIT_DTO(p.s.rcv, &d))
            EXPECT(d.status == DAT_DTO_ERR_FLUSHED && d.user_cookie.as_64 == 1 + (uint64_t)i,
                   "receive %d: status %u cookie %llu, expected flushed %d", i, (unsigned)d.status,
                   (unsigned long long)d.user_cookie.as_64, 1 + i);
    }
    EXPECT_CONN_END(p.c.conn, 2000, "client");
    dx_sleep_ms(50);
    EXPECT_EMPTY(p.s.async, "async EVD after the hard watermark");
    EXPECT_EMPTY(p.s.conn, "connection EVD after BROKEN");

    /* the hard watermark also applies when a connection is established with too many
     * receives posted beforehand: ESTABLISHED, then BROKEN */
    {
        DAT_EP_HANDLE se2, ce2;
        if (ep_make(&p.s, NULL, &se2) && ep_make(&p.c, NULL, &ce2) &&
            EXPECT_RC(dat_ep_set_watermark(se2, DAT_WATERMARK_INFINITE, 1), DAT_SUCCESS)) {
            post_recv1(se2, &sm, 2048, 256, 7);
            post_recv1(se2, &sm, 2304, 256, 8);
            if (connect_eps(&p.s, se2, &p.c, ce2, 0)) {
                num = wait_conn_at(__LINE__, p.s.conn, WAIT_MS, &ev);
                EXPECT(num == DAT_CONNECTION_EVENT_BROKEN, "connection event 0x%x after ESTABLISHED with 2 receives "
                       "above hard watermark 1, expected BROKEN", (unsigned)num);
            }
            EXPECT_EMPTY(p.s.async, "async EVD with the soft watermark infinite");
        }
    }
out:
    pair_down(&p);
    mr_drop(&sm);
}

/* ---- connect timeout 0 -------------------------------------------------------------- */

void case_sem_connect_timeout_zero(void)
{
    struct node s, c;
    DAT_EP_HANDLE se, ce, ce2;
    DAT_EP_STATE state;
    DAT_EVENT ev;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) || !ep_make(&s, NULL, &se) ||
        !ep_make(&c, NULL, &ce) || !ep_make(&c, NULL, &ce2) || !node_listen(&s, dx_port(0)))
        goto out;
    /* no connection in no time: refused at once, the timeout being the 4th argument */
    EXPECT_RC(dat_ep_connect(ce, dx_loopback(0), s.port, 0, 0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              RC_ARG4);
    if (EXPECT_RC(dat_ep_get_status(ce, &state, NULL, NULL), DAT_SUCCESS))
        EXPECT(state == DAT_EP_STATE_UNCONNECTED, "EP state %d after the refused connect, expected 0", (int)state);
    dx_sleep_ms(100);
    EXPECT_EMPTY(c.conn, "client connection EVD after the refused connect");
    EXPECT_EMPTY(s.cr, "server CR EVD after the refused connect");
    /* the EP is still usable */
    if (!connect_eps(&s, se, &c, ce, 0))
        goto out;
    /* dat_ep_dup_connect: the timeout is the 3rd argument */
    EXPECT_RC(dat_ep_dup_connect(ce2, ce, 0, 0, NULL, DAT_QOS_BEST_EFFORT), RC_ARG3_);
    if (EXPECT_RC(dat_ep_get_status(ce2, &state, NULL, NULL), DAT_SUCCESS))
        EXPECT(state == DAT_EP_STATE_UNCONNECTED, "EP state %d after the refused dup_connect, expected 0", (int)state);
    dx_sleep_ms(100);
    EXPECT_RC(dat_evd_dequeue(s.cr, &ev), RC_QUEUE_EMPTY);
    /* the smallest timeout there is, 1 us, is accepted (and the outcome is an event) */
    if (EXPECT_RC(dat_ep_dup_connect(ce2, ce, 1, 0, NULL, DAT_QOS_BEST_EFFORT), DAT_SUCCESS)) {
        /* answer a request if one arrives, so the client's EP ends either way */
        if (wait_ev(s.cr, 1000, &ev) == DAT_SUCCESS && ev.event_number == DAT_CONNECTION_REQUEST_EVENT)
            dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL);
        DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, c.conn, WAIT_MS, &ev);
        EXPECT(num == DAT_CONNECTION_EVENT_TIMED_OUT || num == DAT_CONNECTION_EVENT_PEER_REJECTED ||
                   num == DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
               "event 0x%x after a 1 us connect", (unsigned)num);
    }
out:
    node_close(&c);
    node_close(&s);
}

/* ---- the passive side's data path ---------------------------------------------------- */

const char *path_of(DAT_EP_HANDLE ep)
{
    DAT_EP_PARAM param;
    memset(&param, 0, sizeof param);
    if (!EXPECT_RC(dat_ep_query(ep, DAT_EP_FIELD_EP_ATTR_ALL, &param), DAT_SUCCESS))
        return "?";
    for (DAT_COUNT i = 0; i < param.ep_attr.ep_provider_specific_count; i++)
        if (strcmp(param.ep_attr.ep_provider_specific[i].name, "DAT2_SOFT_PATH") == 0)
            return param.ep_attr.ep_provider_specific[i].value;
    return "(missing)";
}

void case_sem_passive_path(void)
{
    /* both nodes are in this process, which reaches its own memory: cross-memory attach,
     * unless the IA says it is off (DAT2_SOFT_CMA=0 in the _tcp run; a process of the
     * overflow uid) */
    const char *want = "cma";
    struct node s, c;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!dx_on_soft_device()) {
        harness_skip("DAT2_SOFT_PATH concerns the soft device only");
        return;
    }
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) || !node_listen(&s, dx_port(0)))
        goto out;
    if (!dx_cma_on(s.ia))
        want = "tcp";
    for (int k = 0; k < 5; k++) {
        DAT_EP_HANDLE se, ce;
        DAT_EVENT ev;
        if (!ep_make(&s, NULL, &se) || !ep_make(&c, NULL, &ce))
            break;
        if (!EXPECT_RC(dat_ep_connect(ce, dx_loopback(0), s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                      DAT_CONNECT_DEFAULT_FLAG),
                       DAT_SUCCESS) ||
            !EXPECT_RC(wait_ev(s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
            !EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, se, 0, NULL), DAT_SUCCESS))
            break;
        /* the moment the passive side reports ESTABLISHED, its path is final */
        if (wait_conn_at(__LINE__, s.conn, WAIT_MS, &ev) != DAT_CONNECTION_EVENT_ESTABLISHED)
            break;
        const char *passive = path_of(se);
        if (wait_conn_at(__LINE__, c.conn, WAIT_MS, &ev) != DAT_CONNECTION_EVENT_ESTABLISHED)
            break;
        const char *active = path_of(ce);
        EXPECT(strcmp(passive, want) == 0, "connection %d: the passive side reports DAT2_SOFT_PATH=%s at ESTABLISHED, "
               "expected %s", k, passive, want);
        EXPECT(strcmp(active, want) == 0, "connection %d: the active side reports DAT2_SOFT_PATH=%s, expected %s", k,
               active, want);
        EXPECT(strcmp(path_of(se), passive) == 0, "connection %d: the passive side's path changed after ESTABLISHED", k);
        dat_ep_disconnect(ce, DAT_CLOSE_ABRUPT_FLAG);
        EXPECT_CONN_END(c.conn, 2000, "client");
        EXPECT_CONN_END(s.conn, 2000, "server");
        EXPECT(strcmp(path_of(se), "none") == 0, "connection %d: DAT2_SOFT_PATH=%s after the end, expected none", k,
               path_of(se));
    }
out:
    node_close(&c);
    node_close(&s);
}
