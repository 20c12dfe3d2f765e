/* Registrations in shared memory (a memfd sealed against shrinking, mapped shared): on one host
 * dat2-soft copies between the two processes' files instead of calling process_vm_*, for RDMA
 * writes done by the initiator, for writes and sends the target copies, with RDMA reads as
 * before. The same rules hold as for any memory: data lands exactly where the keys say, in
 * order, and a bad remote access touches nothing. On other IAs (and with DAT2_SOFT_CMA=0) the
 * same cases check the data only. */
#include "dx.h"

#include <pthread.h>
#include <stdlib.h>

#include "dx_cases.h"

#define BIG (1u << 20)

/* Whether the shared-memory path is expected: the soft device with cross-memory attach on
 * (see dx_cma_on), and shared memory not turned off. */
static int path_expected(DAT_IA_HANDLE ia)
{
    return dx_on_soft_device() && dx_cma_on(ia) && !(getenv("DAT2_SOFT_SHM") && strcmp(getenv("DAT2_SOFT_SHM"), "0") == 0);
}

static int wait_ok(DAT_EVD_HANDLE evd, uint64_t cookie, const char *what)
{
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!WAIT_DTO(evd, &d))
        return 0;
    return EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == cookie, "%s: status %u cookie %llu", what,
                  (unsigned)d.status, (unsigned long long)d.user_cookie.as_64);
}

void case_shm_write_read(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0}, hm = {0};
    int before = dx_shm_mappings();
    if (dx_ia_iwarp()) {
        /* its second part queues writes behind a send the target has no receive for, which
         * waits on IB and RoCE; iWARP has no such wait (the target ends the connection) */
        harness_skip("iWARP has no receiver-not-ready wait, which the case's second part relies on");
        return;
    }
    if (!pair_up(&p, dx_port(0), NULL, NULL, 64) || !mr_make_shared(&p.s, p.s.pz, 2 * BIG, PRIV_ALL, &sm) ||
        !mr_make_shared(&p.c, p.c.pz, 2 * BIG, PRIV_ALL, &cm) || !mr_make(&p.s, p.s.pz, BIG, PRIV_ALL, &hm))
        goto out;
    int registered = dx_shm_mappings();
    if (path_expected(p.s.ia))
        EXPECT(registered >= before + 4, "the library keeps a mapping of each shared registration: %d -> %d mappings",
               before, registered);

    /* 1. One 1 MiB write with nothing outstanding (the initiator copies into the target's
     *    file), at an odd offset; nothing around it changes. */
    fill(cm.buf, 2 * BIG, 3);
    DAT_LMR_TRIPLET l = lt(&cm, 123, BIG);
    DAT_RMR_TRIPLET r = rt(&sm, 4567, BIG);
    if (EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        wait_ok(p.c.req, 1, "1 MiB write")) {
        EXPECT(memcmp(sm.buf + 4567, cm.buf + 123, BIG) == 0, "1 MiB write: target bytes differ");
        unsigned char zero[4567] = {0};
        EXPECT(memcmp(sm.buf, zero, sizeof zero) == 0 && sm.buf[4567 + BIG] == 0,
               "1 MiB write: bytes outside the target changed");
    }
    if (path_expected(p.s.ia))
        EXPECT(dx_shm_mappings() > registered, "the write went through the files (no new mapping of the peer's file)");

    /* 2. A send the target has no receive for yet, a read and eight 128 KiB writes of 2
     *    segments each behind it: the send waits at the target until a receive is posted, so
     *    the writes are certainly queued there, and the target copies them from the
     *    initiator's file, in order, once it may. Nothing completes before the receive. */
    int mapped = dx_shm_mappings();
    memset(sm.buf, 0, sm.alloc);
    fill(sm.buf + BIG, 65536, 5);
    DAT_LMR_TRIPLET sl = lt(&cm, BIG + 700000, 1000);
    DAT_LMR_TRIPLET rv = lt(&sm, BIG + 900000, 1000);
    DAT_LMR_TRIPLET rl = lt(&cm, BIG + 500000, 65536);
    DAT_RMR_TRIPLET rr = rt(&sm, BIG, 65536);
    EXPECT_RC(dat_ep_post_send(p.ce, 1, &sl, ck(9), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    EXPECT_RC(dat_ep_post_rdma_read(p.ce, 1, &rl, ck(10), &rr, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    for (int k = 0; k < 8; k++) {
        DAT_LMR_TRIPLET ls[2] = {lt(&cm, (size_t)k * 131072, 100000), lt(&cm, BIG + (size_t)k * 1000, 31072)};
        DAT_RMR_TRIPLET w = rt(&sm, (size_t)k * 131072, 131072);
        EXPECT_RC(dat_ep_post_rdma_write(p.ce, 2, ls, ck(20 + (uint64_t)k), &w, DAT_COMPLETION_DEFAULT_FLAG),
                  DAT_SUCCESS);
    }
    DAT_EVENT early;
    DAT_COUNT nmore;
    static const unsigned char zero64[64];
    EXPECT_RC(dat_evd_wait(p.c.req, 200000, 1, &early, &nmore), RC_TIMEOUT);
    EXPECT(memcmp(sm.buf, zero64, 64) == 0 && memcmp(sm.buf + 7 * 131072, zero64, 64) == 0,
           "a write behind a waiting send was applied before it");
    EXPECT_RC(dat_ep_post_recv(p.se, 1, &rv, ck(8), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    if (wait_ok(p.s.rcv, 8, "late receive"))
        EXPECT(memcmp(sm.buf + BIG + 900000, cm.buf + BIG + 700000, 1000) == 0, "late receive: bytes differ");
    wait_ok(p.c.req, 9, "send ahead of the read");
    if (wait_ok(p.c.req, 10, "read ahead of the writes"))
        EXPECT(memcmp(cm.buf + BIG + 500000, sm.buf + BIG, 65536) == 0, "64 KiB read: bytes differ");
    for (int k = 0; k < 8; k++) {
        if (!wait_ok(p.c.req, 20 + (uint64_t)k, "queued write"))
            break;
        EXPECT(memcmp(sm.buf + (size_t)k * 131072, cm.buf + (size_t)k * 131072, 100000) == 0 &&
                   memcmp(sm.buf + (size_t)k * 131072 + 100000, cm.buf + BIG + (size_t)k * 1000, 31072) == 0,
               "queued write %d: target bytes differ", k);
    }
    if (path_expected(p.s.ia))
        EXPECT(dx_shm_mappings() > mapped, "the target did not map the initiator's file");

    /* 3. A send of three segments into a receive of two, shared memory at both ends. */
    memset(sm.buf, 0, sm.alloc);
    DAT_LMR_TRIPLET rs[2] = {lt(&sm, 1000, 50000), lt(&sm, BIG, 100000)};
    DAT_LMR_TRIPLET ss[3] = {lt(&cm, 0, 40000), lt(&cm, 300000, 40000), lt(&cm, 700000, 40000)};
    if (EXPECT_RC(dat_ep_post_recv(p.se, 2, rs, ck(30), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        EXPECT_RC(dat_ep_post_send(p.ce, 3, ss, ck(31), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        wait_ok(p.s.rcv, 30, "receive") && wait_ok(p.c.req, 31, "send")) {
        unsigned char *want = malloc(120000);
        if (want) {
            memcpy(want, cm.buf, 40000);
            memcpy(want + 40000, cm.buf + 300000, 40000);
            memcpy(want + 80000, cm.buf + 700000, 40000);
            EXPECT(memcmp(sm.buf + 1000, want, 50000) == 0 && memcmp(sm.buf + BIG, want + 50000, 70000) == 0,
                   "send: received bytes differ");
            EXPECT(sm.buf[BIG + 70000] == 0 && sm.buf[999] == 0 && sm.buf[51000] == 0,
                   "send: bytes outside the message changed");
            free(want);
        }
    }

    /* 4. Shared memory at one end only: into a heap buffer, and back. */
    l = lt(&cm, 0, 300000);
    r = rt(&hm, 1000, 300000);
    if (EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(40), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        wait_ok(p.c.req, 40, "write into the heap"))
        EXPECT(memcmp(hm.buf + 1000, cm.buf, 300000) == 0, "write into a heap buffer: bytes differ");
out:
    pair_down(&p);
    mr_drop(&sm);
    mr_drop(&cm);
    mr_drop(&hm);
}

/* A bad remote access with shared memory at both ends, of `len` bytes (128 KiB, or 8 bytes,
 * which the initiator's fast path would otherwise copy itself): REMOTE_ACCESS, and the
 * target's file is untouched. */
static void shm_remote_error(int kind, DAT_SEG_LENGTH len)
{
    static const char *names[] = {"out of bounds", "freed LMR", "no REMOTE_WRITE"};
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    unsigned char *snap = NULL;
    DAT_MEM_PRIV_FLAGS priv = kind == 2 ? 0x13u : PRIV_ALL;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make_shared(&p.s, p.s.pz, 4 * 65536, priv, &sm) ||
        !mr_make_shared(&p.c, p.c.pz, 4 * 65536, PRIV_ALL, &cm))
        goto out;
    fill(sm.buf, sm.alloc, 7);
    fill(cm.buf, cm.alloc, 8);
    snap = malloc(sm.alloc);
    if (!snap)
        goto out;
    memcpy(snap, sm.buf, sm.alloc);
    DAT_LMR_TRIPLET l = lt(&cm, 0, len);
    /* out of bounds: the range straddles the registration's end */
    DAT_RMR_TRIPLET r = rt(&sm, kind == 0 ? 4 * 65536 - len / 2 : 0, len);
    if (kind == 1) {
        if (!EXPECT_RC(dat_lmr_free(sm.h), DAT_SUCCESS))
            goto out;
        sm.h = DAT_HANDLE_NULL;
    }
    if (EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.req, &d))
        EXPECT(dx_remote_error(p.c.ia, d.status), "%s: write completed with status %u, expected %u", names[kind],
               (unsigned)d.status, (unsigned)DAT_DTO_ERR_REMOTE_ACCESS);
    EXPECT_CONN_END(p.c.conn, WAIT_MS, "initiator");
    if (kind == 0 && dx_iwarp(p.c.ia)) {
        /* iWARP checks each DDP segment as it arrives: segments of a straddling write that
         * fit in the region may be placed before the one that does not is refused (measured
         * on siw). Nothing outside the region changes, and inside it only the write's own
         * bytes at their place. */
        size_t start = (size_t)r.virtual_address - (size_t)(uintptr_t)sm.buf, end = 4 * 65536, placed = 0;
        int other = 0;
        for (size_t i = start; i < end; i++) {
            if (sm.buf[i] == cm.buf[i - start] && sm.buf[i] != snap[i])
                placed++;
            else if (sm.buf[i] != snap[i])
                other = 1;
        }
        EXPECT(memcmp(snap, sm.buf, start) == 0 && memcmp(snap + end, sm.buf + end, sm.alloc - end) == 0,
               "%s: the target's memory changed outside the region", names[kind]);
        EXPECT(!other, "%s: bytes in the region changed to other than the write's", names[kind]);
        harness_note("iWARP: %zu in-bounds bytes of the refused write were placed", placed);
    } else
        EXPECT(memcmp(snap, sm.buf, sm.alloc) == 0, "%s: the target's memory changed", names[kind]);
out:
    free(snap);
    pair_down(&p);
    mr_drop(&sm);
    mr_drop(&cm);
}

void case_shm_rkey_bounds(void) { shm_remote_error(0, 131072); }
void case_shm_rkey_freed(void) { shm_remote_error(1, 131072); }
void case_shm_rkey_no_write(void) { shm_remote_error(2, 131072); }
void case_shm_small_rkey_bounds(void) { shm_remote_error(0, 8); }
void case_shm_small_rkey_freed(void) { shm_remote_error(1, 8); }
void case_shm_small_rkey_no_write(void) { shm_remote_error(2, 8); }

/* 8-byte RDMA writes between shared registrations (the initiator copies them itself, and
 * completes them before the post returns): data lands exactly where the key says, through an
 * LMR's rkey and through a window, and a window's old context stops working at its unbind. */
void case_shm_small_writes(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    DAT_RMR_CONTEXT ctx = 0, after = 0;
    unsigned char *want = NULL;
    if (dx_ia_lacks_windows()) {
        harness_skip("the IA has no memory windows (max_rmrs 0)");
        return;
    }
    if (!pair_up(&p, dx_port(0), NULL, NULL, 64) || !mr_make_shared(&p.s, p.s.pz, 65536, PRIV_ALL, &sm) ||
        !mr_make_shared(&p.c, p.c.pz, 65536, PRIV_ALL, &cm) || !EXPECT_RC(dat_rmr_create(p.s.pz, &rmr), DAT_SUCCESS))
        goto out;
    want = calloc(1, sm.alloc);
    if (!want)
        goto out;
    fill(cm.buf, 65536, 11);
    /* the connection's path is chosen when it is made (a peer the kernel has not confirmed in
     * time gets TCP): the initiator copies only on the cross-memory path */
    int direct = path_expected(p.s.ia) && strcmp(path_of(p.ce), "cma") == 0, immediate = 0;
    static const size_t at[] = {0, 8, 13, 4093, 65536 - 8};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        DAT_LMR_TRIPLET l = lt(&cm, 100 + k, 8);
        DAT_RMR_TRIPLET r = rt(&sm, at[k], 8);
        memcpy(want + at[k], cm.buf + 100 + k, 8);
        if (!EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(k), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            break;
        DAT_EVENT ev;
        DAT_DTO_COMPLETION_EVENT_DATA d;
        /* Done on the posting thread, the completion is queued before the post returns, unless
         * another thread of the QP was delivering an event just then (its delivery goes on,
         * in order; delivery.rs): so at least one of these is there at once. */
        if (direct && dat_evd_dequeue(p.c.req, &ev) == DAT_SUCCESS) {
            immediate++;
            d = ev.event_data.dto_completion_event_data;
            EXPECT(ev.event_number == DAT_DTO_COMPLETION_EVENT, "8-byte write %zu: event 0x%x", k, (unsigned)ev.event_number);
        } else if (!WAIT_DTO(p.c.req, &d)) {
            break;
        }
        EXPECT(d.status == DAT_DTO_SUCCESS && d.user_cookie.as_64 == k && d.transfered_length == 8,
               "8-byte write %zu: status %u cookie %llu length %llu", k, (unsigned)d.status,
               (unsigned long long)d.user_cookie.as_64, (unsigned long long)d.transfered_length);
    }
    EXPECT(memcmp(sm.buf, want, sm.alloc) == 0, "8-byte writes: the target's bytes differ from what was written");
    if (direct)
        EXPECT(immediate > 0, "no 8-byte write was completed when its post returned (the initiator did not copy it)");

    /* Through a window over [4096, 8192) bound to the server's EP, then after its unbind. */
    if (!BIND(rmr, &sm, 4096, 4096, p.se, p.s.req, 1, &ctx))
        goto out;
    EXPECT(WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 8192 - 8), ctx, 8) == DAT_DTO_SUCCESS, "8-byte write into the window");
    memcpy(want + 8192 - 8, cm.buf, 8);
    EXPECT(memcmp(sm.buf, want, sm.alloc) == 0, "8-byte write into the window: the target's bytes differ");
    if (!BIND(rmr, &sm, 4096, 0, p.se, p.s.req, 2, &after))
        goto out;
    unsigned st = WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 4096), ctx, 8);
    EXPECT(st == DAT_DTO_ERR_REMOTE_ACCESS, "8-byte write after the unbind: status %u, expected 6", st);
    EXPECT(memcmp(sm.buf, want, sm.alloc) == 0, "the write after the unbind changed the target");
out:
    free(want);
    if (rmr != DAT_HANDLE_NULL)
        dat_rmr_free(rmr);
    pair_down(&p);
    mr_drop(&sm);
    mr_drop(&cm);
}

/* The initiator's 8-byte writes race the target's dat_lmr_free: once the free returns, the
 * target's memory never changes again (the free waits for a write that passed the key check;
 * a later one finds the key withdrawn and fails at the target). */
struct racer {
    struct pair *p;
    struct mr *cm, *sm;
    volatile int stop;
    unsigned long done;
    unsigned status;
};

static void *race_writes(void *arg)
{
    struct racer *r = arg;
    for (uint64_t v = 1; !r->stop; v++) {
        memcpy(r->cm->buf, &v, 8);
        DAT_LMR_TRIPLET l = lt(r->cm, 0, 8);
        DAT_RMR_TRIPLET t = rt(r->sm, 512, 8);
        DAT_DTO_COMPLETION_EVENT_DATA d;
        if (dat_ep_post_rdma_write(r->p->ce, 1, &l, ck(v), &t, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
            break;
        DAT_EVENT ev;
        DAT_COUNT nmore;
        if (dat_evd_wait(r->p->c.req, 5000000, 1, &ev, &nmore) != DAT_SUCCESS)
            break;
        d = ev.event_data.dto_completion_event_data;
        if (d.status != DAT_DTO_SUCCESS) {
            r->status = d.status;
            break;
        }
        r->done++;
    }
    return NULL;
}

void case_shm_small_revoke_race(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    struct racer r = {&p, &cm, &sm, 0, 0, 0};
    pthread_t t;
    int started = 0;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 64) || !mr_make_shared(&p.s, p.s.pz, 65536, PRIV_ALL, &sm) ||
        !mr_make_shared(&p.c, p.c.pz, 65536, PRIV_ALL, &cm))
        goto out;
    if (!EXPECT(pthread_create(&t, NULL, race_writes, &r) == 0, "pthread_create failed"))
        goto out;
    started = 1;
    /* let writes flow, then free the target's LMR under them */
    double until = dx_now() + 2.0;
    while (r.done < 2000 && dx_now() < until)
        dx_sleep_ms(1);
    EXPECT(r.done > 0, "no write completed before the free");
    if (!EXPECT_RC(dat_lmr_free(sm.h), DAT_SUCCESS))
        goto out;
    sm.h = DAT_HANDLE_NULL;
    uint64_t snap;
    memcpy(&snap, sm.buf + 512, 8);
    dx_sleep_ms(200);
    uint64_t later;
    memcpy(&later, sm.buf + 512, 8);
    EXPECT(later == snap, "the target's memory changed after dat_lmr_free returned: %llu -> %llu",
           (unsigned long long)snap, (unsigned long long)later);
out:
    r.stop = 1;
    if (started) {
        pthread_join(t, NULL);
        EXPECT(r.status == 0 || r.status == DAT_DTO_ERR_REMOTE_ACCESS || r.status == DAT_DTO_ERR_FLUSHED,
               "a racing write completed with status %u", r.status);
    }
    pair_down(&p);
    mr_drop(&sm);
    mr_drop(&cm);
}
