/*
 * Memory registration on the built-in dat2-soft provider: PZs, LMRs of the three
 * memory types, queries, frees, the sync calls, RMRs, registration reuse, threads,
 * scale and IA teardown.
 *
 *   memtest list     print the case names, one a line
 *   memtest NAME     run one case; prints "PASS memory:NAME", "FAIL memory:NAME why"
 *                    or "SKIP memory:NAME why"
 *   memtest all      run every case in this one process (for development)
 *
 * (the runner of c-tests/common/harness.c). Only a case's first failed check is printed, in
 * its verdict; MEMTEST_VERBOSE=1 prints each one as a "# line N: ..." line.
 *
 * Every case opens its own IA on dat2-soft; run.sh starts one process per case so that
 * a crash is reported against the case that caused it. With DAT2_TEST_IA set, the cases run
 * on that IA instead (say dat2-verbs-rxe0-1 in the VM of tests/vm), and the few that check
 * facts of the soft device alone are skipped.
 */
#define _GNU_SOURCE
#include <dat2/udat.h>

#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ---- exact codes the rules name --------------------------------------------- */

#define RC_HANDLE_IA 0x8005000bu
#define RC_HANDLE_EP 0x8005000cu
#define RC_HANDLE_LMR 0x8005000du
#define RC_HANDLE_RMR 0x8005000eu
#define RC_HANDLE_PZ 0x8005000fu
#define RC_HANDLE_PSP 0x80050010u
#define RC_HANDLE_CNO 0x80050013u
#define RC_HANDLE_EVD 0x80050015u
#define RC_ARG2 0x80060026u
#define RC_ARG3 0x80060027u
/* A bad segment list of dat_lmr_sync_rdma_read/_write: DAT_INVALID_PARAMETER | DAT_INVALID_ARG2
 * (the segments are the 2nd argument). The brief wrote "0x80060027 (ARG2)"; 0x80060027 is
 * ARG3, so it contradicts itself: we follow the argument position, as for every other code. */
#define RC_SYNC_BAD 0x80060026u
#define RC_ARG4 0x80060028u
#define RC_ARG6 0x8006002au
#define RC_ARG7 0x8006002bu
#define RC_ARG8 0x8006002cu
#define RC_IA_IN_USE 0x80070050u
#define RC_LMR_IN_USE 0x80070051u
#define RC_PZ_IN_USE 0x80070053u
#define RC_LENGTH 0x80080000u

#define SOFT_IA "dat2-soft"
#define REMOTE_BITS 0x62u /* remote read, remote write, remote atomic */

/* ---- small helpers -------------------------------------------------------- */

/* The IA under test: DAT2_TEST_IA when set, else dat2-soft. */
static char *test_ia(void)
{
    static char soft[] = SOFT_IA;
    char *name = getenv("DAT2_TEST_IA");
    return name && *name ? name : soft;
}

/* Whether the IA under test is the soft device (cases about its own facts need it). */
static int on_soft_device(void)
{
    return strcmp(test_ia(), SOFT_IA) == 0;
}

static DAT_RETURN open_ia_ts(DAT_IA_HANDLE *ia, DAT_BOOLEAN thread_safe)
{
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    return dat_ia_openv(test_ia(), 8, &async_evd, ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, thread_safe);
}

/* Opens an IA and a PZ; on failure records it and returns 0. */
static int setup(DAT_IA_HANDLE *ia, DAT_PZ_HANDLE *pz)
{
    *ia = DAT_HANDLE_NULL;
    if (!EXPECT_RC(open_ia_ts(ia, DAT_FALSE), DAT_SUCCESS))
        return 0;
    if (pz && !EXPECT_RC(dat_pz_create(*ia, pz), DAT_SUCCESS))
        return 0;
    return 1;
}

static void teardown(DAT_IA_HANDLE ia)
{
    if (ia != DAT_HANDLE_NULL)
        EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

struct lmr_out {
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN rlen;
    DAT_VADDR raddr;
};

static DAT_RETURN lmr_va(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *addr, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv,
                         DAT_VA_TYPE va, struct lmr_out *o)
{
    DAT_REGION_DESCRIPTION r;
    memset(&r, 0, sizeof r);
    r.for_va = addr;
    o->lmr = DAT_HANDLE_NULL;
    o->lctx = 0;
    o->rctx = 0xfeedf00du; /* a pattern: the create must overwrite it */
    o->rlen = 0;
    o->raddr = 0;
    return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, len, pz, priv, va, &o->lmr, &o->lctx, &o->rctx, &o->rlen,
                          &o->raddr);
}

static DAT_RETURN lmr_of_lmr(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_LMR_HANDLE original, DAT_VLEN len,
                             DAT_MEM_PRIV_FLAGS priv, struct lmr_out *o)
{
    DAT_REGION_DESCRIPTION r;
    memset(&r, 0, sizeof r);
    r.for_lmr_handle = original;
    o->lmr = DAT_HANDLE_NULL;
    o->lctx = 0;
    o->rctx = 0xfeedf00du;
    o->rlen = 0;
    o->raddr = 0;
    return dat_lmr_create(ia, DAT_MEM_TYPE_LMR, r, len, pz, priv, DAT_VA_TYPE_VA, &o->lmr, &o->lctx, &o->rctx,
                          &o->rlen, &o->raddr);
}

static DAT_RETURN lmr_shared(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *addr, char (*cookie)[DAT_LMR_COOKIE_SIZE],
                             DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv, struct lmr_out *o)
{
    DAT_REGION_DESCRIPTION r;
    memset(&r, 0, sizeof r);
    r.for_shared_memory.virtual_address = addr;
    r.for_shared_memory.shared_memory_id = cookie;
    o->lmr = DAT_HANDLE_NULL;
    o->lctx = 0;
    o->rctx = 0xfeedf00du;
    o->rlen = 0;
    o->raddr = 0;
    return dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, r, len, pz, priv, DAT_VA_TYPE_VA, &o->lmr, &o->lctx,
                          &o->rctx, &o->rlen, &o->raddr);
}

/* dat_lmr_sync_rdma_read and _write on one segment; both must give `want`. */
static int sync_one(int line, DAT_IA_HANDLE ia, DAT_LMR_CONTEXT lctx, void *addr, DAT_SEG_LENGTH len, DAT_RETURN want)
{
    DAT_LMR_TRIPLET t;
    memset(&t, 0, sizeof t);
    t.lmr_context = lctx;
    t.virtual_address = (DAT_VADDR)(uintptr_t)addr;
    t.segment_length = len;
    int ok = harness_expect_code(line, "dat_lmr_sync_rdma_read(one segment)", dat_lmr_sync_rdma_read(ia, &t, 1), want);
    ok &= harness_expect_code(line, "dat_lmr_sync_rdma_write(one segment)", dat_lmr_sync_rdma_write(ia, &t, 1), want);
    return ok;
}
#define SYNC_ONE(ia, lctx, addr, len, want) sync_one(__LINE__, ia, lctx, addr, len, want)

static void *map_pages(size_t n, int prot)
{
    void *p = mmap(NULL, n * (size_t)sysconf(_SC_PAGESIZE), prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Returns the number of values that occur more than once in v[0..n) (sorts v). */
static size_t duplicates(uint32_t *v, size_t n)
{
    size_t d = 0;
    qsort(v, n, sizeof *v, cmp_u32);
    for (size_t i = 1; i < n; i++)
        d += v[i] == v[i - 1];
    return d;
}

/* ---- IA attributes ---------------------------------------------------------- */

static void case_ia_address(void)
{
    DAT_IA_HANDLE ia;
    DAT_IA_ATTR attr;
    if (!setup(&ia, NULL))
        return;
    memset(&attr, 0, sizeof attr);
    if (EXPECT_RC(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), DAT_SUCCESS)) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)attr.ia_address_ptr;
        if (EXPECT(sin != NULL, "ia_address_ptr is NULL")) {
            EXPECT(sin->sin_family == AF_INET, "ia_address family %d, expected AF_INET", sin->sin_family);
            EXPECT(sin->sin_addr.s_addr != 0, "ia_address is 0.0.0.0");
            /* the soft device's default address; another device has its own */
            if (on_soft_device())
                EXPECT(sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK), "ia_address is %s, expected 127.0.0.1",
                       inet_ntoa(sin->sin_addr));
        }
    }
    teardown(ia);
}

static void case_ia_mem_types(void)
{
    DAT_IA_HANDLE ia;
    DAT_PROVIDER_ATTR pa;
    if (!setup(&ia, NULL))
        return;
    memset(&pa, 0, sizeof pa);
    if (EXPECT_RC(dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pa), DAT_SUCCESS)) {
        DAT_MEM_TYPE want = DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL;
        EXPECT(pa.lmr_mem_types_supported == want, "lmr_mem_types_supported 0x%x, expected 0x%x",
               (unsigned)pa.lmr_mem_types_supported, (unsigned)want);
        EXPECT(want == 3, "VIRTUAL|LMR|SHARED_VIRTUAL is 0x%x, expected 3", (unsigned)want);
    }
    teardown(ia);
}

static void thread_safe_case(DAT_BOOLEAN ts)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_PROVIDER_ATTR pa;
    if (!EXPECT_RC(open_ia_ts(&ia, ts), DAT_SUCCESS))
        return;
    memset(&pa, 0x5a, sizeof pa);
    if (EXPECT_RC(dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_IS_THREAD_SAFE, &pa), DAT_SUCCESS))
        EXPECT(pa.is_thread_safe == ts, "is_thread_safe %d, opened with %d", (int)pa.is_thread_safe, (int)ts);
    /* the IA works either way */
    DAT_PZ_HANDLE pz;
    if (EXPECT_RC(dat_pz_create(ia, &pz), DAT_SUCCESS))
        EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
}

static void case_ia_thread_safe_false(void) { thread_safe_case(DAT_FALSE); }
static void case_ia_thread_safe_true(void) { thread_safe_case(DAT_TRUE); }

/* ---- rule 1: PZ ----------------------------------------------------------- */

static void case_pz_create_query_free(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_PZ_PARAM p;
    if (!setup(&ia, &pz))
        return;
    EXPECT((uintptr_t)ia > 0 && (uintptr_t)ia < 4096, "IA handle %p is not a small integer", ia);
    memset(&p, 0x5a, sizeof p);
    if (EXPECT_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &p), DAT_SUCCESS))
        EXPECT(p.ia_handle == ia, "pz_query ia_handle %p, expected the consumer's %p", p.ia_handle, ia);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz), RC_HANDLE_PZ);
    EXPECT_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &p), RC_HANDLE_PZ);
    EXPECT_RC(dat_pz_free(DAT_HANDLE_NULL), RC_HANDLE_PZ);
    teardown(ia);
}

static void case_pz_free_in_use_lmr(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    static char buf[4096];
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &o), DAT_SUCCESS)) {
        EXPECT_RC(dat_pz_free(pz), RC_PZ_IN_USE);
        EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_pz_free_in_use_rmr(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_RMR_HANDLE rmr;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(dat_rmr_create(pz, &rmr), DAT_SUCCESS)) {
        EXPECT_RC(dat_pz_free(pz), RC_PZ_IN_USE);
        EXPECT_RC(dat_rmr_free(rmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_pz_free_in_use_ep(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE dto = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &dto), DAT_SUCCESS) &&
        EXPECT_RC(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), DAT_SUCCESS) &&
        EXPECT_RC(dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep), DAT_SUCCESS)) {
        EXPECT_RC(dat_pz_free(pz), RC_PZ_IN_USE);
        EXPECT_RC(dat_ep_free(ep), DAT_SUCCESS);
        EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    }
    teardown(ia);
}

/* Every kind of user at once: the PZ frees only after the last is gone. */
static void case_pz_free_in_use_mixed(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_RMR_HANDLE rmr;
    struct lmr_out a, b;
    static char buf[8192];
    if (!setup(&ia, &pz))
        return;
    if (!EXPECT_RC(lmr_va(ia, pz, buf, 4096, 0x11, DAT_VA_TYPE_VA, &a), DAT_SUCCESS) ||
        !EXPECT_RC(lmr_va(ia, pz, buf + 4096, 4096, 0x33, DAT_VA_TYPE_VA, &b), DAT_SUCCESS) ||
        !EXPECT_RC(dat_rmr_create(pz, &rmr), DAT_SUCCESS)) {
        teardown(ia);
        return;
    }
    EXPECT_RC(dat_pz_free(pz), RC_PZ_IN_USE);
    EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz), RC_PZ_IN_USE);
    EXPECT_RC(dat_rmr_free(rmr), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz), RC_PZ_IN_USE);
    EXPECT_RC(dat_lmr_free(b.lmr), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 2: dat_lmr_create VIRTUAL ----------------------------------------- */

static void case_lmr_privilege_combinations(void)
{
    static const DAT_MEM_PRIV_FLAGS bits[5] = {0x01, 0x02, 0x10, 0x20, 0x40};
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    if (!setup(&ia, &pz))
        return;
    for (unsigned combo = 0; combo < 32; combo++) {
        DAT_MEM_PRIV_FLAGS priv = 0;
        for (int i = 0; i < 5; i++)
            if (combo & (1u << i))
                priv |= bits[i];
        /* an unaligned sub-range, so that "cover the request" means something */
        char *addr = buf + 100 + combo;
        DAT_VLEN len = 1000 + combo;
        struct lmr_out o;
        if (!EXPECT_RC(lmr_va(ia, pz, addr, len, priv, DAT_VA_TYPE_VA, &o), DAT_SUCCESS))
            continue;
        EXPECT(o.lctx != 0, "privileges 0x%x: lmr_context is 0", (unsigned)priv);
        if (priv & REMOTE_BITS)
            EXPECT(o.rctx != 0 && o.rctx != 0xfeedf00du, "privileges 0x%x: rmr_context 0x%x, expected a key",
                   (unsigned)priv, (unsigned)o.rctx);
        else
            EXPECT(o.rctx == 0, "privileges 0x%x (local only): rmr_context 0x%x, expected 0", (unsigned)priv,
                   (unsigned)o.rctx);
        DAT_VADDR va = (DAT_VADDR)(uintptr_t)addr;
        EXPECT(o.raddr <= va && o.raddr + o.rlen >= va + len,
               "privileges 0x%x: registered [0x%llx,+0x%llx) does not cover [0x%llx,+0x%llx)", (unsigned)priv,
               (unsigned long long)o.raddr, (unsigned long long)o.rlen, (unsigned long long)va,
               (unsigned long long)len);
        DAT_LMR_PARAM p;
        memset(&p, 0, sizeof p);
        if (EXPECT_RC(dat_lmr_query(o.lmr, DAT_LMR_FIELD_ALL, &p), DAT_SUCCESS)) {
            EXPECT(p.mem_priv == priv, "query mem_priv 0x%x, created with 0x%x", (unsigned)p.mem_priv, (unsigned)priv);
            EXPECT(p.lmr_context == o.lctx && p.rmr_context == o.rctx,
                   "privileges 0x%x: query keys 0x%x/0x%x differ from create's 0x%x/0x%x", (unsigned)priv,
                   (unsigned)p.lmr_context, (unsigned)p.rmr_context, (unsigned)o.lctx, (unsigned)o.rctx);
        }
        EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* Optional out-pointers may be NULL. */
static void case_lmr_optional_outputs_null(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_REGION_DESCRIPTION r;
    if (!setup(&ia, &pz))
        return;
    memset(&r, 0, sizeof r);
    r.for_va = buf;
    if (EXPECT_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                                 &lmr, NULL, NULL, NULL, NULL),
                  DAT_SUCCESS))
        EXPECT_RC(dat_lmr_free(lmr), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_length_zero(void)
{
    static char buf[64];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    EXPECT_RC(lmr_va(ia, pz, buf, 0, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &o), RC_LENGTH);
    /* dapltest mem case 2: NULL address and length 0 */
    EXPECT_RC(lmr_va(ia, pz, NULL, 0, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &o), RC_LENGTH);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_bad_mem_type(void)
{
    static char buf[64];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN rlen;
    DAT_VADDR raddr;
    DAT_REGION_DESCRIPTION r;
    if (!setup(&ia, &pz))
        return;
    memset(&r, 0, sizeof r);
    r.for_va = buf;
    EXPECT_RC(dat_lmr_create(ia, (DAT_MEM_TYPE)7, r, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lctx,
                             &rctx, &rlen, &raddr),
              RC_ARG2);
    EXPECT_RC(dat_lmr_create(ia, (DAT_MEM_TYPE)3, r, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lctx,
                             &rctx, &rlen, &raddr),
              RC_ARG2);
    EXPECT(lmr == DAT_HANDLE_NULL, "a failed create wrote an LMR handle");
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_bad_privileges(void)
{
    static const DAT_MEM_PRIV_FLAGS bad[] = {0x04, 0x08, 0x80, 0x100, 0x37, 0x80000000u};
    static char buf[64];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        DAT_RETURN rc = lmr_va(ia, pz, buf, sizeof buf, bad[i], DAT_VA_TYPE_VA, &o);
        EXPECT((rc & 0x3fff0000u) == 0x00060000u, "privileges 0x%x: type of 0x%08x is not DAT_INVALID_PARAMETER",
               (unsigned)bad[i], (unsigned)rc);
        EXPECT(rc == RC_ARG6, "privileges 0x%x: returned 0x%08x, expected 0x%08x", (unsigned)bad[i], (unsigned)rc,
               RC_ARG6);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_bad_va_type(void)
{
    static char buf[64];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, DAT_MEM_PRIV_ALL_FLAG, (DAT_VA_TYPE)5, &o), RC_ARG7);
    EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, DAT_MEM_PRIV_ALL_FLAG, (DAT_VA_TYPE)2, &o), RC_ARG7);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_null_handle_out(void)
{
    static char buf[64];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN rlen;
    DAT_VADDR raddr;
    DAT_REGION_DESCRIPTION r;
    if (!setup(&ia, &pz))
        return;
    memset(&r, 0, sizeof r);
    r.for_va = buf;
    EXPECT_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, NULL,
                             &lctx, &rctx, &rlen, &raddr),
              RC_ARG8);
    /* nothing was left registered: the PZ is free */
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_unmapped(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    long page = sysconf(_SC_PAGESIZE);
    if (!setup(&ia, &pz))
        return;
    char *p = map_pages(4, PROT_READ | PROT_WRITE);
    if (EXPECT(p != NULL, "mmap failed: %s", strerror(errno))) {
        munmap(p, 4 * (size_t)page);
        EXPECT_RC(lmr_va(ia, pz, p, 4 * (DAT_VLEN)page, 0x01, DAT_VA_TYPE_VA, &o), RC_ARG3);
        EXPECT_RC(lmr_va(ia, pz, p + 10, 100, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &o), RC_ARG3);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* The first pages mapped, the last one not. */
static void case_lmr_partly_unmapped(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    long page = sysconf(_SC_PAGESIZE);
    if (!setup(&ia, &pz))
        return;
    char *p = map_pages(3, PROT_READ | PROT_WRITE);
    if (EXPECT(p != NULL, "mmap failed: %s", strerror(errno))) {
        munmap(p + 2 * page, (size_t)page);
        EXPECT_RC(lmr_va(ia, pz, p, 3 * (DAT_VLEN)page, 0x01, DAT_VA_TYPE_VA, &o), RC_ARG3);
        EXPECT_RC(lmr_va(ia, pz, p + page, (DAT_VLEN)page + 1, 0x11, DAT_VA_TYPE_VA, &o), RC_ARG3);
        /* the mapped part alone registers */
        if (EXPECT_RC(lmr_va(ia, pz, p, 2 * (DAT_VLEN)page, 0x11, DAT_VA_TYPE_VA, &o), DAT_SUCCESS))
            EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
        munmap(p, 2 * (size_t)page);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_prot_none(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    long page = sysconf(_SC_PAGESIZE);
    if (!setup(&ia, &pz))
        return;
    char *p = map_pages(2, PROT_NONE);
    if (EXPECT(p != NULL, "mmap failed: %s", strerror(errno))) {
        EXPECT_RC(lmr_va(ia, pz, p, 2 * (DAT_VLEN)page, 0x01, DAT_VA_TYPE_VA, &o), RC_ARG3);
        EXPECT_RC(lmr_va(ia, pz, p + 1, 10, 0x33, DAT_VA_TYPE_VA, &o), RC_ARG3);
        munmap(p, 2 * (size_t)page);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_read_only(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    long page = sysconf(_SC_PAGESIZE);
    if (!setup(&ia, &pz))
        return;
    char *p = map_pages(2, PROT_READ);
    if (EXPECT(p != NULL, "mmap failed: %s", strerror(errno))) {
        static const DAT_MEM_PRIV_FLAGS writes[] = {0x10, 0x20, 0x11, 0x22, 0x33};
        for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++)
            EXPECT(lmr_va(ia, pz, p, 2 * (DAT_VLEN)page, writes[i], DAT_VA_TYPE_VA, &o) == RC_ARG3,
                   "read-only memory with privileges 0x%x: not 0x%08x", (unsigned)writes[i], RC_ARG3);
        static const DAT_MEM_PRIV_FLAGS reads[] = {0x00, 0x01, 0x02, 0x03};
        for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
            DAT_RETURN rc = lmr_va(ia, pz, p, 2 * (DAT_VLEN)page, reads[i], DAT_VA_TYPE_VA, &o);
            if (EXPECT(rc == DAT_SUCCESS, "read-only memory with privileges 0x%x: 0x%08x, expected success",
                       (unsigned)reads[i], (unsigned)rc))
                EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
        }
        /* a shared registration of read-only memory: a later LMR asking for write is refused */
        char c[DAT_LMR_COOKIE_SIZE];
        struct lmr_out s1, s2;
        memset(c, 'r', sizeof c);
        if (EXPECT_RC(lmr_shared(ia, pz, p, &c, 2 * (DAT_VLEN)page, 0x03, &s1), DAT_SUCCESS)) {
            if (!EXPECT_RC(lmr_shared(ia, pz, p, &c, 2 * (DAT_VLEN)page, 0x11, &s2), RC_ARG3) && s2.lmr)
                dat_lmr_free(s2.lmr);
            EXPECT_RC(dat_lmr_free(s1.lmr), DAT_SUCCESS);
        }
        munmap(p, 2 * (size_t)page);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* The same buffer first registered read-only, then made writable: the write privilege
 * must then be accepted (the library must not trust a stale view of the mappings). */
static void case_lmr_mprotect_change(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    long page = sysconf(_SC_PAGESIZE);
    if (!setup(&ia, &pz))
        return;
    char *p = map_pages(1, PROT_READ | PROT_WRITE);
    if (EXPECT(p != NULL, "mmap failed: %s", strerror(errno))) {
        if (EXPECT_RC(lmr_va(ia, pz, p, (DAT_VLEN)page, 0x11, DAT_VA_TYPE_VA, &o), DAT_SUCCESS))
            EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
        mprotect(p, (size_t)page, PROT_READ);
        if (!EXPECT_RC(lmr_va(ia, pz, p, (DAT_VLEN)page, 0x11, DAT_VA_TYPE_VA, &o), RC_ARG3) && o.lmr)
            dat_lmr_free(o.lmr);
        mprotect(p, (size_t)page, PROT_READ | PROT_WRITE);
        if (EXPECT_RC(lmr_va(ia, pz, p, (DAT_VLEN)page, 0x11, DAT_VA_TYPE_VA, &o), DAT_SUCCESS))
            EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
        munmap(p, (size_t)page);
        if (!EXPECT_RC(lmr_va(ia, pz, p, (DAT_VLEN)page, 0x01, DAT_VA_TYPE_VA, &o), RC_ARG3) && o.lmr)
            dat_lmr_free(o.lmr);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_null_pz(void)
{
    static char buf[64];
    DAT_IA_HANDLE ia;
    struct lmr_out o;
    if (!setup(&ia, NULL))
        return;
    EXPECT_RC(lmr_va(ia, DAT_HANDLE_NULL, buf, sizeof buf, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &o), RC_HANDLE_PZ);
    teardown(ia);
}

static void case_lmr_null_ia(void)
{
    static char buf[64];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    EXPECT_RC(lmr_va(DAT_HANDLE_NULL, pz, buf, sizeof buf, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &o), RC_HANDLE_IA);
    /* an unused small integer and a pointer-sized value are no IAs either */
    EXPECT_RC(lmr_va((DAT_IA_HANDLE)(uintptr_t)40, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_IA);
    EXPECT_RC(lmr_va((DAT_IA_HANDLE)pz, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_IA);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_bad_pz_handles(void)
{
    static char buf[4096];
    static uint64_t garbage[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz, stale;
    struct lmr_out o, l;
    if (!setup(&ia, &pz))
        return;
    if (!EXPECT_RC(dat_pz_create(ia, &stale), DAT_SUCCESS) || !EXPECT_RC(dat_pz_free(stale), DAT_SUCCESS)) {
        teardown(ia);
        return;
    }
    EXPECT_RC(lmr_va(ia, stale, buf, 64, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_PZ);
    EXPECT_RC(lmr_va(ia, (DAT_PZ_HANDLE)(uintptr_t)0x00dead00u, buf, 64, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_PZ);
    EXPECT_RC(lmr_va(ia, (DAT_PZ_HANDLE)garbage, buf, 64, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_PZ);
    EXPECT_RC(lmr_va(ia, (DAT_PZ_HANDLE)ia, buf, 64, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_PZ);
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &l), DAT_SUCCESS)) {
        EXPECT_RC(lmr_va(ia, (DAT_PZ_HANDLE)l.lmr, buf, 64, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_PZ);
        EXPECT_RC(dat_lmr_free(l.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* A PZ of another IA is not a PZ of this one. */
static void case_lmr_pz_of_other_ia(void)
{
    static char buf[64];
    DAT_IA_HANDLE ia, ia2;
    DAT_PZ_HANDLE pz, pz2;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    if (setup(&ia2, &pz2)) {
        EXPECT_RC(lmr_va(ia, pz2, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_PZ);
        teardown(ia2);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

#define NKEYS 1000
static void case_lmr_keys_unpredictable(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    static struct lmr_out o[NKEYS];
    static uint32_t lk[NKEYS], rk[NKEYS], both[2 * NKEYS];
    char *buf = malloc(NKEYS * 16);
    size_t made = 0;
    if (!setup(&ia, &pz) || !buf) {
        free(buf);
        return;
    }
    for (; made < NKEYS; made++)
        if (!EXPECT_RC(lmr_va(ia, pz, buf + 16 * made, 16, 0x33, DAT_VA_TYPE_VA, &o[made]), DAT_SUCCESS))
            break;
    size_t sequential = 0, zero = 0;
    for (size_t i = 0; i < made; i++) {
        lk[i] = o[i].lctx;
        rk[i] = o[i].rctx;
        both[2 * i] = o[i].lctx;
        both[2 * i + 1] = o[i].rctx;
        zero += o[i].lctx == 0 || o[i].rctx == 0;
        if (i > 0) {
            sequential += lk[i] == lk[i - 1] + 1 || lk[i] + 1 == lk[i - 1];
            sequential += rk[i] == rk[i - 1] + 1 || rk[i] + 1 == rk[i - 1];
        }
    }
    /* Constant strides of any size are as guessable as +1: a counter repeats its stride at
     * nearly every step. A key with only 8 random bits (rxe: a table index, shifted left by 8,
     * or'ed with a random byte) repeats it by chance once in 256 steps: about 4 times in 1000,
     * 5 or more in about a third of the runs. So the bound is made/32 (31 here), far above
     * chance for 8 random bits and far below any counter. */
    size_t same_stride = 0;
    for (size_t i = 2; i < made; i++)
        same_stride += lk[i] - lk[i - 1] == lk[i - 1] - lk[i - 2];
    EXPECT(zero == 0, "%zu LMRs got a zero key", zero);
    /* rxe's key is its table index shifted left by 8 or'ed with a random byte, so index n with
     * byte 0xff followed by index n+1 with byte 0x00 differs by one by chance: about once in
     * 65 runs of 1000 keys, counted twice because its lkey is its rkey. A counter differs by
     * one at nearly every step, so a bound of made/100 keeps every counter out. */
    EXPECT(sequential < made / 100 + 1, "%zu consecutive key pairs differ by one", sequential);
    EXPECT(same_stride < made / 32 + 1, "%zu consecutive lmr_context steps repeat the previous stride", same_stride);
    size_t d = duplicates(lk, made);
    EXPECT(d == 0, "%zu duplicate lmr_contexts among %zu live LMRs", d, made);
    d = duplicates(rk, made);
    EXPECT(d == 0, "%zu duplicate rmr_contexts among %zu live LMRs", d, made);
    /* The soft device draws lkeys and rkeys apart; a verbs MR has one key for both on some
     * devices (rxe), which is no weaker: the rkey is what a peer must not guess. */
    d = duplicates(both, 2 * made);
    EXPECT(d == 0 || !on_soft_device(), "%zu values used both as an lmr_context and an rmr_context", d);
    for (size_t i = 0; i < made; i++)
        EXPECT_RC(dat_lmr_free(o[i].lmr), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
    free(buf);
}

/* ---- rule 3: DAT_MEM_TYPE_LMR ------------------------------------------------ */

static void case_lmr_over_lmr(void)
{
    static char buf[8192];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz1, pz2;
    struct lmr_out orig, a, b;
    if (!setup(&ia, &pz1) || !EXPECT_RC(dat_pz_create(ia, &pz2), DAT_SUCCESS)) {
        teardown(ia);
        return;
    }
    if (!EXPECT_RC(lmr_va(ia, pz1, buf + 100, 5000, 0x11, DAT_VA_TYPE_VA, &orig), DAT_SUCCESS)) {
        teardown(ia);
        return;
    }
    EXPECT(orig.rctx == 0, "local-only original got rmr_context 0x%x", (unsigned)orig.rctx);
    /* length 0: ignored */
    if (EXPECT_RC(lmr_of_lmr(ia, pz2, orig.lmr, 0, 0x33, &a), DAT_SUCCESS)) {
        EXPECT(a.rlen == orig.rlen && a.raddr == orig.raddr,
               "LMR over LMR registered [0x%llx,+0x%llx), the original [0x%llx,+0x%llx)", (unsigned long long)a.raddr,
               (unsigned long long)a.rlen, (unsigned long long)orig.raddr, (unsigned long long)orig.rlen);
        EXPECT(a.lctx != 0 && a.lctx != orig.lctx, "lmr_context 0x%x, the original's 0x%x", (unsigned)a.lctx,
               (unsigned)orig.lctx);
        EXPECT(a.rctx != 0 && a.rctx != 0xfeedf00du, "remote privileges asked but rmr_context 0x%x", (unsigned)a.rctx);
        DAT_LMR_PARAM p;
        memset(&p, 0, sizeof p);
        if (EXPECT_RC(dat_lmr_query(a.lmr, DAT_LMR_FIELD_ALL, &p), DAT_SUCCESS)) {
            EXPECT(p.pz_handle == pz2, "query pz_handle %p, expected the new PZ %p (original's %p)", p.pz_handle, pz2,
                   pz1);
            EXPECT(p.mem_type == DAT_MEM_TYPE_LMR, "query mem_type %d, expected DAT_MEM_TYPE_LMR", (int)p.mem_type);
            EXPECT(p.mem_priv == 0x33, "query mem_priv 0x%x, expected 0x33", (unsigned)p.mem_priv);
            EXPECT(p.lmr_context == a.lctx && p.rmr_context == a.rctx, "query keys differ from create's");
            EXPECT(p.registered_size == orig.rlen && p.registered_address == orig.raddr,
                   "query registered range differs from the original's");
            EXPECT(p.ia_handle == ia, "query ia_handle %p, expected %p", p.ia_handle, ia);
        }
        /* each key covers the original's memory */
        SYNC_ONE(ia, a.lctx, buf + 100, 5000, DAT_SUCCESS);
        SYNC_ONE(ia, orig.lctx, buf + 100, 5000, DAT_SUCCESS);
    }
    /* a wrong length: ignored too; local-only privileges give no rmr_context */
    if (EXPECT_RC(lmr_of_lmr(ia, pz2, orig.lmr, 123456789, 0x01, &b), DAT_SUCCESS)) {
        EXPECT(b.rlen == orig.rlen && b.raddr == orig.raddr, "wrong length: registered range differs from original's");
        EXPECT(b.rctx == 0, "local-only LMR over LMR got rmr_context 0x%x", (unsigned)b.rctx);
        EXPECT(b.lctx != orig.lctx && b.lctx != a.lctx, "lmr_context 0x%x not distinct", (unsigned)b.lctx);
    }
    /* the derived LMRs hold the new PZ, the original the old one */
    EXPECT_RC(dat_pz_free(pz2), RC_PZ_IN_USE);
    EXPECT_RC(dat_pz_free(pz1), RC_PZ_IN_USE);
    EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    EXPECT_RC(dat_lmr_free(b.lmr), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz2), DAT_SUCCESS);
    EXPECT_RC(dat_lmr_free(orig.lmr), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz1), DAT_SUCCESS);
    teardown(ia);
}

/* Freeing the original does not revoke a derived LMR's own key. */
static void case_lmr_over_lmr_outlives_original(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out orig, a;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &orig), DAT_SUCCESS) &&
        EXPECT_RC(lmr_of_lmr(ia, pz, orig.lmr, 0, 0x11, &a), DAT_SUCCESS)) {
        EXPECT_RC(dat_lmr_free(orig.lmr), DAT_SUCCESS);
        SYNC_ONE(ia, orig.lctx, buf, 16, RC_SYNC_BAD);
        SYNC_ONE(ia, a.lctx, buf, sizeof buf, DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_over_freed_lmr(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out orig, a;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &orig), DAT_SUCCESS)) {
        EXPECT_RC(dat_lmr_free(orig.lmr), DAT_SUCCESS);
        EXPECT_RC(lmr_of_lmr(ia, pz, orig.lmr, 0, 0x11, &a), RC_HANDLE_LMR);
    }
    EXPECT_RC(lmr_of_lmr(ia, pz, DAT_HANDLE_NULL, 0, 0x11, &a), RC_HANDLE_LMR);
    EXPECT_RC(lmr_of_lmr(ia, pz, (DAT_LMR_HANDLE)pz, 0, 0x11, &a), RC_HANDLE_LMR);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 4: SHARED_VIRTUAL --------------------------------------------------- */

static void fill_cookie(char (*c)[DAT_LMR_COOKIE_SIZE], const char *prefix, size_t prefix_len, char tail)
{
    memset(*c, tail, DAT_LMR_COOKIE_SIZE);
    memcpy(*c, prefix, prefix_len);
}

static void case_shared_equal_cookies(void)
{
    static char buf[8192];
    char c1[DAT_LMR_COOKIE_SIZE], c2[DAT_LMR_COOKIE_SIZE];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz, pz2;
    struct lmr_out a, b;
    if (!setup(&ia, &pz) || !EXPECT_RC(dat_pz_create(ia, &pz2), DAT_SUCCESS)) {
        teardown(ia);
        return;
    }
    fill_cookie(&c1, "shared-region-one", 17, '#');
    memcpy(c2, c1, sizeof c1); /* equal bytes, another pointer */
    if (EXPECT_RC(lmr_shared(ia, pz, buf, &c1, sizeof buf, 0x11, &a), DAT_SUCCESS) &&
        EXPECT_RC(lmr_shared(ia, pz2, buf, &c2, sizeof buf, 0x33, &b), DAT_SUCCESS)) {
        EXPECT(a.lctx != 0 && b.lctx != 0 && a.lctx != b.lctx, "lmr_contexts 0x%x and 0x%x not distinct",
               (unsigned)a.lctx, (unsigned)b.lctx);
        EXPECT(a.rctx == 0, "local-only shared LMR got rmr_context 0x%x", (unsigned)a.rctx);
        EXPECT(b.rctx != 0 && b.rctx != 0xfeedf00du, "remote shared LMR got rmr_context 0x%x", (unsigned)b.rctx);
        SYNC_ONE(ia, a.lctx, buf, sizeof buf, DAT_SUCCESS);
        SYNC_ONE(ia, b.lctx, buf, sizeof buf, DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
        SYNC_ONE(ia, a.lctx, buf, 16, RC_SYNC_BAD);
        SYNC_ONE(ia, b.lctx, buf, sizeof buf, DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(b.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz2), DAT_SUCCESS);
    teardown(ia);
}

static void case_shared_cookie_bytes_after_nul(void)
{
    static char buf[16384];
    char a1[DAT_LMR_COOKIE_SIZE], a2[DAT_LMR_COOKIE_SIZE], b1[DAT_LMR_COOKIE_SIZE];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a, b, x;
    if (!setup(&ia, &pz))
        return;
    fill_cookie(&a1, "abc\0", 4, 'X');
    fill_cookie(&b1, "abc\0", 4, 'Y'); /* equal as C strings, different as 40 bytes */
    memcpy(a2, a1, sizeof a1);
    if (EXPECT_RC(lmr_shared(ia, pz, buf, &a1, 4096, 0x11, &a), DAT_SUCCESS)) {
        /* another region: any length goes */
        if (EXPECT_RC(lmr_shared(ia, pz, buf, &b1, 8192, 0x11, &b), DAT_SUCCESS))
            EXPECT_RC(dat_lmr_free(b.lmr), DAT_SUCCESS);
        /* the same region with another length */
        DAT_RETURN rc = lmr_shared(ia, pz, buf, &a2, 8192, 0x11, &x);
        EXPECT(rc == RC_ARG4, "equal cookie, other length: 0x%08x, expected 0x%08x", (unsigned)rc, RC_ARG4);
        if (rc == DAT_SUCCESS)
            dat_lmr_free(x.lmr);
        /* the same length is fine */
        if (EXPECT_RC(lmr_shared(ia, pz, buf, &a2, 4096, 0x11, &x), DAT_SUCCESS))
            EXPECT_RC(dat_lmr_free(x.lmr), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_shared_query_cookie(void)
{
    static char buf[4096];
    char c[DAT_LMR_COOKIE_SIZE], saved[DAT_LMR_COOKIE_SIZE];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a;
    if (!setup(&ia, &pz))
        return;
    for (int i = 0; i < DAT_LMR_COOKIE_SIZE; i++)
        c[i] = (char)(i * 7 + 1);
    c[5] = 0;
    memcpy(saved, c, sizeof c);
    if (EXPECT_RC(lmr_shared(ia, pz, buf, &c, sizeof buf, 0x33, &a), DAT_SUCCESS)) {
        memset(c, 0, sizeof c); /* the consumer may reuse its cookie buffer */
        DAT_LMR_PARAM p;
        memset(&p, 0, sizeof p);
        if (EXPECT_RC(dat_lmr_query(a.lmr, DAT_LMR_FIELD_ALL, &p), DAT_SUCCESS)) {
            const char *id = (const char *)p.region_desc.for_shared_memory.shared_memory_id;
            EXPECT(p.mem_type == DAT_MEM_TYPE_SHARED_VIRTUAL, "query mem_type %d", (int)p.mem_type);
            if (EXPECT(id != NULL, "shared_memory_id is NULL")) {
                EXPECT(id != c, "shared_memory_id is the consumer's own pointer");
                EXPECT(memcmp(id, saved, DAT_LMR_COOKIE_SIZE) == 0, "the reported cookie differs from the one given");
            }
            EXPECT(p.region_desc.for_shared_memory.virtual_address == buf, "shared virtual_address %p, expected %p",
                   p.region_desc.for_shared_memory.virtual_address, (void *)buf);
            EXPECT(p.length == sizeof buf, "query length %llu", (unsigned long long)p.length);
        }
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_shared_released_with_last(void)
{
    static char buf[16384];
    char c[DAT_LMR_COOKIE_SIZE];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a, b, x;
    if (!setup(&ia, &pz))
        return;
    fill_cookie(&c, "released-with-the-last", 22, 0);
    if (EXPECT_RC(lmr_shared(ia, pz, buf, &c, 4096, 0x11, &a), DAT_SUCCESS) &&
        EXPECT_RC(lmr_shared(ia, pz, buf, &c, 4096, 0x01, &b), DAT_SUCCESS)) {
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
        /* one LMR left: the registration and its length remain */
        DAT_RETURN rc = lmr_shared(ia, pz, buf, &c, 8192, 0x11, &x);
        EXPECT(rc == RC_ARG4, "one LMR left, other length: 0x%08x, expected 0x%08x", (unsigned)rc, RC_ARG4);
        if (rc == DAT_SUCCESS)
            dat_lmr_free(x.lmr);
        EXPECT_RC(dat_lmr_free(b.lmr), DAT_SUCCESS);
        /* none left: a new registration of any length */
        if (EXPECT_RC(lmr_shared(ia, pz, buf, &c, 8192, 0x11, &x), DAT_SUCCESS)) {
            EXPECT(x.rlen >= 8192, "registered_length %llu < 8192", (unsigned long long)x.rlen);
            EXPECT_RC(dat_lmr_free(x.lmr), DAT_SUCCESS);
        }
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_shared_null_cookie(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a;
    if (!setup(&ia, &pz))
        return;
    EXPECT_RC(lmr_shared(ia, pz, buf, NULL, sizeof buf, 0x11, &a), RC_ARG3);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 5: zero-based addressing -------------------------------------------- */

/* Whether the IA reports zb_supported false (Soft-iWARP: siw registers the virtual address
 * whatever iova it is given). */
static int zero_based_lacking(DAT_IA_HANDLE ia)
{
    DAT_IA_ATTR a;
    memset(&a, 0, sizeof a);
    return dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ZB_SUPPORTED, &a, 0, NULL) == DAT_SUCCESS && a.zb_supported == DAT_FALSE;
}

static void case_lmr_va_type_zb(void)
{
    /* page aligned: verbs keeps a region's page offset in its remote addresses, so only an
     * aligned region can start at remote address 0 (an unaligned one is refused, below) */
    static char buf[4096] __attribute__((aligned(4096)));
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out z, v;
    DAT_LMR_PARAM p;
    if (!setup(&ia, &pz))
        return;
    if (zero_based_lacking(ia)) {
        harness_note("the IA reports zb_supported false: a zero-based LMR must be refused");
        EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x33, DAT_VA_TYPE_ZB, &z), DAT_CLASS_ERROR | DAT_MODEL_NOT_SUPPORTED);
    } else if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x33, DAT_VA_TYPE_ZB, &z), DAT_SUCCESS)) {
        memset(&p, 0x5a, sizeof p);
        if (EXPECT_RC(dat_lmr_query(z.lmr, DAT_LMR_FIELD_VA_TYPE, &p), DAT_SUCCESS))
            EXPECT(p.va_type == DAT_VA_TYPE_ZB, "query va_type %d, expected DAT_VA_TYPE_ZB", (int)p.va_type);
        EXPECT_RC(dat_lmr_free(z.lmr), DAT_SUCCESS);
    }
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x33, DAT_VA_TYPE_VA, &v), DAT_SUCCESS)) {
        memset(&p, 0x5a, sizeof p);
        if (EXPECT_RC(dat_lmr_query(v.lmr, DAT_LMR_FIELD_VA_TYPE, &p), DAT_SUCCESS))
            EXPECT(p.va_type == DAT_VA_TYPE_VA, "query va_type %d, expected DAT_VA_TYPE_VA", (int)p.va_type);
        EXPECT_RC(dat_lmr_free(v.lmr), DAT_SUCCESS);
    }
    if (!on_soft_device()) {
        DAT_RETURN r = lmr_va(ia, pz, buf + 8, 64, 0x33, DAT_VA_TYPE_ZB, &z);
        EXPECT(r == DAT_SUCCESS || DAT_GET_TYPE(r) == DAT_MODEL_NOT_SUPPORTED, "unaligned zero-based LMR: 0x%08x",
               (unsigned)r);
        if (r == DAT_SUCCESS)
            EXPECT_RC(dat_lmr_free(z.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 6: dat_lmr_query -------------------------------------------------- */

struct field {
    DAT_LMR_PARAM_MASK bit;
    size_t off, size;
    const char *name;
};
#define FIELD(bit, member) {bit, offsetof(DAT_LMR_PARAM, member), sizeof(((DAT_LMR_PARAM *)0)->member), #member}
static const struct field lmr_fields[] = {
    FIELD(DAT_LMR_FIELD_IA_HANDLE, ia_handle),
    FIELD(DAT_LMR_FIELD_MEM_TYPE, mem_type),
    FIELD(DAT_LMR_FIELD_REGION_DESC, region_desc),
    FIELD(DAT_LMR_FIELD_LENGTH, length),
    FIELD(DAT_LMR_FIELD_PZ_HANDLE, pz_handle),
    FIELD(DAT_LMR_FIELD_MEM_PRIV, mem_priv),
    FIELD(DAT_LMR_FIELD_VA_TYPE, va_type),
    FIELD(DAT_LMR_FIELD_LMR_CONTEXT, lmr_context),
    FIELD(DAT_LMR_FIELD_RMR_CONTEXT, rmr_context),
    FIELD(DAT_LMR_FIELD_REGISTERED_SIZE, registered_size),
    FIELD(DAT_LMR_FIELD_REGISTERED_ADDRESS, registered_address),
};
#define NFIELDS (sizeof lmr_fields / sizeof lmr_fields[0])

/* Checks the fields `mask` selects against `want` and that every other byte still holds 0xa5. */
static void check_query_mask(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK mask, const DAT_LMR_PARAM *want)
{
    DAT_LMR_PARAM p;
    memset(&p, 0xa5, sizeof p);
    if (!harness_expect_code(__LINE__, "dat_lmr_query(mask)", dat_lmr_query(lmr, mask, &p), DAT_SUCCESS))
        return;
    const unsigned char *got = (const unsigned char *)&p, *exp = (const unsigned char *)want;
    unsigned char selected[sizeof p];
    memset(selected, 0, sizeof selected);
    for (size_t f = 0; f < NFIELDS; f++) {
        if (!(mask & lmr_fields[f].bit))
            continue;
        /* region_desc: only the member the memory type uses is meaningful (8 bytes for VA) */
        size_t cmp = lmr_fields[f].bit == DAT_LMR_FIELD_REGION_DESC ? sizeof(void *) : lmr_fields[f].size;
        memset(selected + lmr_fields[f].off, 1, lmr_fields[f].size);
        EXPECT(memcmp(got + lmr_fields[f].off, exp + lmr_fields[f].off, cmp) == 0, "mask 0x%x: field %s wrong",
               (unsigned)mask, lmr_fields[f].name);
    }
    for (size_t i = 0; i < sizeof p; i++)
        if (!selected[i] && got[i] != 0xa5) {
            harness_fail(__LINE__, "mask 0x%x: byte %zu (outside the fields asked for) was written", (unsigned)mask, i);
            break;
        }
}

static void case_lmr_query_mask(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    if (!EXPECT_RC(lmr_va(ia, pz, buf + 8, 1000, 0x33, DAT_VA_TYPE_VA, &o), DAT_SUCCESS)) {
        teardown(ia);
        return;
    }
    DAT_LMR_PARAM want;
    memset(&want, 0, sizeof want);
    want.ia_handle = ia;
    want.mem_type = DAT_MEM_TYPE_VIRTUAL;
    want.region_desc.for_va = buf + 8;
    want.length = 1000;
    want.pz_handle = pz;
    want.mem_priv = 0x33;
    want.va_type = DAT_VA_TYPE_VA;
    want.lmr_context = o.lctx;
    want.rmr_context = o.rctx;
    want.registered_size = o.rlen;
    want.registered_address = o.raddr;
    for (size_t f = 0; f < NFIELDS; f++)
        check_query_mask(o.lmr, lmr_fields[f].bit, &want);
    check_query_mask(o.lmr, 0, &want);
    check_query_mask(o.lmr, DAT_LMR_FIELD_IA_HANDLE | DAT_LMR_FIELD_LENGTH | DAT_LMR_FIELD_MEM_PRIV |
                                DAT_LMR_FIELD_RMR_CONTEXT | DAT_LMR_FIELD_REGISTERED_ADDRESS,
                     &want);
    check_query_mask(o.lmr, DAT_LMR_FIELD_ALL, &want);
    EXPECT((uintptr_t)ia < 4096, "IA handle %p is not a small integer", ia);
    EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_lmr_query_errors(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    DAT_LMR_PARAM p;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &o), DAT_SUCCESS)) {
        EXPECT_RC(dat_lmr_query(o.lmr, DAT_LMR_FIELD_ALL, NULL), RC_ARG3);
        EXPECT_RC(dat_lmr_query(o.lmr, (DAT_LMR_PARAM_MASK)0x800, &p), RC_ARG2);
        EXPECT_RC(dat_lmr_query(o.lmr, (DAT_LMR_PARAM_MASK)(DAT_LMR_FIELD_ALL | 0x1000), &p), RC_ARG2);
        EXPECT_RC(dat_lmr_query(o.lmr, (DAT_LMR_PARAM_MASK)0x80000000u, &p), RC_ARG2);
        EXPECT_RC(dat_lmr_query(DAT_HANDLE_NULL, DAT_LMR_FIELD_ALL, &p), RC_HANDLE_LMR);
        EXPECT_RC(dat_lmr_query((DAT_LMR_HANDLE)pz, DAT_LMR_FIELD_ALL, &p), RC_HANDLE_LMR);
        EXPECT_RC(dat_lmr_query((DAT_LMR_HANDLE)ia, DAT_LMR_FIELD_ALL, &p), RC_HANDLE_LMR);
        EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_query(o.lmr, DAT_LMR_FIELD_ALL, &p), RC_HANDLE_LMR);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 7: dat_lmr_free ----------------------------------------------------- */

static void case_lmr_double_free(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &o), DAT_SUCCESS)) {
        EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(o.lmr), RC_HANDLE_LMR);
    }
    EXPECT_RC(dat_lmr_free(DAT_HANDLE_NULL), RC_HANDLE_LMR);
    EXPECT_RC(dat_lmr_free((DAT_LMR_HANDLE)pz), RC_HANDLE_LMR);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* Two EPs of one IA connected over the soft device (loopback): what dat_rmr_bind needs. */
struct pair {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE dto_c, dto_s, conn_c, conn_s, cr;
    DAT_EP_HANDLE ep_c, ep_s;
    DAT_PSP_HANDLE psp;
};

#define WAIT_US 5000000u

/* Waits for one event on `evd` and checks its number; returns 0 on failure. */
static int wait_event(int line, DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, DAT_EVENT *ev)
{
    DAT_COUNT more = 0;
    DAT_RETURN rc = dat_evd_wait(evd, WAIT_US, 1, ev, &more);
    if (!harness_expect_code(line, "dat_evd_wait", rc, DAT_SUCCESS))
        return 0;
    if (ev->event_number != want) {
        harness_fail(line, "event 0x%x, expected 0x%x", (unsigned)ev->event_number, (unsigned)want);
        return 0;
    }
    return 1;
}

static int connect_pair(struct pair *p)
{
    DAT_IA_ATTR attr;
    DAT_CONN_QUAL port = 0;
    DAT_EVENT ev;
    memset(p, 0, sizeof *p);
    if (!setup(&p->ia, &p->pz))
        return 0;
    const DAT_EVD_FLAGS dto = DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG;
    if (!EXPECT_RC(dat_evd_create(p->ia, 16, DAT_HANDLE_NULL, dto, &p->dto_c), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_create(p->ia, 16, DAT_HANDLE_NULL, dto, &p->dto_s), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_create(p->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &p->conn_c), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_create(p->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &p->conn_s), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_create(p->ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &p->cr), DAT_SUCCESS) ||
        !EXPECT_RC(dat_ep_create(p->ia, p->pz, p->dto_c, p->dto_c, p->conn_c, NULL, &p->ep_c), DAT_SUCCESS) ||
        !EXPECT_RC(dat_ep_create(p->ia, p->pz, p->dto_s, p->dto_s, p->conn_s, NULL, &p->ep_s), DAT_SUCCESS) ||
        !EXPECT_RC(dat_psp_create_any(p->ia, &port, p->cr, DAT_PSP_CONSUMER_FLAG, &p->psp), DAT_SUCCESS) ||
        !EXPECT_RC(dat_ia_query(p->ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), DAT_SUCCESS) ||
        !EXPECT_RC(dat_ep_connect(p->ep_c, attr.ia_address_ptr, port, WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS) ||
        !wait_event(__LINE__, p->cr, DAT_CONNECTION_REQUEST_EVENT, &ev) ||
        !EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p->ep_s, 0, NULL), DAT_SUCCESS) ||
        !wait_event(__LINE__, p->conn_s, DAT_CONNECTION_EVENT_ESTABLISHED, &ev) ||
        !wait_event(__LINE__, p->conn_c, DAT_CONNECTION_EVENT_ESTABLISHED, &ev))
        return 0;
    return 1;
}

/* Binds `rmr` over the first `len` bytes of an LMR on the client EP and waits for the
 * bind's completion. */
static int bind_rmr(int line, struct pair *p, DAT_RMR_HANDLE rmr, struct lmr_out *l, void *addr, DAT_SEG_LENGTH len,
                    DAT_RMR_CONTEXT *rctx)
{
    DAT_LMR_TRIPLET t = {.lmr_context = l->lctx, .virtual_address = (uintptr_t)addr, .segment_length = len};
    DAT_RMR_COOKIE cookie;
    DAT_EVENT ev;
    cookie.as_64 = 0x1234;
    if (!harness_expect_code(line, "dat_rmr_bind",
                      dat_rmr_bind(rmr, l->lmr, &t, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, p->ep_c, cookie,
                                   DAT_COMPLETION_DEFAULT_FLAG, rctx),
                      DAT_SUCCESS) ||
        !wait_event(line, p->dto_c, DAT_RMR_BIND_COMPLETION_EVENT, &ev))
        return 0;
    return EXPECT(ev.event_data.rmr_completion_event_data.status == DAT_RMR_BIND_SUCCESS, "bind status %d",
                  (int)ev.event_data.rmr_completion_event_data.status);
}

static void case_lmr_free_rmr_bound(void)
{
    static char buf[4096];
    struct pair p;
    DAT_RMR_HANDLE rmr;
    DAT_RMR_CONTEXT rctx = 0;
    struct lmr_out l;
    if (!connect_pair(&p)) {
        teardown(p.ia);
        return;
    }
    if (EXPECT_RC(lmr_va(p.ia, p.pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &l), DAT_SUCCESS) &&
        EXPECT_RC(dat_rmr_create(p.pz, &rmr), DAT_SUCCESS) && bind_rmr(__LINE__, &p, rmr, &l, buf, 1024, &rctx)) {
        EXPECT_RC(dat_lmr_free(l.lmr), RC_LMR_IN_USE);
        /* still there and still valid */
        SYNC_ONE(p.ia, l.lctx, buf, sizeof buf, DAT_SUCCESS);
        DAT_RMR_PARAM rp;
        memset(&rp, 0, sizeof rp);
        if (EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &rp), DAT_SUCCESS))
            EXPECT(rp.lmr_triplet.lmr_context == l.lctx && rp.lmr_triplet.segment_length == 1024 &&
                       rp.rmr_context == rctx,
                   "bound rmr_query: triplet or rmr_context wrong");
        /* unbind (segment length 0), then the LMR frees */
        DAT_LMR_TRIPLET none = {.lmr_context = l.lctx, .virtual_address = (uintptr_t)buf, .segment_length = 0};
        DAT_RMR_COOKIE cookie;
        DAT_EVENT ev;
        cookie.as_64 = 0x5678;
        if (EXPECT_RC(dat_rmr_bind(rmr, l.lmr, &none, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, p.ep_c, cookie,
                                   DAT_COMPLETION_DEFAULT_FLAG, NULL),
                      DAT_SUCCESS))
            wait_event(__LINE__, p.dto_c, DAT_RMR_BIND_COMPLETION_EVENT, &ev);
        EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_LMR_TRIPLET, &rp), RC_ARG2);
        EXPECT_RC(dat_lmr_free(l.lmr), DAT_SUCCESS);
        EXPECT_RC(dat_rmr_free(rmr), DAT_SUCCESS);
    }
    teardown(p.ia);
}

/* Freeing a bound RMR unbinds it: its LMR then frees. */
static void case_lmr_free_after_bound_rmr_freed(void)
{
    static char buf[4096];
    struct pair p;
    DAT_RMR_HANDLE rmr;
    DAT_RMR_CONTEXT rctx = 0;
    struct lmr_out l;
    if (!connect_pair(&p)) {
        teardown(p.ia);
        return;
    }
    if (EXPECT_RC(lmr_va(p.ia, p.pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &l), DAT_SUCCESS) &&
        EXPECT_RC(dat_rmr_create(p.pz, &rmr), DAT_SUCCESS) && bind_rmr(__LINE__, &p, rmr, &l, buf, 64, &rctx)) {
        EXPECT_RC(dat_lmr_free(l.lmr), RC_LMR_IN_USE);
        EXPECT_RC(dat_pz_free(p.pz), RC_PZ_IN_USE);
        EXPECT_RC(dat_rmr_free(rmr), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(l.lmr), DAT_SUCCESS);
    }
    teardown(p.ia);
}

static void case_lmr_freed_context_rejected(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x33, DAT_VA_TYPE_VA, &o), DAT_SUCCESS)) {
        SYNC_ONE(ia, o.lctx, buf, sizeof buf, DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
        SYNC_ONE(ia, o.lctx, buf, sizeof buf, RC_SYNC_BAD);
        SYNC_ONE(ia, o.lctx, buf, 1, RC_SYNC_BAD);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 8: dat_lmr_sync_rdma_read / _write -------------------------------------- */

static void case_sync_inside(void)
{
    static char buf[8192];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz, pz2;
    struct lmr_out a, b;
    if (!setup(&ia, &pz) || !EXPECT_RC(dat_pz_create(ia, &pz2), DAT_SUCCESS)) {
        teardown(ia);
        return;
    }
    if (EXPECT_RC(lmr_va(ia, pz, buf, 4096, 0x11, DAT_VA_TYPE_VA, &a), DAT_SUCCESS) &&
        EXPECT_RC(lmr_va(ia, pz2, buf + 4096, 4096, 0x33, DAT_VA_TYPE_VA, &b), DAT_SUCCESS)) {
        DAT_LMR_TRIPLET t[5];
        memset(t, 0, sizeof t);
        t[0] = (DAT_LMR_TRIPLET){.lmr_context = a.lctx, .virtual_address = (uintptr_t)buf, .segment_length = 4096};
        t[1] = (DAT_LMR_TRIPLET){.lmr_context = b.lctx, .virtual_address = (uintptr_t)buf + 4096, .segment_length = 10};
        t[2] = (DAT_LMR_TRIPLET){.lmr_context = a.lctx, .virtual_address = (uintptr_t)buf + 4095, .segment_length = 1};
        t[3] = (DAT_LMR_TRIPLET){.lmr_context = b.lctx, .virtual_address = (uintptr_t)buf + 8000, .segment_length = 192};
        t[4] = (DAT_LMR_TRIPLET){.lmr_context = a.lctx, .virtual_address = (uintptr_t)buf + 100, .segment_length = 0};
        EXPECT_RC(dat_lmr_sync_rdma_read(ia, t, 5), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_sync_rdma_write(ia, t, 5), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(b.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz2), DAT_SUCCESS);
    teardown(ia);
}

static void case_sync_outside(void)
{
    static char buf[8192];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a;
    if (!setup(&ia, &pz))
        return;
    char *base = buf + 1024;
    if (EXPECT_RC(lmr_va(ia, pz, base, 4096, 0x11, DAT_VA_TYPE_VA, &a), DAT_SUCCESS)) {
        SYNC_ONE(ia, a.lctx, base + 4000, 200, RC_SYNC_BAD);   /* runs past the end */
        SYNC_ONE(ia, a.lctx, base + 4096, 1, RC_SYNC_BAD);     /* just after */
        SYNC_ONE(ia, a.lctx, base - 8, 16, RC_SYNC_BAD);       /* starts before */
        SYNC_ONE(ia, a.lctx, base - 1, 0, RC_SYNC_BAD);        /* empty, but outside */
        SYNC_ONE(ia, a.lctx, base + 4096 - 16, 16, DAT_SUCCESS);
        /* one bad segment among good ones */
        DAT_LMR_TRIPLET t[3];
        memset(t, 0, sizeof t);
        t[0] = (DAT_LMR_TRIPLET){.lmr_context = a.lctx, .virtual_address = (uintptr_t)base, .segment_length = 64};
        t[1] = (DAT_LMR_TRIPLET){.lmr_context = a.lctx, .virtual_address = (uintptr_t)base + 4090, .segment_length = 7};
        t[2] = (DAT_LMR_TRIPLET){.lmr_context = a.lctx, .virtual_address = (uintptr_t)base, .segment_length = 64};
        EXPECT_RC(dat_lmr_sync_rdma_read(ia, t, 3), RC_SYNC_BAD);
        EXPECT_RC(dat_lmr_sync_rdma_write(ia, t, 3), RC_SYNC_BAD);
        /* a wrapping address */
        t[0] = (DAT_LMR_TRIPLET){.lmr_context = a.lctx, .virtual_address = UINT64_MAX - 4, .segment_length = 64};
        EXPECT_RC(dat_lmr_sync_rdma_read(ia, t, 1), RC_SYNC_BAD);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_sync_unknown_context(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x33, DAT_VA_TYPE_VA, &a), DAT_SUCCESS)) {
        DAT_LMR_CONTEXT bogus = a.lctx ^ 0x5a5a5a5au;
        if (bogus == a.rctx)
            bogus ^= 1;
        SYNC_ONE(ia, bogus, buf, 16, RC_SYNC_BAD);
        SYNC_ONE(ia, 0, buf, 16, RC_SYNC_BAD);
        /* an rmr_context is not an lmr_context */
        if (a.rctx != a.lctx)
            SYNC_ONE(ia, a.rctx, buf, 16, RC_SYNC_BAD);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_sync_other_ia(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia, ia2;
    DAT_PZ_HANDLE pz, pz2;
    struct lmr_out a;
    if (!setup(&ia, &pz))
        return;
    if (setup(&ia2, &pz2)) {
        EXPECT(ia2 != ia, "two IAs share the handle %p", ia);
        if (EXPECT_RC(lmr_va(ia2, pz2, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &a), DAT_SUCCESS)) {
            SYNC_ONE(ia2, a.lctx, buf, 64, DAT_SUCCESS);
            SYNC_ONE(ia, a.lctx, buf, 64, RC_SYNC_BAD);
            EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
        }
        teardown(ia2);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_sync_count_and_null(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a;
    if (!setup(&ia, &pz))
        return;
    EXPECT_RC(dat_lmr_sync_rdma_read(ia, NULL, 0), DAT_SUCCESS);
    EXPECT_RC(dat_lmr_sync_rdma_write(ia, NULL, 0), DAT_SUCCESS);
    EXPECT_RC(dat_lmr_sync_rdma_read(ia, NULL, 1), RC_SYNC_BAD);
    EXPECT_RC(dat_lmr_sync_rdma_write(ia, NULL, 3), RC_SYNC_BAD);
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &a), DAT_SUCCESS)) {
        /* num 0 with a real (even bad) array: nothing is looked at */
        DAT_LMR_TRIPLET t = {.lmr_context = a.lctx ^ 1u, .virtual_address = 1, .segment_length = 5};
        EXPECT_RC(dat_lmr_sync_rdma_read(ia, &t, 0), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_sync_rdma_write(ia, &t, 0), DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_sync_bad_ia(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &a), DAT_SUCCESS)) {
        DAT_LMR_TRIPLET t = {.lmr_context = a.lctx, .virtual_address = (uintptr_t)buf, .segment_length = 16};
        EXPECT_RC(dat_lmr_sync_rdma_read(DAT_HANDLE_NULL, &t, 1), RC_HANDLE_IA);
        EXPECT_RC(dat_lmr_sync_rdma_write(DAT_HANDLE_NULL, &t, 1), RC_HANDLE_IA);
        EXPECT_RC(dat_lmr_sync_rdma_read((DAT_IA_HANDLE)(uintptr_t)33, &t, 1), RC_HANDLE_IA);
        EXPECT_RC(dat_lmr_sync_rdma_write((DAT_IA_HANDLE)pz, &t, 1), RC_HANDLE_IA);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
    /* a closed IA */
    EXPECT_RC(dat_lmr_sync_rdma_read(ia, NULL, 0), RC_HANDLE_IA);
}

/* ---- rule 9: RMR --------------------------------------------------------------- */

static void case_rmr_create_query_free(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_RMR_HANDLE rmr;
    DAT_RMR_PARAM p;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(dat_rmr_create(pz, &rmr), DAT_SUCCESS)) {
        memset(&p, 0x5a, sizeof p);
        if (EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL & ~DAT_RMR_FIELD_LMR_TRIPLET, &p), DAT_SUCCESS)) {
            EXPECT(p.ia_handle == ia, "rmr_query ia_handle %p, expected the consumer's %p", p.ia_handle, ia);
            EXPECT(p.pz_handle == pz, "rmr_query pz_handle %p, expected %p", p.pz_handle, pz);
            unsigned char *trip = (unsigned char *)&p.lmr_triplet;
            int untouched = 1;
            for (size_t i = 0; i < sizeof p.lmr_triplet; i++)
                untouched &= trip[i] == 0x5a;
            EXPECT(untouched, "rmr_query wrote lmr_triplet although its bit was not asked for");
        }
        memset(&p, 0x5a, sizeof p);
        if (EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_PZ_HANDLE, &p), DAT_SUCCESS))
            EXPECT(p.pz_handle == pz && p.ia_handle == (DAT_IA_HANDLE)(uintptr_t)0x5a5a5a5a5a5a5a5aull,
                   "rmr_query(PZ_HANDLE only) wrong or wrote ia_handle");
        EXPECT_RC(dat_rmr_free(rmr), DAT_SUCCESS);
        EXPECT_RC(dat_rmr_free(rmr), RC_HANDLE_RMR);
        EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_PZ_HANDLE, &p), RC_HANDLE_RMR);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_rmr_query_errors(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_RMR_HANDLE rmr;
    DAT_RMR_PARAM p;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(dat_rmr_create(pz, &rmr), DAT_SUCCESS)) {
        EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_LMR_TRIPLET, &p), RC_ARG2);
        EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &p), RC_ARG2);
        EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_PZ_HANDLE, NULL), RC_ARG3);
        EXPECT_RC(dat_rmr_query(DAT_HANDLE_NULL, DAT_RMR_FIELD_PZ_HANDLE, &p), RC_HANDLE_RMR);
        EXPECT_RC(dat_rmr_query((DAT_RMR_HANDLE)pz, DAT_RMR_FIELD_PZ_HANDLE, &p), RC_HANDLE_RMR);
        EXPECT_RC(dat_rmr_query((DAT_RMR_HANDLE)ia, DAT_RMR_FIELD_PZ_HANDLE, &p), RC_HANDLE_RMR);
        EXPECT_RC(dat_rmr_free(DAT_HANDLE_NULL), RC_HANDLE_RMR);
        EXPECT_RC(dat_rmr_free(rmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

static void case_rmr_create_bad_pz(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz, stale;
    DAT_RMR_HANDLE rmr;
    static char buf[64];
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    EXPECT_RC(dat_rmr_create(DAT_HANDLE_NULL, &rmr), RC_HANDLE_PZ);
    EXPECT_RC(dat_rmr_create((DAT_PZ_HANDLE)ia, &rmr), RC_HANDLE_PZ);
    EXPECT_RC(dat_rmr_create((DAT_PZ_HANDLE)(uintptr_t)0x00dead00u, &rmr), RC_HANDLE_PZ);
    if (EXPECT_RC(dat_pz_create(ia, &stale), DAT_SUCCESS) && EXPECT_RC(dat_pz_free(stale), DAT_SUCCESS))
        EXPECT_RC(dat_rmr_create(stale, &rmr), RC_HANDLE_PZ);
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &o), DAT_SUCCESS)) {
        EXPECT_RC(dat_rmr_create((DAT_PZ_HANDLE)o.lmr, &rmr), RC_HANDLE_PZ);
        EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 10: registration reuse -------------------------------------------------- */

static void case_reuse_same_range(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a, b;
    if (!setup(&ia, &pz))
        return;
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x33, DAT_VA_TYPE_VA, &a), DAT_SUCCESS) &&
        EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x33, DAT_VA_TYPE_VA, &b), DAT_SUCCESS)) {
        EXPECT(a.lmr != b.lmr, "two LMRs got the same handle");
        EXPECT(a.lctx != b.lctx, "lmr_contexts equal (0x%x)", (unsigned)a.lctx);
        EXPECT(a.rctx != b.rctx, "rmr_contexts equal (0x%x)", (unsigned)a.rctx);
        SYNC_ONE(ia, a.lctx, buf, sizeof buf, DAT_SUCCESS);
        SYNC_ONE(ia, b.lctx, buf, sizeof buf, DAT_SUCCESS);
        EXPECT_RC(dat_lmr_free(a.lmr), DAT_SUCCESS);
        SYNC_ONE(ia, b.lctx, buf, sizeof buf, DAT_SUCCESS);
        SYNC_ONE(ia, a.lctx, buf, sizeof buf, RC_SYNC_BAD);
        DAT_LMR_PARAM p;
        if (EXPECT_RC(dat_lmr_query(b.lmr, DAT_LMR_FIELD_ALL, &p), DAT_SUCCESS))
            EXPECT(p.lmr_context == b.lctx && p.rmr_context == b.rctx, "the survivor's keys changed");
        EXPECT_RC(dat_lmr_free(b.lmr), DAT_SUCCESS);
        SYNC_ONE(ia, b.lctx, buf, sizeof buf, RC_SYNC_BAD);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* Run with DAT_DBG_TYPE=0x2: run.sh looks for "registration reused" between the markers. */
static void case_reuse_debug_log(void)
{
    static char buf[4096];
    char c[DAT_LMR_COOKIE_SIZE];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    struct lmr_out a, b, s1, s2;
    if (!on_soft_device()) {
        harness_skip("the \"registration reused\" debug line is the soft device's");
        return;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!setup(&ia, &pz))
        return;
    fill_cookie(&c, "debug-log-cookie", 16, 0);
    if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &a), DAT_SUCCESS)) {
        printf("MARK-RANGE-BEGIN\n");
        if (EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x11, DAT_VA_TYPE_VA, &b), DAT_SUCCESS))
            dat_lmr_free(b.lmr);
        printf("MARK-RANGE-END\n");
        dat_lmr_free(a.lmr);
    }
    if (EXPECT_RC(lmr_shared(ia, pz, buf, &c, sizeof buf, 0x11, &s1), DAT_SUCCESS)) {
        printf("MARK-SHARED-BEGIN\n");
        if (EXPECT_RC(lmr_shared(ia, pz, buf, &c, sizeof buf, 0x33, &s2), DAT_SUCCESS))
            dat_lmr_free(s2.lmr);
        printf("MARK-SHARED-END\n");
        dat_lmr_free(s1.lmr);
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 11: threads and scale ------------------------------------------------ */

#define THREADS 4
#define ITERATIONS 5000
#define WINDOW 3
#define SHARED_BUFS 8
#define BUF_SIZE 4096

static DAT_IA_HANDLE t_ia;
static DAT_PZ_HANDLE t_pz;
static char *t_shared[SHARED_BUFS];
static pthread_mutex_t t_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t t_live_l[THREADS * WINDOW * 2], t_live_r[THREADS * WINDOW * 2];
static size_t t_nl, t_nr;
static int t_errors;
static char t_first_error[256];

static void t_error(const char *fmt, unsigned a, unsigned b)
{
    pthread_mutex_lock(&t_lock);
    if (t_errors++ == 0)
        snprintf(t_first_error, sizeof t_first_error, fmt, a, b);
    pthread_mutex_unlock(&t_lock);
}

/* Adds a key to a live set; returns 0 when it is already there. Caller holds t_lock. */
static int live_add(uint32_t *set, size_t *n, uint32_t key)
{
    for (size_t i = 0; i < *n; i++)
        if (set[i] == key)
            return 0;
    set[(*n)++] = key;
    return 1;
}

static void live_remove(uint32_t *set, size_t *n, uint32_t key)
{
    for (size_t i = 0; i < *n; i++)
        if (set[i] == key) {
            set[i] = set[--*n];
            return;
        }
}

struct held {
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
};

static void t_release(struct held *h)
{
    pthread_mutex_lock(&t_lock);
    live_remove(t_live_l, &t_nl, h->lctx);
    if (h->rctx)
        live_remove(t_live_r, &t_nr, h->rctx);
    pthread_mutex_unlock(&t_lock);
    DAT_RETURN rc = dat_lmr_free(h->lmr);
    if (rc != DAT_SUCCESS)
        t_error("dat_lmr_free returned 0x%08x (iteration %u)", rc, 0);
}

static void *t_worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 17u;
    static const DAT_MEM_PRIV_FLAGS privs[] = {0x01, 0x11, 0x33, 0x73, 0x13, 0x03, 0x10};
    char *own = malloc(BUF_SIZE);
    struct held window[WINDOW];
    size_t held = 0;
    if (!own) {
        t_error("malloc failed %u%u", 0, 0);
        return NULL;
    }
    for (unsigned it = 0; it < ITERATIONS; it++) {
        if (held == WINDOW) {
            t_release(&window[0]);
            memmove(window, window + 1, sizeof window[0] * (WINDOW - 1));
            held--;
        }
        unsigned r = (unsigned)rand_r(&seed);
        /* mostly a few ranges every thread uses (reuse across threads), sometimes its own */
        char *base = (r & 1) ? own : t_shared[(r >> 1) % SHARED_BUFS];
        size_t off = (r >> 4) % 4 * 256, len = 256 + (r >> 6) % 4 * 512;
        DAT_MEM_PRIV_FLAGS priv = privs[(r >> 8) % (sizeof privs / sizeof privs[0])];
        struct lmr_out o;
        DAT_RETURN rc = lmr_va(t_ia, t_pz, base + off, len, priv, DAT_VA_TYPE_VA, &o);
        if (rc != DAT_SUCCESS) {
            t_error("dat_lmr_create returned 0x%08x (iteration %u)", rc, it);
            continue;
        }
        if (o.lctx == 0 || ((priv & REMOTE_BITS) != 0) != (o.rctx != 0))
            t_error("bad keys: lmr_context 0x%x rmr_context 0x%x", o.lctx, o.rctx);
        pthread_mutex_lock(&t_lock);
        int fresh = live_add(t_live_l, &t_nl, o.lctx);
        int fresh_r = o.rctx == 0 || live_add(t_live_r, &t_nr, o.rctx);
        pthread_mutex_unlock(&t_lock);
        if (!fresh)
            t_error("lmr_context 0x%x is already live (iteration %u)", o.lctx, it);
        if (!fresh_r)
            t_error("rmr_context 0x%x is already live (iteration %u)", o.rctx, it);
        DAT_LMR_TRIPLET t = {.lmr_context = o.lctx, .virtual_address = (uintptr_t)(base + off),
                             .segment_length = (DAT_SEG_LENGTH)len};
        rc = dat_lmr_sync_rdma_read(t_ia, &t, 1);
        if (rc != DAT_SUCCESS)
            t_error("dat_lmr_sync_rdma_read on a live LMR returned 0x%08x (iteration %u)", rc, it);
        window[held++] = (struct held){o.lmr, o.lctx, fresh_r && o.rctx ? o.rctx : 0};
        if (!fresh)
            window[held - 1].lctx = 0; /* do not remove the other holder's entry */
    }
    while (held > 0)
        t_release(&window[--held]);
    free(own);
    return NULL;
}

static void case_threads_create_free(void)
{
    pthread_t th[THREADS];
    double t0 = now_seconds();
    if (!setup(&t_ia, &t_pz))
        return;
    for (int i = 0; i < SHARED_BUFS; i++)
        t_shared[i] = malloc(BUF_SIZE);
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&th[i], NULL, t_worker, (void *)(uintptr_t)(i + 1)) != 0)
            harness_fail(__LINE__, "pthread_create failed");
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    EXPECT(t_errors == 0, "%d errors in the threads; first: %s", t_errors, t_first_error);
    EXPECT(t_nl == 0 && t_nr == 0, "%zu/%zu keys still marked live", t_nl, t_nr);
    EXPECT_RC(dat_pz_free(t_pz), DAT_SUCCESS);
    teardown(t_ia);
    for (int i = 0; i < SHARED_BUFS; i++)
        free(t_shared[i]);
    printf("# %d threads x %d create/free: %.2f s\n", THREADS, ITERATIONS, now_seconds() - t0);
}

/* Creates `count` LMRs of SCALE_SLOT bytes each, back to back in one malloc'ed block, with
 * `priv`; checks them while all are live, frees them all and prints the timing. */
#define SCALE_SLOT 64
static void scale_case(size_t count, DAT_MEM_PRIV_FLAGS priv)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    char *big = malloc(count * SCALE_SLOT);
    DAT_LMR_HANDLE *h = calloc(count, sizeof *h);
    uint32_t *keys = calloc(count, sizeof *keys);
    size_t made = 0;
    if (!EXPECT(big && h && keys, "out of memory") || !setup(&ia, &pz)) {
        free(big), free(h), free(keys);
        return;
    }
    double t0 = now_seconds();
    for (; made < count; made++) {
        struct lmr_out o;
        DAT_RETURN rc = lmr_va(ia, pz, big + made * SCALE_SLOT, SCALE_SLOT, priv, DAT_VA_TYPE_VA, &o);
        if (!EXPECT(rc == DAT_SUCCESS, "create %zu of %zu returned 0x%08x", made + 1, count, (unsigned)rc))
            break;
        h[made] = o.lmr;
        keys[made] = o.lctx;
    }
    double t1 = now_seconds();
    /* spot checks while all are live: the first, the middle and the last */
    if (made == count) {
        SYNC_ONE(ia, keys[0], big, SCALE_SLOT, DAT_SUCCESS);
        SYNC_ONE(ia, keys[count / 2], big + (count / 2) * SCALE_SLOT, SCALE_SLOT, DAT_SUCCESS);
        SYNC_ONE(ia, keys[count - 1], big + (count - 1) * SCALE_SLOT, SCALE_SLOT, DAT_SUCCESS);
        SYNC_ONE(ia, keys[0], big + SCALE_SLOT, 1, RC_SYNC_BAD); /* its neighbour's memory */
        EXPECT_RC(dat_pz_free(pz), RC_PZ_IN_USE);
    }
    size_t failed_frees = 0;
    for (size_t i = 0; i < made; i++)
        failed_frees += dat_lmr_free(h[i]) != DAT_SUCCESS;
    double t2 = now_seconds();
    EXPECT(failed_frees == 0, "%zu of %zu frees failed", failed_frees, made);
    size_t d = duplicates(keys, made);
    EXPECT(d == 0, "%zu duplicate lmr_contexts among %zu live LMRs", d, made);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
    printf("# %zu LMRs (privileges 0x%x): create %.2f s (%.1f us each), free %.2f s\n", made, (unsigned)priv, t1 - t0,
           made ? (t1 - t0) * 1e6 / (double)made : 0.0, t2 - t1);
    EXPECT(t2 - t0 < 60.0, "took %.1f s (bound 60 s)", t2 - t0);
    free(big), free(h), free(keys);
}

/* 100,000 live LMRs in one IA (local read: the key and handle tables at scale). */
static void case_scale_100k(void) { scale_case(100000, 0x01); }

/* 10,000 live LMRs that need writable memory (each create checks the mappings for write). */
static void case_scale_10k_write(void) { scale_case(10000, 0x11); }

/* ---- handle checks after churn (issue 20) ------------------------------------- */

/* DAT_INVALID_HANDLE with the argument's subtype, built from <dat2/dat_error.h>'s values. */
#define RC_BAD(subtype) ((DAT_RETURN)(DAT_CLASS_ERROR | DAT_INVALID_HANDLE | (subtype)))
#define CHURN_PAIRS 100000

/* The three calls with a handle that names no object of their type: exactly
 * DAT_INVALID_HANDLE | the argument's subtype, and nothing else happens. */
static void bad_handle_codes(const char *what, void *h)
{
    DAT_EVENT ev;
    DAT_DTO_COOKIE cookie = {.as_64 = 1};
    int ok = 1;
    ok &= EXPECT_RC(dat_ep_post_send((DAT_EP_HANDLE)h, 0, NULL, cookie, DAT_COMPLETION_DEFAULT_FLAG),
                    RC_BAD(DAT_INVALID_HANDLE_EP));
    ok &= EXPECT_RC(dat_evd_dequeue((DAT_EVD_HANDLE)h, &ev), RC_BAD(DAT_INVALID_HANDLE_EVD_REQUEST));
    ok &= EXPECT_RC(dat_lmr_free((DAT_LMR_HANDLE)h), RC_BAD(DAT_INVALID_HANDLE_LMR));
    if (!ok)
        harness_note("(the handle above: %s, %p)", what, h);
}

/* A long-lived EP and EVD keep working, and wild, stale and wrong-type handles keep getting
 * DAT_INVALID_HANDLE with the argument's subtype (dat_ep_post_send: EP, dat_evd_dequeue:
 * EVD_REQUEST, dat_lmr_free: LMR), after 100,000 LMR create/free pairs: enough for the
 * handle cells' quarantine to hand freed cells out again (the first LMR's handle is seen
 * again), and for the table to grow by many chunks. The stale handles: the first and the
 * last LMR of the churn, and an EVD and an EP created and freed at its start (their cells
 * reused since) and at its end (still in quarantine). */
static void case_handles_after_churn(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE dto = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_EVENT ev;
    DAT_DTO_COOKIE cookie = {.as_64 = 2};
    DAT_RETURN unconnected = (DAT_RETURN)(DAT_CLASS_ERROR | DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED);
    if (!setup(&ia, &pz))
        return;
    if (!EXPECT_RC(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), DAT_SUCCESS) ||
        !EXPECT_RC(dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep), DAT_SUCCESS)) {
        teardown(ia);
        return;
    }
    /* The long-lived objects' normal answers, before. */
    EXPECT_RC(dat_evd_dequeue(dto, &ev), DAT_QUEUE_EMPTY);
    EXPECT_RC(dat_ep_post_send(ep, 0, NULL, cookie, DAT_COMPLETION_DEFAULT_FLAG), unconnected);

    DAT_EVD_HANDLE stale_evd[2] = {DAT_HANDLE_NULL, DAT_HANDLE_NULL};
    DAT_EP_HANDLE stale_ep[2] = {DAT_HANDLE_NULL, DAT_HANDLE_NULL};
    DAT_LMR_HANDLE first_lmr = DAT_HANDLE_NULL, last_lmr = DAT_HANDLE_NULL;
    size_t again = 0, failed = 0;
    double t0 = now_seconds();
    for (size_t i = 0; i < CHURN_PAIRS; i++) {
        if (i == 0 || i == CHURN_PAIRS - 1) {
            int k = i != 0;
            if (EXPECT_RC(dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &stale_evd[k]), DAT_SUCCESS) &&
                EXPECT_RC(dat_ep_create(ia, pz, stale_evd[k], stale_evd[k], conn, NULL, &stale_ep[k]), DAT_SUCCESS)) {
                EXPECT_RC(dat_ep_free(stale_ep[k]), DAT_SUCCESS);
                EXPECT_RC(dat_evd_free(stale_evd[k]), DAT_SUCCESS);
            }
        }
        struct lmr_out o;
        DAT_RETURN rc = lmr_va(ia, pz, buf, 64, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_VA_TYPE_VA, &o);
        if (!EXPECT(rc == DAT_SUCCESS, "create %zu of %d returned 0x%08x", i + 1, CHURN_PAIRS, (unsigned)rc))
            break;
        if (i == 0)
            first_lmr = o.lmr;
        else
            again += o.lmr == first_lmr;
        last_lmr = o.lmr;
        failed += dat_lmr_free(o.lmr) != DAT_SUCCESS;
    }
    double t1 = now_seconds();
    EXPECT(failed == 0, "%zu of the churn's frees failed", failed);
    harness_note("%d LMR create/free pairs: %.2f s; the first LMR's handle was handed out %zu more times", CHURN_PAIRS,
                 t1 - t0, again);
    EXPECT(t1 - t0 < 60.0, "the churn took %.1f s (bound 60 s)", t1 - t0);

    /* The long-lived objects, after. */
    EXPECT_RC(dat_evd_dequeue(dto, &ev), DAT_QUEUE_EMPTY);
    EXPECT_RC(dat_ep_post_send(ep, 0, NULL, cookie, DAT_COMPLETION_DEFAULT_FLAG), unconnected);
    EXPECT_RC(dat_ep_post_recv(ep, 0, NULL, cookie, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    EXPECT_RC(dat_evd_dequeue(dto, &ev), DAT_QUEUE_EMPTY);

    /* Stale. */
    bad_handle_codes("the churn's first LMR (its cell reused since)", first_lmr);
    bad_handle_codes("the churn's last LMR", last_lmr);
    for (int k = 0; k < 2; k++) {
        bad_handle_codes(k ? "an EVD freed at the churn's end" : "an EVD freed at the churn's start", stale_evd[k]);
        bad_handle_codes(k ? "an EP freed at the churn's end" : "an EP freed at the churn's start", stale_ep[k]);
    }
    /* Wrong type: each long-lived object given to the calls of the other types. */
    DAT_RETURN rc_ep = RC_BAD(DAT_INVALID_HANDLE_EP), rc_evd = RC_BAD(DAT_INVALID_HANDLE_EVD_REQUEST),
               rc_lmr = RC_BAD(DAT_INVALID_HANDLE_LMR);
    EXPECT_RC(dat_ep_post_send((DAT_EP_HANDLE)dto, 0, NULL, cookie, DAT_COMPLETION_DEFAULT_FLAG), rc_ep);
    EXPECT_RC(dat_ep_post_send((DAT_EP_HANDLE)pz, 0, NULL, cookie, DAT_COMPLETION_DEFAULT_FLAG), rc_ep);
    EXPECT_RC(dat_evd_dequeue((DAT_EVD_HANDLE)ep, &ev), rc_evd);
    EXPECT_RC(dat_evd_dequeue((DAT_EVD_HANDLE)pz, &ev), rc_evd);
    EXPECT_RC(dat_lmr_free((DAT_LMR_HANDLE)ep), rc_lmr);
    EXPECT_RC(dat_lmr_free((DAT_LMR_HANDLE)dto), rc_lmr);
    EXPECT_RC(dat_lmr_free((DAT_LMR_HANDLE)pz), rc_lmr);
    /* Wild: a stack address, a small integer, NULL, an address inside a live handle's cell,
     * and one far past the cells handed out (inside no object of ours: read, it could fault). */
    uint64_t local = 0;
    bad_handle_codes("a stack address", &local);
    bad_handle_codes("(void *)0x10", (void *)0x10);
    bad_handle_codes("NULL", NULL);
    bad_handle_codes("the EP's handle + 8", (char *)ep + 8);
    bad_handle_codes("the EP's handle + 128 MiB", (char *)ep + ((size_t)128 << 20));

    /* Nothing above touched the long-lived objects. */
    EXPECT_RC(dat_evd_dequeue(dto, &ev), DAT_QUEUE_EMPTY);
    EXPECT_RC(dat_ep_post_send(ep, 0, NULL, cookie, DAT_COMPLETION_DEFAULT_FLAG), unconnected);
    EXPECT_RC(dat_ep_free(ep), DAT_SUCCESS);
    EXPECT_RC(dat_evd_free(dto), DAT_SUCCESS);
    EXPECT_RC(dat_evd_free(conn), DAT_SUCCESS);
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- rule 12: IA close --------------------------------------------------------- */

static void case_ia_close_graceful_then_abrupt(void)
{
    static char buf[4096];
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE dto = DAT_HANDLE_NULL, conn = DAT_HANDLE_NULL, cr = DAT_HANDLE_NULL;
    DAT_CNO_HANDLE cno = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL port = 0;
    struct lmr_out o;
    if (!setup(&ia, &pz))
        return;
    EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), RC_IA_IN_USE);
    /* the IA survived the refused close */
    DAT_PZ_PARAM pp;
    EXPECT_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pp), DAT_SUCCESS);
    int ok = EXPECT_RC(lmr_va(ia, pz, buf, sizeof buf, 0x33, DAT_VA_TYPE_VA, &o), DAT_SUCCESS);
    ok &= EXPECT_RC(dat_rmr_create(pz, &rmr), DAT_SUCCESS);
    ok &= EXPECT_RC(dat_cno_create(ia, DAT_OS_WAIT_PROXY_AGENT_NULL, &cno), DAT_SUCCESS);
    ok &= EXPECT_RC(dat_evd_create(ia, 16, cno, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &dto), DAT_SUCCESS);
    ok &= EXPECT_RC(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), DAT_SUCCESS);
    ok &= EXPECT_RC(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr), DAT_SUCCESS);
    if (ok) {
        ok &= EXPECT_RC(dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep), DAT_SUCCESS);
        ok &= EXPECT_RC(dat_psp_create_any(ia, &port, cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS);
    }
    EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), RC_IA_IN_USE);
    if (!EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS))
        return;
    DAT_LMR_PARAM lp;
    DAT_RMR_PARAM rp;
    DAT_EVD_PARAM ep_;
    DAT_CNO_PARAM cp;
    DAT_EP_PARAM epp;
    DAT_PSP_PARAM psp_p;
    EXPECT_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pp), RC_HANDLE_PZ);
    EXPECT_RC(dat_pz_free(pz), RC_HANDLE_PZ);
    if (o.lmr) {
        EXPECT_RC(dat_lmr_query(o.lmr, DAT_LMR_FIELD_ALL, &lp), RC_HANDLE_LMR);
        EXPECT_RC(dat_lmr_free(o.lmr), RC_HANDLE_LMR);
    }
    if (rmr) {
        EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_PZ_HANDLE, &rp), RC_HANDLE_RMR);
        EXPECT_RC(dat_rmr_free(rmr), RC_HANDLE_RMR);
    }
    if (dto) {
        EXPECT_RC(dat_evd_query(dto, DAT_EVD_FIELD_ALL, &ep_), RC_HANDLE_EVD);
        EXPECT_RC(dat_evd_free(dto), RC_HANDLE_EVD);
    }
    if (cr)
        EXPECT_RC(dat_evd_query(cr, DAT_EVD_FIELD_ALL, &ep_), RC_HANDLE_EVD);
    if (cno) {
        EXPECT_RC(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp), RC_HANDLE_CNO);
        EXPECT_RC(dat_cno_free(cno), RC_HANDLE_CNO);
    }
    if (ep) {
        EXPECT_RC(dat_ep_query(ep, DAT_EP_FIELD_ALL, &epp), RC_HANDLE_EP);
        EXPECT_RC(dat_ep_free(ep), RC_HANDLE_EP);
    }
    if (psp) {
        EXPECT_RC(dat_psp_query(psp, DAT_PSP_FIELD_ALL, &psp_p), RC_HANDLE_PSP);
        EXPECT_RC(dat_psp_free(psp), RC_HANDLE_PSP);
    }
    /* the IA handle itself */
    DAT_PZ_HANDLE pz2;
    DAT_IA_ATTR attr;
    EXPECT_RC(dat_pz_create(ia, &pz2), RC_HANDLE_IA);
    EXPECT_RC(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), RC_HANDLE_IA);
    EXPECT_RC(dat_lmr_sync_rdma_read(ia, NULL, 0), RC_HANDLE_IA);
    EXPECT_RC(lmr_va(ia, pz, buf, 64, 0x11, DAT_VA_TYPE_VA, &o), RC_HANDLE_IA);
    EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), RC_HANDLE_IA);
    /* the provider is still usable: a new IA works and its LMRs register the same memory */
    DAT_IA_HANDLE ia2;
    DAT_PZ_HANDLE pz3;
    if (setup(&ia2, &pz3)) {
        if (EXPECT_RC(lmr_va(ia2, pz3, buf, sizeof buf, 0x33, DAT_VA_TYPE_VA, &o), DAT_SUCCESS))
            EXPECT_RC(dat_lmr_free(o.lmr), DAT_SUCCESS);
        EXPECT_RC(dat_pz_free(pz3), DAT_SUCCESS);
        EXPECT_RC(dat_ia_close(ia2, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS);
    }
}

/* ---- memory windows ------------------------------------------------------------ */

/* The IA's max_rmrs (-1 when it cannot be asked): 0 on Soft-iWARP, which has no memory
 * windows. */
static long windows_of_ia(void)
{
    DAT_IA_HANDLE ia;
    DAT_IA_ATTR a;
    long n = -1;
    memset(&a, 0, sizeof a);
    if (open_ia_ts(&ia, DAT_FALSE) != DAT_SUCCESS)
        return -1;
    if (dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_MAX_RMRS, &a, 0, NULL) == DAT_SUCCESS)
        n = (long)a.max_rmrs;
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return n;
}

/* An IA whose max_rmrs is 0 refuses dat_rmr_create with DAT_MODEL_NOT_SUPPORTED and leaves
 * the handle untouched; where windows exist this is the other cases' business. */
static void case_rmr_without_windows(void)
{
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_IA_ATTR a;
    if (!setup(&ia, &pz))
        return;
    memset(&a, 0, sizeof a);
    if (EXPECT_RC(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_MAX_RMRS, &a, 0, NULL), DAT_SUCCESS)) {
        if (a.max_rmrs != 0) {
            harness_skip("the IA has memory windows (max_rmrs %ld)", (long)a.max_rmrs);
        } else {
            DAT_RMR_HANDLE rmr = (DAT_RMR_HANDLE)(uintptr_t)0x5a5a;
            EXPECT_RC(dat_rmr_create(pz, &rmr), DAT_CLASS_ERROR | DAT_MODEL_NOT_SUPPORTED);
            EXPECT(rmr == (DAT_RMR_HANDLE)(uintptr_t)0x5a5a, "the refused dat_rmr_create wrote its handle");
        }
    }
    EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
    teardown(ia);
}

/* ---- driver ------------------------------------------------------------------ */

/* memlock.c */
void case_memlock_limit(void);

#define CASE(n) {#n, case_##n, 0}
/* A case that needs a memory window: skipped on an IA without them (rmr_without_windows). */
#define CASE_RMR(n) {#n, case_##n, 1}
static const struct harness_case cases[] = {
    CASE(rmr_without_windows),
    CASE(ia_address),
    CASE(ia_mem_types),
    CASE(ia_thread_safe_false),
    CASE(ia_thread_safe_true),
    CASE(pz_create_query_free),
    CASE(pz_free_in_use_lmr),
    CASE_RMR(pz_free_in_use_rmr),
    CASE(pz_free_in_use_ep),
    CASE_RMR(pz_free_in_use_mixed),
    CASE(lmr_privilege_combinations),
    CASE(lmr_optional_outputs_null),
    CASE(lmr_length_zero),
    CASE(lmr_bad_mem_type),
    CASE(lmr_bad_privileges),
    CASE(lmr_bad_va_type),
    CASE(lmr_null_handle_out),
    CASE(lmr_unmapped),
    CASE(lmr_partly_unmapped),
    CASE(lmr_prot_none),
    CASE(lmr_read_only),
    CASE(lmr_mprotect_change),
    CASE(lmr_null_pz),
    CASE(lmr_null_ia),
    CASE(lmr_bad_pz_handles),
    CASE(lmr_pz_of_other_ia),
    CASE(lmr_keys_unpredictable),
    CASE(lmr_over_lmr),
    CASE(lmr_over_lmr_outlives_original),
    CASE(lmr_over_freed_lmr),
    CASE(shared_equal_cookies),
    CASE(shared_cookie_bytes_after_nul),
    CASE(shared_query_cookie),
    CASE(shared_released_with_last),
    CASE(shared_null_cookie),
    CASE(lmr_va_type_zb),
    CASE(lmr_query_mask),
    CASE(lmr_query_errors),
    CASE(lmr_double_free),
    CASE_RMR(lmr_free_rmr_bound),
    CASE_RMR(lmr_free_after_bound_rmr_freed),
    CASE(lmr_freed_context_rejected),
    CASE(sync_inside),
    CASE(sync_outside),
    CASE(sync_unknown_context),
    CASE(sync_other_ia),
    CASE(sync_count_and_null),
    CASE(sync_bad_ia),
    CASE_RMR(rmr_create_query_free),
    CASE_RMR(rmr_query_errors),
    CASE(rmr_create_bad_pz),
    CASE(reuse_same_range),
    CASE(reuse_debug_log),
    CASE(threads_create_free),
    CASE(scale_100k),
    CASE(scale_10k_write),
    CASE(handles_after_churn),
    CASE(memlock_limit),
    CASE_RMR(ia_close_graceful_then_abrupt),
};

/* MEMTEST_VERBOSE=1 prints every failed check; by default only the first (in the verdict). */
static void prepare(const struct harness_case *c, size_t index)
{
    (void)index;
    if (c->arg == 1 && windows_of_ia() == 0)
        harness_skip("the IA has no memory windows (max_rmrs 0; rmr_without_windows checks the refusal)");
}

static const struct harness_group group = {"memory", cases, sizeof cases / sizeof cases[0], prepare, "MEMTEST_VERBOSE"};

int main(int argc, char **argv)
{
    return harness_main(argc, argv, &group);
}
