/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: the registration cache's hit through the whole DAT call.
 *
 *   lmr_hit [-i IA] [-n PAIRS] [-p PRIVILEGES] [-r ROUNDS] [-s BYTES] [-w WARMUP]
 *
 * Registers one page-aligned buffer (BYTES, 4096 by default) with dat_lmr_create
 * (DAT_MEM_TYPE_VIRTUAL, LOCAL_READ|LOCAL_WRITE, every out-parameter asked for) and frees it
 * with dat_lmr_free, once to fill the cache, WARMUP times more (70000 by default: more
 * handles than the library's table quarantines before it reuses one, so that what is measured
 * is its steady state, not the growth of its queues), then PAIRS times per round in hit_loop(). It
 * prints the fastest and the median of ROUNDS rounds, in ns per create+free pair ("hit ns
 * FASTEST MEDIAN": a round is short, 1-2 ms, so that on a host busy with other work some
 * rounds still run undisturbed, and the fastest is the call's own cost), and the
 * cache's hit counter before and after ("hit hits BEFORE AFTER", from dat_ia_query's
 * DAT2_MR_CACHE_HITS; "hit hits - -" when the IA does not report one, i.e. does not cache).
 * hit_loop() is its own function so that `valgrind --tool=callgrind --toggle-collect=hit_loop`
 * counts the instructions of the pairs alone (create_one and free_one, each call alone); with
 * -r 0 the program makes one round of PAIRS and prints no timing.
 * -p registers with other privileges (DAT_MEM_PRIV_FLAGS, e.g. 0x32 or 0x33): with a remote
 * privilege nothing is cached (src/builtin/mr/SAFETY.md), so each pair is a whole
 * registration and deregistration, unwatched, for its LMR alone ("hit hits" then shows no
 * new hit).
 *
 * The IA is dat2-soft unless -i names another; bench/run.sh runs it against a library built
 * with the bench-soft-cache feature, whose soft device caches registrations.
 * Build: cc -O2 lmr_hit.c -I$ROOT/include -L$ROOT/build -ldat2 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <dat2/udat.h>

static DAT_IA_HANDLE ia;
static DAT_PZ_HANDLE pz;
static void *buf;
static DAT_VLEN len = 4096;
static DAT_MEM_PRIV_FLAGS privileges = DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG;

static void check(DAT_RETURN rc, const char *what)
{
    if (rc == DAT_SUCCESS)
        return;
    const char *major = "", *minor = "";
    dat_strerror(rc, &major, &minor);
    fprintf(stderr, "lmr_hit: %s: 0x%08x %s %s\n", what, (unsigned)rc, major, minor);
    exit(1);
}

static inline __attribute__((always_inline)) DAT_LMR_HANDLE lmr_create(void)
{
    DAT_REGION_DESCRIPTION region;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN rlen;
    DAT_VADDR raddr;
    region.for_va = buf;
    check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, privileges, DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, &rlen, &raddr),
          "dat_lmr_create");
    return lmr;
}

/* The warm-up's pairs (not counted). */
static void pair(void)
{
    check(dat_lmr_free(lmr_create()), "dat_lmr_free");
}

/* The measured loop's dat_lmr_create and dat_lmr_free: functions of their own, so that
 * callgrind can count each call apart (--toggle-collect=create_one or free_one); the warm-up
 * calls neither. */
__attribute__((noinline)) DAT_LMR_HANDLE create_one(void)
{
    return lmr_create();
}

__attribute__((noinline)) void free_one(DAT_LMR_HANDLE lmr)
{
    check(dat_lmr_free(lmr), "dat_lmr_free");
}

/* The measured loop (callgrind's --toggle-collect names it). */
__attribute__((noinline)) void hit_loop(long n)
{
    for (long i = 0; i < n; i++)
        free_one(create_one());
}

/* The cache's hit counter, or -1 when the IA reports none. */
static long hits(void)
{
    DAT_PROVIDER_ATTR pa;
    check(dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa), "dat_ia_query");
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++)
        if (pa.provider_specific_attr[i].name && strcmp(pa.provider_specific_attr[i].name, "DAT2_MR_CACHE_HITS") == 0)
            return pa.provider_specific_attr[i].value ? atol(pa.provider_specific_attr[i].value) : -1;
    return -1;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    char default_ia[] = "dat2-soft";
    char *name = default_ia;
    long n = 5000, rounds = 201, warmup = 70000;
    int c;
    while ((c = getopt(argc, argv, "i:n:p:r:s:w:")) != -1) {
        switch (c) {
        case 'i': name = optarg; break;
        case 'n': n = atol(optarg); break;
        case 'p': privileges = (DAT_MEM_PRIV_FLAGS)strtoul(optarg, NULL, 0); break;
        case 'r': rounds = atol(optarg); break;
        case 's': len = strtoull(optarg, NULL, 0); break;
        case 'w': warmup = atol(optarg); break;
        default:
            fprintf(stderr, "usage: lmr_hit [-i IA] [-n PAIRS] [-p PRIVILEGES] [-r ROUNDS] [-s BYTES] [-w WARMUP]\n");
            return 2;
        }
    }
    if (n < 1 || rounds < 0 || rounds > 999 || len == 0 || warmup < 0) {
        fprintf(stderr, "lmr_hit: bad arguments\n");
        return 2;
    }
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    check(dat_ia_open(name, 16, &async_evd, &ia), "dat_ia_open");
    check(dat_pz_create(ia, &pz), "dat_pz_create");
    buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("lmr_hit: mmap");
        return 1;
    }
    memset(buf, 1, len);
    pair(); /* the miss that fills the cache */
    for (long i = 0; i < warmup; i++)
        pair();
    long before = hits();
    static double t[1000];
    if (rounds == 0)
        hit_loop(n);
    for (long r = 0; r < rounds; r++) {
        double t0 = now_ns();
        hit_loop(n);
        t[r] = (now_ns() - t0) / n;
    }
    long after = hits();
    if (before < 0 || after < 0)
        printf("hit hits - -\n");
    else
        printf("hit hits %ld %ld\n", before, after);
    if (rounds > 0) {
        qsort(t, rounds, sizeof t[0], cmp);
        printf("# ns per create+free, %ld rounds of %ld: fastest %.1f, quartiles %.1f %.1f %.1f, slowest %.1f\n", rounds, n, t[0],
               t[rounds / 4], t[rounds / 2], t[3 * rounds / 4], t[rounds - 1]);
        printf("hit ns %.1f %.1f\n", t[0], t[rounds / 2]);
    }
    check(dat_pz_free(pz), "dat_pz_free");
    check(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), "dat_ia_close");
    return 0;
}
