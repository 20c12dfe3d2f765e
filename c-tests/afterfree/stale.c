/*
 * A freed LMR's lmr_context is dead: a request posted with it afterwards moves no byte and
 * never completes with DAT_DTO_SUCCESS, even where the registration cache kept the freed LMR's
 * memory registration (the verbs device keeps the MR of a local-only LMR freed with nothing
 * outstanding, so its lkey stays valid in the HCA), and even while another, live LMR over the
 * same range exists. The request completes with DAT_DTO_ERR_LOCAL_PROTECTION (dx_local_protection
 * also takes rxe's flush and siw's LOCAL_EP), which ends the connection as on an HCA whose QP
 * went to the error state; or the post itself is refused with a DAT error.
 *
 *   recv_stale_key_*        a receive posted with a freed LMR's context, the peer sends into it
 *   send_stale_key_*        a send posted from a freed LMR's context into the peer's receive
 *   recv_stale_key_alias_*, send_stale_key_alias_*  the same while a second LMR over the same
 *                           range is alive (on a device that shares or caches registrations,
 *                           both LMRs stand on one registration)
 *   free_while_posting_*    a thread posts receives with an LMR's context while this one frees
 *                           the LMR, over and over (a new LMR over the same buffer each time,
 *                           ~5 s); the peer sends only once dat_lmr_free returned, so none of
 *                           the receives may complete with SUCCESS, and the buffer, written
 *                           with a pattern right after the free, must stay as it is
 *
 * Each of the first four first runs a positive control on the same connection: the same post
 * with the context of an LMR that is alive (the alias, or the LMR itself before its free)
 * succeeds and moves the bytes, so a failure of the negative part is not a broken setup. The
 * buffers stay allocated (and registered by nobody) through the whole case, so bytes that land
 * through a dead key are seen, not a crash. Both sides are IAs of this process (the key check
 * is the posting side's); _tcp and _shm take the soft device's other paths (DAT2_SOFT_CMA=0;
 * sealed memfds under both sides' LMRs) and are skipped on any other IA.
 *
 * Bytes: the posting side's patterns are even and never 0, the peer's data odd; a byte that
 * differs says who wrote it.
 */
#include "dx.h"
#include "af.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#define PRIV_LOCAL (DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
#define STALE_LEN 65536u /* one message */
#define MAXPOST 24       /* receives a poster posts at most in one round (max_recv_dtos is 64) */

static int wait_ms(void)
{
    return dx_on_soft_device() ? 10000 : 120000;
}

/* ---- bytes ------------------------------------------------------------------------------ */

static unsigned char pat_byte(unsigned seed, size_t i)
{
    return (unsigned char)((((i * 13u + seed * 101u) % 127u) + 1u) * 2u); /* even, 2..254 */
}

static unsigned char data_byte(unsigned seed, size_t i)
{
    return (unsigned char)(((i * 29u + seed * 71u) & 0xffu) | 1u); /* odd */
}

static void fill_pat(unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = pat_byte(seed, i);
}

static void fill_data(unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = data_byte(seed, i);
}

/* Bytes that are not the pattern `seed`; *odd: how many of them are odd (the peer's data). */
static size_t changed_from_pat(const unsigned char *p, size_t len, unsigned seed, size_t *odd)
{
    size_t n = 0;
    *odd = 0;
    for (size_t i = 0; i < len; i++)
        if (p[i] != pat_byte(seed, i)) {
            n++;
            *odd += p[i] & 1u;
        }
    return n;
}

static size_t differ_from_data(const unsigned char *p, size_t len, unsigned seed)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += p[i] != data_byte(seed, i);
    return n;
}

static size_t nonzero(const unsigned char *p, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += p[i] != 0;
    return n;
}

static const char *status_name(unsigned s)
{
    static const char *names[] = {"SUCCESS",          "FLUSHED",        "LOCAL_LENGTH",      "LOCAL_EP",
                                  "LOCAL_PROTECTION", "BAD_RESPONSE",   "REMOTE_ACCESS",     "REMOTE_RESPONDER",
                                  "TRANSPORT",        "RECEIVER_NOT_READY", "PARTIAL_PACKET", "RMR_OPERATION"};
    return s < sizeof names / sizeof names[0] ? names[s] : "other";
}

/* ---- registrations ------------------------------------------------------------------------ */

/* A buffer and its LMR on node n: private memory, or a sealed memfd in _shm. */
static int buf_make(struct node *n, DAT_MEM_PRIV_FLAGS priv, struct mr *m)
{
    return case_mode == M_SHM ? mr_make_shared(n, n->pz, STALE_LEN, priv, m) : mr_make(n, n->pz, STALE_LEN, priv, m);
}

/* Another LMR over m's range (same PZ and privileges): its handle and context into *a (whose
 * buffer is m's, not its own: mr_drop must not be called on it). */
static int lmr_alias(struct node *n, const struct mr *m, DAT_MEM_PRIV_FLAGS priv, struct mr *a)
{
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN rlen = 0;
    DAT_VADDR raddr = 0;
    *a = *m;
    memset(&r, 0, sizeof r);
    r.for_va = m->buf;
    return EXPECT_RC(dat_lmr_create(n->ia, DAT_MEM_TYPE_VIRTUAL, r, m->len, n->pz, priv, DAT_VA_TYPE_VA, &a->h,
                                    &a->lkey, &a->rkey, &rlen, &raddr),
                     DAT_SUCCESS);
}

/* The IA's provider attribute `name` (for the log), or "?". */
static const char *attr(DAT_IA_HANDLE ia, const char *name, char *out, size_t size)
{
    DAT_PROVIDER_ATTR pa;
    snprintf(out, size, "n/a");
    memset(&pa, 0, sizeof pa);
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa) != DAT_SUCCESS)
        return out;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++)
        if (pa.provider_specific_attr[i].name && strcmp(pa.provider_specific_attr[i].name, name) == 0 &&
            pa.provider_specific_attr[i].value)
            snprintf(out, size, "%s", pa.provider_specific_attr[i].value);
    return out;
}

/* Waits for one DTO completion on evd with the cookie `want` (others are noted); its status,
 * or -1 when none came within ms. */
static int wait_cookie(DAT_EVD_HANDLE evd, uint64_t want, int ms)
{
    DAT_EVENT ev;
    double end = dx_now() + ms / 1000.0;
    for (;;) {
        int left = (int)((end - dx_now()) * 1000.0);
        if (left <= 0 || wait_ev(evd, left, &ev) != DAT_SUCCESS)
            return -1;
        if (ev.event_number != DAT_DTO_COMPLETION_EVENT) {
            harness_note("event 0x%x while waiting for completion %llu", (unsigned)ev.event_number,
                         (unsigned long long)want);
            continue;
        }
        const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        if (d->user_cookie.as_64 == want)
            return (int)d->status;
        harness_note("completion %llu (%s) while waiting for %llu", (unsigned long long)d->user_cookie.as_64,
                     status_name(d->status), (unsigned long long)want);
    }
}

/* ---- recv_stale_key, send_stale_key (and _alias) ------------------------------------------- */

/* One case: `send` 0: this side (p.c) receives, the peer (p.s) sends; 1: the other way round.
 * `alias`: a second LMR over the same range stays alive. */
static void stale(int send, int alias)
{
    struct pair p;
    struct mr m = {0}, live = {0}, peer = {0};
    int have_live = 0;
    const int ms = wait_ms();
    char cache[32], hits0[32], hits1[32];
    DAT_EP_ATTR a;
    attr_init(&a);
    memset(&p, 0, sizeof p);
    if (!pair_up(&p, dx_port(0), &a, &a, 64) || !buf_make(&p.c, PRIV_LOCAL, &m) || !buf_make(&p.s, PRIV_ALL, &peer))
        goto out;
    if (alias) {
        if (!lmr_alias(&p.c, &m, PRIV_LOCAL, &live))
            goto out;
        have_live = 1;
    }
    const char *what = send ? "send" : "receive";

    /* 1: the positive control, with the context of an LMR that is alive */
    const struct mr *ok = alias ? &live : &m;
    DAT_LMR_TRIPLET mine = lt(ok, 0, STALE_LEN), theirs = lt(&peer, 0, STALE_LEN);
    if (send) {
        fill_pat(m.buf, STALE_LEN, 1);
        if (!EXPECT_RC(dat_ep_post_recv(p.se, 1, &theirs, ck(11), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
            !EXPECT_RC(dat_ep_post_send(p.ce, 1, &mine, ck(1), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
    } else {
        fill_data(peer.buf, STALE_LEN, 1);
        if (!EXPECT_RC(dat_ep_post_recv(p.ce, 1, &mine, ck(1), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
            !EXPECT_RC(dat_ep_post_send(p.se, 1, &theirs, ck(11), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
    }
    int st_mine = wait_cookie(send ? p.c.req : p.c.rcv, 1, ms);
    int st_theirs = wait_cookie(send ? p.s.rcv : p.s.req, 11, ms);
    /* what landed: the peer's data 1 here, or this side's pattern 1 at the peer */
    size_t odd, bad = send ? changed_from_pat(peer.buf, STALE_LEN, 1, &odd) : differ_from_data(m.buf, STALE_LEN, 1);
    if (!EXPECT(st_mine == DAT_DTO_SUCCESS && st_theirs == DAT_DTO_SUCCESS && bad == 0,
                "control: the %s with the live LMR's context completed %s, the peer's %s, %zu bytes not moved as "
                "sent (the setup is broken: the negative part would prove nothing)",
                what, st_mine < 0 ? "(none)" : status_name((unsigned)st_mine),
                st_theirs < 0 ? "(none)" : status_name((unsigned)st_theirs), bad))
        goto out;
    harness_note("control: the %s with the live LMR's context (0x%x) moved %u bytes", what, (unsigned)ok->lkey,
                 STALE_LEN);

    /* 2: the free; the buffer stays allocated, and gets a pattern of this side's */
    attr(p.c.ia, "DAT2_MR_CACHE", cache, sizeof cache);
    attr(p.c.ia, "DAT2_MR_CACHE_HITS", hits0, sizeof hits0);
    DAT_LMR_CONTEXT dead = m.lkey;
    if (!EXPECT_RC(dat_lmr_free(m.h), DAT_SUCCESS))
        goto out;
    m.h = DAT_HANDLE_NULL;
    fill_pat(m.buf, STALE_LEN, 2);
    memset(peer.buf, 0, STALE_LEN);
    if (alias) {
        harness_note("freed LMR's context 0x%x, the live alias's 0x%x", (unsigned)dead, (unsigned)live.lkey);
        if (dead == live.lkey)
            harness_note("both LMRs had the same lmr_context: a post with it names the live LMR");
    }

    /* 3: the post with the freed LMR's context */
    DAT_LMR_TRIPLET t = lt(&m, 0, STALE_LEN);
    t.lmr_context = dead;
    DAT_RETURN rc;
    int st = -1, st_peer = -1;
    if (send) {
        if (!EXPECT_RC(dat_ep_post_recv(p.se, 1, &theirs, ck(12), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
        rc = dat_ep_post_send(p.ce, 1, &t, ck(2), DAT_COMPLETION_DEFAULT_FLAG);
    } else {
        rc = dat_ep_post_recv(p.ce, 1, &t, ck(2), DAT_COMPLETION_DEFAULT_FLAG);
        fill_data(peer.buf, STALE_LEN, 3);
        /* the peer sends only if this side's receive is there to take it; the refusal of that
         * receive ends the connection, which may already have reached the peer's EP */
        if (rc == DAT_SUCCESS) {
            DAT_RETURN prc = dat_ep_post_send(p.se, 1, &theirs, ck(12), DAT_COMPLETION_DEFAULT_FLAG);
            if (prc != DAT_SUCCESS && DAT_GET_TYPE(prc) == DAT_INVALID_STATE)
                harness_note("the peer's send was refused (0x%08x): the connection had ended", (unsigned)prc);
            else if (!EXPECT_RC(prc, DAT_SUCCESS))
                goto out;
        }
    }
    if (rc != DAT_SUCCESS) {
        harness_note("the %s with the freed LMR's context was refused: 0x%08x", what, (unsigned)rc);
        EXPECT((rc & 0x80000000u) != 0, "the post returned 0x%08x, neither DAT_SUCCESS nor an error", (unsigned)rc);
    } else {
        st = wait_cookie(send ? p.c.req : p.c.rcv, 2, ms);
        /* the peer's half ends one way or another once the connection is gone; a receive of
         * the peer's that nothing was sent to may wait: the buffer tells */
        st_peer = wait_cookie(send ? p.s.rcv : p.s.req, 12, send ? (st < 0 ? 0 : ms / 4) : ms);
        harness_note("the %s with the freed LMR's context completed %s; the peer's %s %s (cache %s, hits %s)", what,
                     st < 0 ? "(none)" : status_name((unsigned)st), send ? "receive" : "send",
                     st_peer < 0 ? "(none)" : status_name((unsigned)st_peer), cache, hits0);
        EXPECT(st >= 0, "the %s posted with a freed LMR's context did not complete within %d ms", what, ms);
        EXPECT(st != DAT_DTO_SUCCESS, "the %s posted with a freed LMR's context (0x%x) completed SUCCESS", what,
               (unsigned)dead);
        if (st > 0)
            EXPECT(dx_local_protection(p.c.ia, (unsigned)st),
                   "the %s posted with a freed LMR's context completed %s (%u), expected LOCAL_PROTECTION", what,
                   status_name((unsigned)st), (unsigned)st);
        if (send)
            EXPECT(st_peer != DAT_DTO_SUCCESS, "the peer's receive completed SUCCESS: it took a send from a freed "
                                               "LMR's context");
    }
    if (send) {
        size_t n = nonzero(peer.buf, STALE_LEN);
        EXPECT(n == 0, "%zu bytes of the peer's receive buffer changed: a send from a freed LMR's context delivered "
                       "this side's memory",
               n);
    } else {
        size_t n = changed_from_pat(m.buf, STALE_LEN, 2, &odd);
        EXPECT(n == 0, "%zu bytes of the buffer changed after its LMR was freed (%zu of them the peer's data): a "
                       "receive posted with the freed LMR's context landed",
               n, odd);
    }
    attr(p.c.ia, "DAT2_MR_CACHE_HITS", hits1, sizeof hits1);
    harness_verdict_note("(%s: %s%s; cache %s)", alias ? "a live alias kept" : "no alias",
                         rc != DAT_SUCCESS ? "post refused" : "completed ",
                         rc != DAT_SUCCESS ? "" : (st < 0 ? "(none)" : status_name((unsigned)st)), cache);
out:
    if (have_live && live.h != DAT_HANDLE_NULL)
        (void)dat_lmr_free(live.h);
    pair_down(&p);
    if (m.buf)
        mr_drop(&m);
    if (peer.buf)
        mr_drop(&peer);
}

static void case_recv_stale(void) { stale(0, 0); }
static void case_send_stale(void) { stale(1, 0); }
static void case_recv_stale_alias(void) { stale(0, 1); }
static void case_send_stale_alias(void) { stale(1, 1); }

/* ---- free_while_posting -------------------------------------------------------------------- */

struct poster {
    DAT_EP_HANDLE ep;
    DAT_LMR_TRIPLET t;
    uint64_t round;
    int freed;                          /* set (release) once dat_lmr_free returned */
    int posted, before, after, refused; /* accepted posts: all, before, after the free; refused */
    int tries_after;                    /* posts begun after the free, accepted or not */
    int begun;                          /* posts begun (atomic) */
};

/* cookie: round << 16 | seq << 1 | posted after the free had returned */
static void *poster_main(void *arg)
{
    struct poster *ps = arg;
    for (int seq = 0; seq < MAXPOST && ps->tries_after < 3; seq++) {
        __atomic_store_n(&ps->begun, seq + 1, __ATOMIC_RELEASE);
        int after = __atomic_load_n(&ps->freed, __ATOMIC_ACQUIRE);
        DAT_RETURN rc =
            dat_ep_post_recv(ps->ep, 1, &ps->t, ck(ps->round << 16 | (uint64_t)seq << 1 | (uint64_t)after),
                             DAT_COMPLETION_DEFAULT_FLAG);
        ps->tries_after += after;
        if (rc != DAT_SUCCESS) {
            ps->refused++;
            continue;
        }
        ps->posted++;
        ps->after += after;
        ps->before += !after;
    }
    return NULL;
}

/* A new EP on each side, connected (the old ones are freed; the PSP stays). */
static int reconnect(struct pair *p, const DAT_EP_ATTR *a)
{
    DAT_EVENT ev;
    if (p->ce != DAT_HANDLE_NULL)
        (void)dat_ep_free(p->ce);
    if (p->se != DAT_HANDLE_NULL)
        (void)dat_ep_free(p->se);
    p->ce = p->se = DAT_HANDLE_NULL;
    if (!ep_make(&p->s, a, &p->se) || !ep_make(&p->c, a, &p->ce))
        return 0;
    if (!EXPECT_RC(dat_ep_connect(p->ce, dx_loopback(0), p->s.port, 30000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS))
        return 0;
    if (!EXPECT_RC(wait_ev(p->s.cr, wait_ms(), &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "event 0x%x, expected a connection request",
                (unsigned)ev.event_number) ||
        !EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p->se, 0, NULL), DAT_SUCCESS))
        return 0;
    /* the old EPs' ends may still be queued on the connection EVDs: skip them */
    for (int side = 0; side < 2; side++) {
        DAT_EVD_HANDLE evd = side ? p->c.conn : p->s.conn;
        DAT_EP_HANDLE ep = side ? p->ce : p->se;
        for (;;) {
            if (!EXPECT_RC(wait_ev(evd, wait_ms(), &ev), DAT_SUCCESS))
                return 0;
            if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED && ev.event_data.connect_event_data.ep_handle == ep)
                break;
            if (!EXPECT(ev.event_data.connect_event_data.ep_handle != ep, "the new EP got connection event 0x%x",
                        (unsigned)ev.event_number))
                return 0;
        }
    }
    return 1;
}

static void case_free_while_posting(void)
{
    struct pair p;
    struct mr m = {0}, peer = {0};
    DAT_EP_ATTR a;
    const int ms = wait_ms();
    const double budget = dx_on_soft_device() ? 5.0 : 30.0;
    const int max_rounds = 3000;
    int rounds = 0, raced = 0, after_total = 0, refused_total = 0, errs = 0;
    unsigned seed = 1;
    attr_init(&a);
    memset(&p, 0, sizeof p);
    /* the buffer under the LMRs is m's (its own LMR freed at once: each round makes its own) */
    if (!pair_up(&p, dx_port(0), &a, &a, 64) || !buf_make(&p.c, PRIV_LOCAL, &m) || !buf_make(&p.s, PRIV_ALL, &peer) ||
        !EXPECT_RC(dat_lmr_free(m.h), DAT_SUCCESS))
        goto out;
    m.h = DAT_HANDLE_NULL;
    fill_data(peer.buf, STALE_LEN, 5);
    const size_t msg = 4096;
    DAT_LMR_TRIPLET src = lt(&peer, 0, msg);
    double start = dx_now();
    while (rounds < max_rounds && dx_now() - start < budget) {
        unsigned pat = 3 + (unsigned)rounds % 200;
        fill_pat(m.buf, STALE_LEN, pat);
        struct mr l = m;
        if (!lmr_alias(&p.c, &m, PRIV_LOCAL, &l))
            break;
        struct poster ps;
        memset(&ps, 0, sizeof ps);
        ps.ep = p.ce;
        ps.t = lt(&l, 0, (DAT_SEG_LENGTH)msg);
        ps.round = (uint64_t)rounds;
        pthread_t th;
        if (!EXPECT(pthread_create(&th, NULL, poster_main, &ps) == 0, "pthread_create failed")) {
            (void)dat_lmr_free(l.h);
            break;
        }
        /* free once the poster has begun k posts (0 to 7: some rounds free before the first
         * post), so that the free falls among its posts however fast either side runs */
        int k = (int)(rand_r(&seed) % 8);
        while (__atomic_load_n(&ps.begun, __ATOMIC_ACQUIRE) < k)
            sched_yield();
        EXPECT_RC(dat_lmr_free(l.h), DAT_SUCCESS);
        __atomic_store_n(&ps.freed, 1, __ATOMIC_RELEASE);
        fill_pat(m.buf, STALE_LEN, pat + 1);
        pthread_join(th, NULL);
        rounds++;
        raced += ps.before > 0 && ps.tries_after > 0;
        after_total += ps.after;
        refused_total += ps.refused;
        if (ps.posted == 0)
            continue; /* every post was refused: nothing in flight, the connection is as it was */
        /* the peer sends only now that the free returned: one message for each receive */
        int sent = 0;
        for (int i = 0; i < ps.posted; i++) {
            if (dat_ep_post_send(p.se, 1, &src, ck((uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
                break;
            sent++;
        }
        /* every receive completes (in error, or flushed once the connection is gone) */
        int got = 0, success = 0, success_after = 0;
        unsigned first_bad = 0;
        DAT_EVENT ev;
        double end = dx_now() + ms / 1000.0;
        while (got < ps.posted) {
            int left = (int)((end - dx_now()) * 1000.0);
            if (left <= 0 || wait_ev(p.c.rcv, left, &ev) != DAT_SUCCESS)
                break;
            if (ev.event_number != DAT_DTO_COMPLETION_EVENT)
                continue;
            const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
            if ((d->user_cookie.as_64 >> 16) != (uint64_t)(rounds - 1))
                continue; /* a straggler of an earlier round's EP */
            got++;
            if (d->status == DAT_DTO_SUCCESS) {
                success++;
                success_after += (int)(d->user_cookie.as_64 & 1u);
            } else if (!first_bad) {
                first_bad = d->status;
            }
        }
        /* the peer's sends end too (any status) */
        int peer_got = 0;
        end = dx_now() + ms / 1000.0;
        while (peer_got < sent) {
            int left = (int)((end - dx_now()) * 1000.0);
            if (left <= 0 || wait_ev(p.s.req, left, &ev) != DAT_SUCCESS)
                break;
            peer_got += ev.event_number == DAT_DTO_COMPLETION_EVENT;
        }
        size_t odd, changed = changed_from_pat(m.buf, STALE_LEN, pat + 1, &odd);
        EXPECT(got == ps.posted, "round %d: %d of %d receives completed within %d ms", rounds, got, ps.posted, ms);
        EXPECT(success_after == 0,
               "round %d: %d receives posted with an LMR's context after its dat_lmr_free returned completed SUCCESS",
               rounds, success_after);
        EXPECT(success == success_after,
               "round %d: %d receives posted before the free (the peer sent after it returned) completed SUCCESS",
               rounds, success - success_after);
        EXPECT(changed == 0,
               "round %d: %zu bytes of the buffer changed after dat_lmr_free returned (%zu of them the peer's data); "
               "receives: %d before the free, %d after it, %d refused",
               rounds, changed, odd, ps.before, ps.after, ps.refused);
        errs += first_bad != 0;
        if (harness_failures() > 0)
            break;
        if (!reconnect(&p, &a))
            break;
    }
    harness_note("%d rounds in %.1f s: %d with posts on both sides of the free, %d receives posted after it, %d "
                 "posts refused, %d rounds ended in error completions",
                 rounds, dx_now() - start, raced, after_total, refused_total, errs);
    harness_verdict_note("(%d rounds, %d raced the free; %d posts after it accepted, %d refused)", rounds, raced,
                         after_total, refused_total);
    EXPECT(rounds > 0, "no round ran");
out:
    pair_down(&p);
    if (m.buf)
        mr_drop(&m);
    if (peer.buf)
        mr_drop(&peer);
}

/* ---- the table (appended to aftest.c's; prepare there sets the mode) ----------------------- */

#define STALE3(n, f) {#n "_thread", f, M_THREAD}, {#n "_tcp", f, M_TCP}, {#n "_shm", f, M_SHM}

const struct harness_case stale_cases[] = {
    STALE3(recv_stale_key, case_recv_stale),
    STALE3(send_stale_key, case_send_stale),
    STALE3(recv_stale_key_alias, case_recv_stale_alias),
    STALE3(send_stale_key_alias, case_send_stale_alias),
    {"free_while_posting_thread", case_free_while_posting, M_THREAD},
    {"free_while_posting_tcp", case_free_while_posting, M_TCP},
};
const size_t stale_ncases = sizeof stale_cases / sizeof stale_cases[0];
