/* SRQ cases, concurrent posting from four threads, and IPv6 on ::1. */
#include "dx.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dx_cases.h"

/* ---- SRQ ------------------------------------------------------------------------- */

static int srq_make(struct node *n, DAT_COUNT max, DAT_COUNT iov, DAT_COUNT lw, DAT_SRQ_HANDLE *srq)
{
    DAT_SRQ_ATTR a;
    a.max_recv_dtos = max;
    a.max_recv_iov = iov;
    a.low_watermark = lw;
    return EXPECT_RC(dat_srq_create(n->ia, n->pz, &a, srq), DAT_SUCCESS);
}

static int srq_post(DAT_SRQ_HANDLE srq, const struct mr *m, size_t off, DAT_SEG_LENGTH len, uint64_t cookie)
{
    DAT_LMR_TRIPLET t = lt(m, off, len);
    return EXPECT_RC(dat_srq_post_recv(srq, 1, &t, ck(cookie)), DAT_SUCCESS);
}

/* Checks the SRQ's available and outstanding counts. */
static void srq_counts_at(int line, DAT_SRQ_HANDLE srq, DAT_COUNT available, DAT_COUNT outstanding)
{
    DAT_SRQ_PARAM sp;
    memset(&sp, 0x5a, sizeof sp);
    if (!harness_expect_code(line, "dat_srq_query",
                      dat_srq_query(srq, DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT | DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT, &sp),
                      DAT_SUCCESS))
        return;
    if (sp.available_dto_count != available || sp.outstanding_dto_count != outstanding)
        harness_fail(line, "SRQ counts: available %d outstanding %d, expected %d and %d", (int)sp.available_dto_count,
                (int)sp.outstanding_dto_count, (int)available, (int)outstanding);
}
#define SRQ_COUNTS(srq, a, o) srq_counts_at(__LINE__, srq, a, o)

/* A receive posted to an SRQ must name live LMRs of the SRQ's PZ: with no EP to complete it
 * on, one that names a freed LMR's context is refused at once with DAT_PROTECTION_VIOLATION,
 * even while another LMR over the same memory is alive (a device that shares or caches
 * registrations keeps the memory registered then), and nothing is queued. */
void case_srq_stale_key(void)
{
    struct node n;
    struct mr m = {0}, alias = {0};
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN rlen = 0;
    DAT_VADDR raddr = 0;
    const DAT_MEM_PRIV_FLAGS local = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG;
    if (!node_open(&n, PROVIDER, 16, 16) || !mr_make(&n, n.pz, 4096, local, &m) || !srq_make(&n, 16, 2, 0, &srq))
        goto out;
    /* the control: the LMR's own context, while it is alive */
    if (!srq_post(srq, &m, 0, 256, 1))
        goto out;
    memset(&r, 0, sizeof r);
    r.for_va = m.buf;
    alias = m;
    alias.buf = NULL; /* m's buffer: mr_drop(&alias) frees only the LMR */
    if (!EXPECT_RC(dat_lmr_create(n.ia, DAT_MEM_TYPE_VIRTUAL, r, m.len, n.pz, local, DAT_VA_TYPE_VA, &alias.h,
                                  &alias.lkey, &alias.rkey, &rlen, &raddr),
                   DAT_SUCCESS))
        goto out;
    DAT_LMR_CONTEXT dead = m.lkey;
    if (!EXPECT_RC(dat_lmr_free(m.h), DAT_SUCCESS))
        goto out;
    m.h = DAT_HANDLE_NULL;
    DAT_LMR_TRIPLET t = lt(&m, 256, 256);
    t.lmr_context = dead;
    if (dead == alias.lkey) {
        /* the device gave both LMRs one context: a post with it names the live one */
        harness_note("both LMRs have the context 0x%x: the post names the live alias", (unsigned)dead);
        EXPECT_RC(dat_srq_post_recv(srq, 1, &t, ck(2)), DAT_SUCCESS);
        SRQ_COUNTS(srq, 2, 2);
    } else {
        EXPECT_RC(dat_srq_post_recv(srq, 1, &t, ck(2)), DAT_CLASS_ERROR | DAT_PROTECTION_VIOLATION);
        /* a vector whose second segment is the dead one is refused whole */
        DAT_LMR_TRIPLET two[2] = {lt(&alias, 512, 64), t};
        EXPECT_RC(dat_srq_post_recv(srq, 2, two, ck(3)), DAT_CLASS_ERROR | DAT_PROTECTION_VIOLATION);
        SRQ_COUNTS(srq, 1, 1);
    }
    /* the live alias's context still posts */
    if (srq_post(srq, &alias, 1024, 256, 4))
        SRQ_COUNTS(srq, dead == alias.lkey ? 3 : 2, dead == alias.lkey ? 3 : 2);
out:
    if (srq != DAT_HANDLE_NULL)
        EXPECT_RC(dat_srq_free(srq), DAT_SUCCESS);
    if (alias.h != DAT_HANDLE_NULL)
        (void)dat_lmr_free(alias.h);
    mr_drop(&m);
    node_close(&n);
}

void case_srq_create_post_query(void)
{
    struct node n;
    struct mr m = {0};
    DAT_SRQ_HANDLE srq;
    DAT_SRQ_PARAM sp;
    if (!node_open(&n, PROVIDER, 16, 16) || !mr_make(&n, n.pz, 4096, PRIV_ALL, &m) || !srq_make(&n, 16, 2, 0, &srq))
        goto out;
    SRQ_COUNTS(srq, 0, 0);
    for (int i = 0; i < 5; i++)
        srq_post(srq, &m, (size_t)i * 256, 256, 1 + (uint64_t)i);
    memset(&sp, 0x5a, sizeof sp);
    if (EXPECT_RC(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &sp), DAT_SUCCESS)) {
        EXPECT(sp.ia_handle == n.ia, "ia_handle %p, expected %p", sp.ia_handle, n.ia);
        EXPECT(sp.pz_handle == n.pz, "pz_handle %p, expected %p", sp.pz_handle, n.pz);
        EXPECT(sp.max_recv_dtos == 16 && sp.max_recv_iov == 2 && sp.low_watermark == 0,
               "attributes %d/%d/%d, expected 16/2/0", (int)sp.max_recv_dtos, (int)sp.max_recv_iov,
               (int)sp.low_watermark);
        EXPECT(sp.srq_state == DAT_SRQ_STATE_OPERATIONAL, "state %d", (int)sp.srq_state);
        EXPECT(sp.available_dto_count == 5, "available_dto_count %d after 5 posts", (int)sp.available_dto_count);
        EXPECT(sp.outstanding_dto_count == 5, "outstanding_dto_count %d after 5 posts (none completed)",
               (int)sp.outstanding_dto_count);
    }
    /* too many segments for max_recv_iov 2; count is the 2nd argument */
    DAT_LMR_TRIPLET t3[3] = {lt(&m, 0, 8), lt(&m, 8, 8), lt(&m, 16, 8)};
    EXPECT_RC(dat_srq_post_recv(srq, 3, t3, ck(9)), RC_ARG2);
    SRQ_COUNTS(srq, 5, 5);
    EXPECT_RC(dat_srq_free(srq), DAT_SUCCESS);
out:
    mr_drop(&m);
    node_close(&n);
}

/* A server whose EPs receive from one SRQ, and a client with an EP connected to each. */
struct srq_rig {
    struct node s, c;
    DAT_SRQ_HANDLE srq;
    DAT_EP_HANDLE se[2], ce[2];
    struct mr sm, cm;
};

static int srq_rig_up(struct srq_rig *r, int eps, DAT_COUNT lw)
{
    memset(r, 0, sizeof *r);
    if (!node_open(&r->s, PROVIDER, 16, 16) || !node_open(&r->c, PROVIDER, 16, 16) ||
        !srq_make(&r->s, 16, 2, lw, &r->srq) || !mr_make(&r->s, r->s.pz, 8192, PRIV_ALL, &r->sm) ||
        !mr_make(&r->c, r->c.pz, 8192, PRIV_ALL, &r->cm) || !node_listen(&r->s, dx_port(0)))
        return 0;
    for (int i = 0; i < eps; i++)
        if (!EXPECT_RC(dat_ep_create_with_srq(r->s.ia, r->s.pz, r->s.rcv, r->s.req, r->s.conn, r->srq, NULL, &r->se[i]),
                       DAT_SUCCESS) ||
            !ep_make(&r->c, NULL, &r->ce[i]) || !connect_eps(&r->s, r->se[i], &r->c, r->ce[i], 0))
            return 0;
    return 1;
}

static void srq_rig_down(struct srq_rig *r)
{
    node_close(&r->c);
    node_close(&r->s);
    mr_drop(&r->sm);
    mr_drop(&r->cm);
}

/* The client's EP `i` sends `text`; returns the server's receive completion. */
static int srq_send(struct srq_rig *r, int i, const char *text, DAT_DTO_COMPLETION_EVENT_DATA *d)
{
    size_t len = strlen(text) + 1;
    memcpy(r->cm.buf + i * 1024, text, len);
    DAT_LMR_TRIPLET t = lt(&r->cm, (size_t)i * 1024, (DAT_SEG_LENGTH)len);
    DAT_DTO_COMPLETION_EVENT_DATA sd;
    return EXPECT_RC(dat_ep_post_send(r->ce[i], 1, &t, ck(50), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
           WAIT_DTO(r->c.req, &sd) && WAIT_DTO(r->s.rcv, d);
}

void case_srq_ep_receive(void)
{
    struct srq_rig r;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    DAT_EP_PARAM ep;
    if (!srq_rig_up(&r, 2, 0))
        goto out;
    if (EXPECT_RC(dat_ep_query(r.se[1], DAT_EP_FIELD_SRQ_HANDLE, &ep), DAT_SUCCESS))
        EXPECT(ep.srq_handle == r.srq, "ep_query srq_handle %p, expected %p", ep.srq_handle, r.srq);
    for (int i = 0; i < 5; i++)
        srq_post(r.srq, &r.sm, (size_t)i * 256, 256, 1 + (uint64_t)i);
    SRQ_COUNTS(r.srq, 5, 5);
    static const char *msg[2] = {"the first message, from EP A", "the second message, from EP B"};
    for (int i = 0; i < 2; i++) {
        if (!srq_send(&r, i, msg[i], &d))
            continue;
        EXPECT(d.status == DAT_DTO_SUCCESS, "receive %d status %u", i, (unsigned)d.status);
        EXPECT(d.ep_handle == r.se[i], "receive %d reported for EP %p, expected %p", i, d.ep_handle, r.se[i]);
        /* the SRQ's receives are used in the order posted */
        EXPECT(d.user_cookie.as_64 == 1 + (uint64_t)i, "receive %d used the SRQ buffer with cookie %llu, expected %d", i,
               (unsigned long long)d.user_cookie.as_64, 1 + i);
        EXPECT(d.transfered_length == strlen(msg[i]) + 1, "receive %d length %u", i, (unsigned)d.transfered_length);
        EXPECT(strcmp((const char *)r.sm.buf + i * 256, msg[i]) == 0, "receive %d data differ", i);
    }
    SRQ_COUNTS(r.srq, 3, 3);
    /* an EP on an SRQ takes no receives of its own */
    DAT_LMR_TRIPLET t = lt(&r.sm, 4096, 64);
    DAT_RETURN rc = dat_ep_post_recv(r.se[0], 1, &t, ck(99), DAT_COMPLETION_DEFAULT_FLAG);
    EXPECT(rc != DAT_SUCCESS, "dat_ep_post_recv on an EP created with an SRQ succeeded");
out:
    srq_rig_down(&r);
}

void case_srq_low_watermark(void)
{
    struct srq_rig r;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    DAT_EVENT ev;
    if (!srq_rig_up(&r, 1, 0))
        goto out;
    for (int i = 0; i < 5; i++)
        srq_post(r.srq, &r.sm, (size_t)i * 256, 256, 1 + (uint64_t)i);
    if (!EXPECT_RC(dat_srq_set_lw(r.srq, 3), DAT_SUCCESS))
        goto out;
    DAT_SRQ_PARAM sp;
    if (EXPECT_RC(dat_srq_query(r.srq, DAT_SRQ_FIELD_LOW_WATERMARK, &sp), DAT_SUCCESS))
        EXPECT(sp.low_watermark == 3, "low_watermark %d after set_lw(3)", (int)sp.low_watermark);
    /* 5 -> 4 -> 3 posted receives: not below the watermark yet */
    for (int i = 0; i < 2; i++)
        if (srq_send(&r, 0, "below?", &d))
            EXPECT(d.status == DAT_DTO_SUCCESS, "receive %d status %u", i, (unsigned)d.status);
    dx_sleep_ms(50);
    EXPECT_EMPTY(r.s.async, "async EVD with 3 receives left (watermark 3)");
    /* 3 -> 2: below it */
    if (srq_send(&r, 0, "below!", &d))
        EXPECT(d.status == DAT_DTO_SUCCESS, "third receive status %u", (unsigned)d.status);
    if (EXPECT_RC(wait_ev(r.s.async, 2000, &ev), DAT_SUCCESS)) {
        /* DAT defines no event number for the low watermark, only the SRQ reason
         * DAT_SRQ_LOW_WATERMARK_EVENT: the general asynchronous number carries it, naming the SRQ */
        EXPECT(ev.event_number == DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR,
               "watermark event number 0x%x, expected DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR 0x8005",
               (unsigned)ev.event_number);
        EXPECT(ev.event_data.asynch_error_event_data.dat_handle == (DAT_HANDLE)r.srq, "event names %p, expected the SRQ %p",
               ev.event_data.asynch_error_event_data.dat_handle, (void *)r.srq);
        EXPECT(ev.event_data.asynch_error_event_data.reason == DAT_SRQ_LOW_WATERMARK_EVENT,
               "reason %d, expected DAT_SRQ_LOW_WATERMARK_EVENT (2)", (int)ev.event_data.asynch_error_event_data.reason);
    }
    /* the watermark fires once; it is armed again by another set_lw */
    if (srq_send(&r, 0, "again", &d))
        EXPECT(d.status == DAT_DTO_SUCCESS, "fourth receive status %u", (unsigned)d.status);
    dx_sleep_ms(50);
    EXPECT_EMPTY(r.s.async, "async EVD after a second receive below the watermark");
out:
    srq_rig_down(&r);
}

/* The high watermarks of an EP on an SRQ count the buffer it takes from the SRQ for each
 * message: a soft watermark of 0 reports the first message (once), a hard one of 0 breaks
 * the connection at the next. */
void case_srq_ep_high_watermark(void)
{
    struct srq_rig r;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    DAT_EVENT ev;
    if (!srq_rig_up(&r, 1, 0))
        goto out;
    for (int i = 0; i < 6; i++)
        srq_post(r.srq, &r.sm, (size_t)i * 256, 256, 1 + (uint64_t)i);
    /* nothing is held before a message arrives */
    if (!EXPECT_RC(dat_ep_set_watermark(r.se[0], 0, DAT_WATERMARK_INFINITE), DAT_SUCCESS))
        goto out;
    dx_sleep_ms(50);
    EXPECT_EMPTY(r.s.async, "async EVD after setting soft watermark 0 with nothing held");
    if (srq_send(&r, 0, "one", &d))
        EXPECT(d.status == DAT_DTO_SUCCESS, "first receive status %u", (unsigned)d.status);
    if (EXPECT_RC(wait_ev(r.s.async, 2000, &ev), DAT_SUCCESS)) {
        EXPECT(ev.event_number == DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, "soft watermark event number 0x%x",
               (unsigned)ev.event_number);
        EXPECT(ev.event_data.asynch_error_event_data.dat_handle == (DAT_HANDLE)r.se[0], "event names %p, expected EP %p",
               ev.event_data.asynch_error_event_data.dat_handle, (void *)r.se[0]);
        EXPECT(ev.event_data.asynch_error_event_data.reason == DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT,
               "reason %d, expected DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT (2)", (int)ev.event_data.asynch_error_event_data.reason);
    }
    if (srq_send(&r, 0, "two", &d))
        EXPECT(d.status == DAT_DTO_SUCCESS, "second receive status %u", (unsigned)d.status);
    dx_sleep_ms(50);
    EXPECT_EMPTY(r.s.async, "async EVD after a second message (the soft watermark fires once)");
    /* hard watermark 0: the next message is received, then the connection breaks */
    if (!EXPECT_RC(dat_ep_set_watermark(r.se[0], DAT_WATERMARK_INFINITE, 0), DAT_SUCCESS))
        goto out;
    if (srq_send(&r, 0, "three", &d))
        EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == 3, "third receive: status %u cookie %llu",
               (unsigned)d.status, (unsigned long long)d.user_cookie.as_64);
    DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, r.s.conn, WAIT_MS, &ev);
    EXPECT(num == DAT_CONNECTION_EVENT_BROKEN, "connection event 0x%x above the hard watermark, expected BROKEN 0x4006",
           (unsigned)num);
    /* an EP on an SRQ also reports the end of its connection on the async EVD */
    if (EXPECT_RC(wait_ev(r.s.async, 2000, &ev), DAT_SUCCESS))
        EXPECT(ev.event_number == DAT_ASYNC_ERROR_EP_BROKEN && ev.event_data.asynch_error_event_data.dat_handle == (DAT_HANDLE)r.se[0],
               "async event 0x%x for %p, expected EP_BROKEN 0x8003 for the EP", (unsigned)ev.event_number,
               ev.event_data.asynch_error_event_data.dat_handle);
    EXPECT_CONN_END(r.c.conn, 2000, "client");
    /* the SRQ keeps its other receives */
    SRQ_COUNTS(r.srq, 3, 3);
out:
    srq_rig_down(&r);
}

void case_srq_free_in_use(void)
{
    struct node n;
    DAT_SRQ_HANDLE srq;
    DAT_EP_HANDLE ep;
    if (node_open(&n, PROVIDER, 16, 16) && srq_make(&n, 8, 1, 0, &srq) &&
        EXPECT_RC(dat_ep_create_with_srq(n.ia, n.pz, n.rcv, n.req, n.conn, srq, NULL, &ep), DAT_SUCCESS)) {
        EXPECT_TYPE(dat_srq_free(srq), RC_STATE);
        EXPECT_RC(dat_ep_free(ep), DAT_SUCCESS);
        EXPECT_RC(dat_srq_free(srq), DAT_SUCCESS);
    }
    node_close(&n);
}

/* ---- four threads, four EPs, one IA ----------------------------------------------------- */

enum { T_EPS = 4, T_OPS = 1000, T_SENDS = T_OPS / 2, T_SLOT = 64, T_WRITE = 256 };
#define T_RECV_AREA ((size_t)T_EPS * T_SENDS * T_SLOT)
#define T_RDMA_AREA(t) (131072 + (size_t)(t) * 65536)
#define T_SRC(t) ((size_t)(t) * 65536)
#define T_WSRC(t) ((size_t)(t) * 65536 + 32768)

struct poster {
    int t;
    DAT_EP_HANDLE ep;
    struct mr *cm, *sm;
    int posted;
    DAT_RETURN failed_rc;
};

static void *poster_main(void *arg)
{
    struct poster *p = arg;
    for (int i = 0; i < T_OPS; i++) {
        uint64_t tag = (uint64_t)p->t << 32 | (uint64_t)i;
        DAT_RETURN rc;
        if (i % 2 == 0) {
            size_t off = T_SRC(p->t) + (size_t)(i / 2) * T_SLOT;
            memcpy(p->cm->buf + off, &tag, sizeof tag);
            DAT_LMR_TRIPLET l = lt(p->cm, off, T_SLOT);
            rc = dat_ep_post_send(p->ep, 1, &l, ck(tag), DAT_COMPLETION_DEFAULT_FLAG);
        } else {
            DAT_LMR_TRIPLET l = lt(p->cm, T_WSRC(p->t), T_WRITE);
            DAT_RMR_TRIPLET r = rt(p->sm, T_RDMA_AREA(p->t) + (size_t)((i / 2) % 256) * T_WRITE, T_WRITE);
            rc = dat_ep_post_rdma_write(p->ep, 1, &l, ck(tag), &r, DAT_COMPLETION_DEFAULT_FLAG);
        }
        if (rc != DAT_SUCCESS) {
            p->failed_rc = rc;
            return NULL;
        }
        p->posted++;
    }
    return NULL;
}

void case_threads_four_eps(void)
{
    struct node s, c;
    struct mr sm = {0}, cm = {0};
    DAT_EP_HANDLE se[T_EPS], ce[T_EPS];
    struct poster ps[T_EPS];
    pthread_t th[T_EPS];
    int started = 0;
    static unsigned char seen[T_EPS][T_OPS];
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    memset(seen, 0, sizeof seen);
    if (!node_open(&s, PROVIDER, 64, 4096) || !node_open(&c, PROVIDER, 8192, 64) || !node_listen(&s, dx_port(0)) ||
        !mr_make(&s, s.pz, 131072 + T_EPS * 65536, PRIV_ALL, &sm) || !mr_make(&c, c.pz, T_EPS * 65536, PRIV_ALL, &cm))
        goto out;
    for (int t = 0; t < T_EPS; t++) {
        if (!ep_make(&s, NULL, &se[t]) || !ep_make(&c, NULL, &ce[t]) || !connect_eps(&s, se[t], &c, ce[t], 0))
            goto out;
        for (int j = 0; j < T_SENDS; j++)
            if (!post_recv1(se[t], &sm, ((size_t)t * T_SENDS + (size_t)j) * T_SLOT, T_SLOT, (uint64_t)t << 32 | (uint64_t)j))
                goto out;
        fill(cm.buf + T_WSRC(t), T_WRITE, 100 + (unsigned)t);
    }
    for (int t = 0; t < T_EPS; t++) {
        ps[t] = (struct poster){t, ce[t], &cm, &sm, 0, DAT_SUCCESS};
        if (!EXPECT(pthread_create(&th[t], NULL, poster_main, &ps[t]) == 0, "pthread_create failed"))
            break;
        started++;
    }
    /* collect the request completions while the threads post */
    int got = 0, bad = 0, dup = 0;
    DAT_EVENT ev;
    double t0 = dx_now();
    while (got < started * T_OPS && dx_now() - t0 < 30.0) {
        if (wait_ev(c.req, 5000, &ev) != DAT_SUCCESS)
            break;
        DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        uint64_t tag = d->user_cookie.as_64;
        unsigned t = (unsigned)(tag >> 32), i = (unsigned)tag;
        got++;
        if (ev.event_number != DAT_DTO_COMPLETION_EVENT || d->status != DAT_DTO_SUCCESS || t >= T_EPS || i >= T_OPS ||
            d->ep_handle != ce[t]) {
            bad++;
            continue;
        }
        if (seen[t][i]++)
            dup++;
    }
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        EXPECT(ps[t].posted == T_OPS, "thread %d posted %d of %d (last post returned 0x%08x)", t, ps[t].posted, T_OPS,
               (unsigned)ps[t].failed_rc);
    }
    EXPECT(got == T_EPS * T_OPS, "%d request completions, expected %d", got, T_EPS * T_OPS);
    EXPECT(bad == 0 && dup == 0, "%d bad and %d repeated request completions", bad, dup);
    int missing = 0;
    for (int t = 0; t < T_EPS; t++)
        for (int i = 0; i < T_OPS; i++)
            missing += !seen[t][i];
    EXPECT(missing == 0, "%d requests never completed", missing);
    /* every send arrived once, on the right EP, with its own bytes */
    memset(seen, 0, sizeof seen);
    int recvd = 0, wrong = 0;
    while (recvd < T_EPS * T_SENDS && wait_ev(s.rcv, 5000, &ev) == DAT_SUCCESS) {
        DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        uint64_t ckv = d->user_cookie.as_64;
        unsigned t = (unsigned)(ckv >> 32), j = (unsigned)ckv;
        recvd++;
        if (d->status != DAT_DTO_SUCCESS || t >= T_EPS || j >= T_SENDS || d->ep_handle != se[t] ||
            d->transfered_length != T_SLOT) {
            wrong++;
            continue;
        }
        uint64_t tag;
        memcpy(&tag, sm.buf + ((size_t)t * T_SENDS + j) * T_SLOT, sizeof tag);
        unsigned ti = (unsigned)(tag >> 32), i = (unsigned)tag;
        if (ti != t || i >= T_OPS || i % 2 || seen[t][i]++)
            wrong++;
    }
    EXPECT(recvd == T_EPS * T_SENDS && wrong == 0, "%d receives (%d wrong), expected %d", recvd, wrong,
           T_EPS * T_SENDS);
    for (int t = 0; t < T_EPS; t++)
        for (int k = 0; k < 256; k++)
            if (memcmp(sm.buf + T_RDMA_AREA(t) + (size_t)k * T_WRITE, cm.buf + T_WSRC(t), T_WRITE) != 0) {
                harness_fail(__LINE__, "RDMA target of thread %d, slot %d, differs", t, k);
                t = T_EPS;
                break;
            }
out:
    node_close(&c);
    node_close(&s);
    mr_drop(&sm);
    mr_drop(&cm);
}

/* ---- IPv6 ----------------------------------------------------------------------------- */

static int have_ipv6_loopback(void)
{
    struct sockaddr_in6 a;
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

void case_ipv6_soft6(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_IA_ATTR attr;
    DAT_EP_PARAM ep;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!dx_on_soft_device()) {
        harness_skip("soft6 is a dat.conf entry of the soft device");
        return;
    }
    if (!have_ipv6_loopback()) {
        harness_skip("::1 is not configured");
        return;
    }
    memset(&p, 0, sizeof p);
    /* the dat.conf entry says nonthreadsafe, which is part of the registry key */
    if (!node_open_ts(&p.s, "soft6", DAT_FALSE, 16, 16) || !node_open_ts(&p.c, "soft6", DAT_FALSE, 16, 16))
        goto out;
    memset(&attr, 0, sizeof attr);
    if (EXPECT_RC(dat_ia_query(p.s.ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL), DAT_SUCCESS)) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)attr.ia_address_ptr;
        EXPECT(a && a->sin6_family == AF_INET6 && memcmp(&a->sin6_addr, &in6addr_loopback, 16) == 0,
               "soft6's ia_address is not ::1 (family %d)", a ? a->sin6_family : -1);
    }
    if (!ep_make(&p.s, NULL, &p.se) || !ep_make(&p.c, NULL, &p.ce) || !node_listen(&p.s, dx_port(0)) ||
        !connect_eps(&p.s, p.se, &p.c, p.ce, 1))
        goto out;
    if (EXPECT_RC(dat_ep_query(p.se, DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR, &ep), DAT_SUCCESS)) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ep.remote_ia_address_ptr;
        EXPECT(a && a->sin6_family == AF_INET6 && memcmp(&a->sin6_addr, &in6addr_loopback, 16) == 0,
               "the passive EP's remote address is not ::1 (family %d)", a ? a->sin6_family : -1);
    }
    if (!mr_make(&p.s, p.s.pz, 8192, PRIV_ALL, &sm) || !mr_make(&p.c, p.c.pz, 8192, PRIV_ALL, &cm))
        goto out;
    fill(cm.buf, 8192, 66);
    DAT_LMR_TRIPLET cs[3] = {lt(&cm, 0, 10), lt(&cm, 100, 300), lt(&cm, 1000, 2000)};
    DAT_LMR_TRIPLET ss[3] = {lt(&sm, 0, 1000), lt(&sm, 2000, 1000), lt(&sm, 4000, 1000)};
    if (EXPECT_RC(dat_ep_post_recv(p.se, 3, ss, ck(1), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        EXPECT_RC(dat_ep_post_send(p.ce, 3, cs, ck(2), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.s.rcv, &d)) {
        EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == 2310, "receive status %u length %u",
               (unsigned)d.status, (unsigned)d.transfered_length);
        unsigned char want[2310];
        memcpy(want, cm.buf, 10);
        memcpy(want + 10, cm.buf + 100, 300);
        memcpy(want + 310, cm.buf + 1000, 2000);
        EXPECT(memcmp(sm.buf, want, 1000) == 0 && memcmp(sm.buf + 2000, want + 1000, 1000) == 0 &&
                   memcmp(sm.buf + 4000, want + 2000, 310) == 0,
               "the message over ::1 arrived changed");
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* ---- SRQ: EPs racing for its last receive ------------------------------------------- */

/* Four client EPs keep RQ_DEPTH requests each in flight (RDMA writes with immediate data of
 * RQ_WRITE bytes, and sends), while the server keeps at most one receive on the SRQ: it posts
 * the next only when a completion came. Every request thus finds the SRQ at its last receive,
 * or empty, while the other EPs' requests arrive. An EP that saw a receive must get one: a
 * receive taken under it by another EP lost a write's completion (the receive stayed posted,
 * and the server waited for a completion that never came), or broke a send's connection.
 * Before the fix, most runs failed one way or the other. */
enum { RQ_EPS = 4, RQ_OPS = 1500, RQ_DEPTH = 4, RQ_WRITE = 65536, RQ_SEND = 64, RQ_SLOT = 256 };

struct rq_client {
    struct node *c;
    DAT_EP_HANDLE *ce;
    struct mr *cm, *tm;
    int done, bad;
    unsigned bad_status;
};

/* The client: its requests, round robin over its EPs, and their completions. */
static void *rq_client_main(void *arg)
{
    struct rq_client *k = arg;
    int posted = 0, inflight = 0;
    while (k->done < RQ_EPS * RQ_OPS) {
        while (posted < RQ_EPS * RQ_OPS && inflight < RQ_EPS * RQ_DEPTH) {
            int e = posted % RQ_EPS;
            DAT_RETURN rc;
            if ((posted / RQ_EPS) % 2 == 0) {
                DAT_LMR_TRIPLET l = lt(k->cm, 0, RQ_WRITE);
                DAT_RMR_TRIPLET r = rt(k->tm, (size_t)e * RQ_WRITE, RQ_WRITE);
                rc = dat_ib_post_rdma_write_immed(k->ce[e], 1, &l, ck((uint64_t)posted), &r, (DAT_UINT32)posted,
                                                  DAT_COMPLETION_DEFAULT_FLAG);
            } else {
                DAT_LMR_TRIPLET l = lt(k->cm, RQ_WRITE, RQ_SEND);
                rc = dat_ep_post_send(k->ce[e], 1, &l, ck((uint64_t)posted), DAT_COMPLETION_DEFAULT_FLAG);
            }
            if (rc != DAT_SUCCESS) {
                k->bad++;
                k->bad_status = (unsigned)rc;
                return NULL;
            }
            posted++;
            inflight++;
        }
        DAT_EVENT ev;
        if (wait_ev(k->c->req, WAIT_MS, &ev) != DAT_SUCCESS)
            return NULL;
        if (ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
            k->bad++;
            k->bad_status = (unsigned)ev.event_data.dto_completion_event_data.status;
        }
        k->done++;
        inflight--;
    }
    return NULL;
}

void case_srq_race_last_receive(void)
{
    struct node s, c;
    struct mr sm = {0}, cm = {0}, tm = {0};
    DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
    DAT_EP_HANDLE se[RQ_EPS], ce[RQ_EPS];
    pthread_t th;
    struct rq_client k = {&c, ce, &cm, &tm, 0, 0, 0};
    int started = 0, got = 0, posted = 0, errors = 0;
    DAT_EVENT ev;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!dx_on_soft_device()) {
        /* A verbs SRQ is the HCA's, which takes receives itself; there every starved request
         * would wait out RNR retries, far too slow under the VM. */
        harness_skip("the race concerns the soft device's SRQ (IA %s)", dx_ia_name());
        return;
    }
    if (!node_open(&s, PROVIDER, 16, 64) || !node_open(&c, PROVIDER, 64, 16) || !srq_make(&s, 16, 1, 0, &srq) ||
        !mr_make(&s, s.pz, 16 * RQ_SLOT, PRIV_ALL, &sm) || !mr_make(&s, s.pz, RQ_EPS * RQ_WRITE, PRIV_ALL, &tm) ||
        !mr_make(&c, c.pz, RQ_WRITE + RQ_SEND, PRIV_ALL, &cm) || !node_listen(&s, dx_port(0)))
        goto out;
    for (int i = 0; i < RQ_EPS; i++)
        if (!EXPECT_RC(dat_ep_create_with_srq(s.ia, s.pz, s.rcv, s.req, s.conn, srq, NULL, &se[i]), DAT_SUCCESS) ||
            !ep_make(&c, NULL, &ce[i]) || !connect_eps(&s, se[i], &c, ce[i], 0))
            goto out;
    fill(cm.buf, RQ_WRITE + RQ_SEND, 21);
    if (!EXPECT(pthread_create(&th, NULL, rq_client_main, &k) == 0, "pthread_create failed"))
        goto out;
    started = 1;
    srq_post(srq, &sm, 0, RQ_SLOT, 0);
    posted++;
    while (got < RQ_EPS * RQ_OPS) {
        DAT_RETURN rc = wait_ev(s.rcv, 3000, &ev);
        if (!EXPECT(rc == DAT_SUCCESS, "%d of %d receives completed, %d posted; then none for 3 s (0x%08x)", got,
                    RQ_EPS * RQ_OPS, posted, (unsigned)rc))
            break;
        got++;
        unsigned st = ev.event_data.dto_completion_event_data.status;
        if (st != DAT_DTO_SUCCESS && errors++ == 0)
            harness_fail(__LINE__, "receive %d completed with status %u", got, st);
        if (posted < RQ_EPS * RQ_OPS) {
            srq_post(srq, &sm, (size_t)(posted % 16) * RQ_SLOT, RQ_SLOT, (uint64_t)posted);
            posted++;
        }
    }
    EXPECT(wait_ev(s.conn, 0, &ev) != DAT_SUCCESS, "a server connection event 0x%x during the race",
           (unsigned)ev.event_number);
out:
    if (started) {
        pthread_join(th, NULL);
        EXPECT(k.done == RQ_EPS * RQ_OPS && k.bad == 0, "client: %d of %d requests completed, %d failed (last status 0x%x)",
               k.done, RQ_EPS * RQ_OPS, k.bad, k.bad_status);
    }
    node_close(&c);
    node_close(&s);
    mr_drop(&sm);
    mr_drop(&cm);
    mr_drop(&tm);
}
