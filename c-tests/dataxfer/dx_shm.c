/* Registrations in shared memory (a memfd sealed against shrinking, mapped shared): on one host
 * dat2-soft copies between the two processes' files instead of calling process_vm_*, for RDMA
 * writes done by the initiator, for writes and sends the target copies, with RDMA reads as
 * before. The same rules hold as for any memory: data lands exactly where the keys say, in
 * order, and a bad remote access touches nothing. On other IAs (and with DAT2_SOFT_CMA=0) the
 * same cases check the data only. */
#include "dx.h"

#include <stdlib.h>

#include "dx_cases.h"

#define BIG (1u << 20)

static int path_expected(void)
{
    const char *cma = getenv("DAT2_SOFT_CMA");
    return dx_on_soft_device() && !(cma && strcmp(cma, "0") == 0) &&
           !(getenv("DAT2_SOFT_SHM") && strcmp(getenv("DAT2_SOFT_SHM"), "0") == 0);
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
    if (!pair_up(&p, dx_port(0), NULL, NULL, 64) || !mr_make_shared(&p.s, p.s.pz, 2 * BIG, PRIV_ALL, &sm) ||
        !mr_make_shared(&p.c, p.c.pz, 2 * BIG, PRIV_ALL, &cm) || !mr_make(&p.s, p.s.pz, BIG, PRIV_ALL, &hm))
        goto out;
    int registered = dx_shm_mappings();
    if (path_expected())
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
    if (path_expected())
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
    if (path_expected())
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

/* A bad remote access with shared memory at both ends: REMOTE_ACCESS, and the target's file is
 * untouched. */
static void shm_remote_error(int kind)
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
    DAT_LMR_TRIPLET l = lt(&cm, 0, 131072);
    DAT_RMR_TRIPLET r = rt(&sm, kind == 0 ? 3 * 65536 : 0, 131072);
    if (kind == 1) {
        if (!EXPECT_RC(dat_lmr_free(sm.h), DAT_SUCCESS))
            goto out;
        sm.h = DAT_HANDLE_NULL;
    }
    if (EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.req, &d))
        EXPECT(d.status == DAT_DTO_ERR_REMOTE_ACCESS, "%s: write completed with status %u, expected %u", names[kind],
               (unsigned)d.status, (unsigned)DAT_DTO_ERR_REMOTE_ACCESS);
    EXPECT_CONN_END(p.c.conn, WAIT_MS, "initiator");
    EXPECT(memcmp(snap, sm.buf, sm.alloc) == 0, "%s: the target's memory changed", names[kind]);
out:
    free(snap);
    pair_down(&p);
    mr_drop(&sm);
    mr_drop(&cm);
}

void case_shm_rkey_bounds(void) { shm_remote_error(0); }
void case_shm_rkey_freed(void) { shm_remote_error(1); }
void case_shm_rkey_no_write(void) { shm_remote_error(2); }
