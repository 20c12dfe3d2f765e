/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: what one memory registration costs, through raw verbs or through a DAT IA.
 *
 *   reg raw DEVICE SPEC...     ibv_reg_mr + ibv_dereg_mr on DEVICE (e.g. rxe0)
 *   reg dat IA SPEC...         dat_lmr_create + dat_lmr_free on IA
 *
 * SPEC is MODE[/PRIV]:SIZE:ITERS, MODE being
 *   cold   each iteration maps a fresh anonymous buffer of SIZE bytes, writes one byte per
 *          page, then times one registration and its release, then unmaps the buffer
 *          (the unmap is timed separately: a registration cache may do its work there);
 *   rereg  one buffer, mapped and touched once and registered once untimed (a cache's first
 *          miss), then registered and released ITERS times, each pair timed;
 *   pool   one pool of ITERS x SIZE bytes, mapped, touched and registered whole (untimed, that
 *          registration kept for the whole spec), then each iteration times the registration
 *          and release of the next SIZE bytes of it: a fresh buffer carved from memory that
 *          was registered before, as programs do with their big regions.
 * and PRIV the privileges asked for (raw verbs: the access flags that give them):
 *   local  LOCAL_READ|LOCAL_WRITE (IBV_ACCESS_LOCAL_WRITE), the default;
 *   rw     LOCAL_WRITE|REMOTE_READ|REMOTE_WRITE, 0x32 (raw: the same; Debian's dapl refuses
 *          0x22, remote write without local write, as verbs does);
 *   all    DAT_MEM_PRIV_ALL_FLAG, 0x33 (raw: as rw, with REMOTE_ATOMIC).
 * SIZE takes a K, M or G suffix (powers of 1024). Before the first SPEC, one untimed cold
 * cycle of 4 KiB takes the one-time costs (a cache's monitor thread, the first use of the
 * protection domain), which are not what "cold" means here.
 *
 * One process measures one variant; bench/vm/run.sh interleaves processes of the variants
 * in rounds and takes the medians. Output, at the end (nothing is written while measuring),
 * one line per timed iteration:
 *   sample MODE SIZE REG_US UNMAP_US       (MODE as in the SPEC, "/local" left out;
 *                                           UNMAP_US is 0 but for cold)
 * and, for a DAT IA that reports them, the registration cache's state and counters:
 *   cache NAME VALUE
 * Errors go to stderr and make the exit status non-zero; "noia" on stderr and exit status 3
 * mean that the IA (or the device) does not open, which the driver shows as n/a.
 *
 * Build: cc -O2 reg.c -I$ROOT/include -L$ROOT/build -ldat2 -libverbs
 * (at run time the libdat2.so.2 found by the loader is measured: Debian's or ours). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <dat2/udat.h>

#define EXIT_NOIA 3

enum mode { COLD, REREG, POOL };
static const char *const mode_names[] = {"cold", "rereg", "pool"};

enum priv { LOCAL, RW, ALL };
static const char *const priv_names[] = {"local", "rw", "all"};

struct spec {
    enum mode mode;
    enum priv priv;
    size_t size;
    unsigned iters;
};

/* The timings, kept in memory and printed at the end: writing while measuring disturbs the
 * next iteration (much so when stdout is a file on the VM's 9p share). */
struct sample {
    enum mode mode;
    enum priv priv;
    size_t size;
    double reg_us, unmap_us;
};
static struct sample *samples;
static size_t nsamples, max_samples;

static void record(const struct spec *sp, double reg_us, double unmap_us)
{
    if (nsamples < max_samples)
        samples[nsamples++] = (struct sample){sp->mode, sp->priv, sp->size, reg_us, unmap_us};
}

/* One way of registering memory: open once, then reg/unreg pairs with the privileges in
 * reg_priv. A backend holds two registrations at most: reg may be called once more before
 * unreg (a pool's registration stays while the buffers carved from it are registered), and
 * unreg releases the latest one. */
struct backend {
    int (*reg)(void *self, void *buf, size_t len);
    int (*unreg)(void *self);
    void *self;
};
#define MAX_HELD 2
static enum priv reg_priv;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'G': case 'g': v <<= 30; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'K': case 'k': v <<= 10; end++; break;
    default: break;
    }
    if (*end != '\0' || v == 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_spec(const char *arg, struct spec *sp)
{
    char buf[128];
    if (strlen(arg) >= sizeof buf)
        return -1;
    strcpy(buf, arg);
    char *mode = strtok(buf, ":"), *size = strtok(NULL, ":"), *iters = strtok(NULL, ":");
    if (!mode || !size || !iters || strtok(NULL, ":"))
        return -1;
    char *priv = strchr(mode, '/');
    if (priv)
        *priv++ = '\0';
    int m = -1, p = priv ? -1 : LOCAL;
    for (int i = 0; i < 3; i++) {
        if (strcmp(mode, mode_names[i]) == 0)
            m = i;
        if (priv && strcmp(priv, priv_names[i]) == 0)
            p = i;
    }
    if (m < 0 || p < 0)
        return -1;
    sp->mode = (enum mode)m;
    sp->priv = (enum priv)p;
    char *end;
    unsigned long n = strtoul(iters, &end, 10);
    if (*end != '\0' || n == 0 || n > 1000000)
        return -1;
    sp->iters = (unsigned)n;
    return parse_size(size, &sp->size);
}

/* A private anonymous buffer with every page written once. */
static void *fresh_buffer(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "reg: mmap of %zu bytes: %s\n", len, strerror(errno));
        return NULL;
    }
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < len; off += (size_t)page)
        ((volatile char *)p)[off] = (char)off;
    return p;
}

/* ------------------------------------------------------------------ raw verbs */

struct raw {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_mr *mr[MAX_HELD];
    int held;
};

static int raw_reg(void *self, void *buf, size_t len)
{
    struct raw *r = self;
    int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    int access = reg_priv == LOCAL ? IBV_ACCESS_LOCAL_WRITE : reg_priv == RW ? remote : remote | IBV_ACCESS_REMOTE_ATOMIC;
    if (r->held == MAX_HELD) {
        fprintf(stderr, "reg: more than %d registrations held\n", MAX_HELD);
        return -1;
    }
    struct ibv_mr *mr = ibv_reg_mr(r->pd, buf, len, access);
    if (mr)
        r->mr[r->held++] = mr;
    else {
        fprintf(stderr, "reg: ibv_reg_mr of %zu bytes: %s\n", len, strerror(errno));
        return -1;
    }
    return 0;
}

static int raw_unreg(void *self)
{
    struct raw *r = self;
    if (r->held == 0)
        return -1;
    int rc = ibv_dereg_mr(r->mr[--r->held]);
    if (rc) {
        fprintf(stderr, "reg: ibv_dereg_mr: %s\n", strerror(rc));
        return -1;
    }
    return 0;
}

static int raw_open(const char *name, struct raw *r)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list) {
        fprintf(stderr, "reg: noia: ibv_get_device_list: %s\n", strerror(errno));
        return -1;
    }
    for (int i = 0; i < n && !r->ctx; i++)
        if (strcmp(ibv_get_device_name(list[i]), name) == 0)
            r->ctx = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    if (!r->ctx) {
        fprintf(stderr, "reg: noia: no RDMA device %s opens (%d devices listed)\n", name, n);
        return -1;
    }
    r->pd = ibv_alloc_pd(r->ctx);
    if (!r->pd) {
        fprintf(stderr, "reg: ibv_alloc_pd on %s: %s\n", name, strerror(errno));
        return -1;
    }
    return 0;
}

static void raw_close(struct raw *r)
{
    if (r->pd)
        ibv_dealloc_pd(r->pd);
    if (r->ctx)
        ibv_close_device(r->ctx);
}

/* ------------------------------------------------------------------ DAT */

struct dat {
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async;
    DAT_PZ_HANDLE pz;
    DAT_LMR_HANDLE lmr[MAX_HELD];
    int held;
};

static void dat_error(const char *what, DAT_RETURN rc)
{
    const char *major = "?", *minor = "?";
    dat_strerror(rc, &major, &minor);
    fprintf(stderr, "reg: %s: 0x%08x %s %s\n", what, (unsigned)rc, major, minor);
}

static int dat_reg(void *self, void *buf, size_t len)
{
    struct dat *d = self;
    DAT_REGION_DESCRIPTION region;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN rsize;
    DAT_VADDR raddr;
    region.for_va = buf;
    DAT_MEM_PRIV_FLAGS privs = reg_priv == LOCAL ? DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG
                               : reg_priv == RW  ? DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG |
                                                       DAT_MEM_PRIV_REMOTE_WRITE_FLAG
                                                 : DAT_MEM_PRIV_ALL_FLAG;
    if (d->held == MAX_HELD) {
        fprintf(stderr, "reg: more than %d registrations held\n", MAX_HELD);
        return -1;
    }
    DAT_RETURN rc = dat_lmr_create(d->ia, DAT_MEM_TYPE_VIRTUAL, region, len, d->pz, privs, DAT_VA_TYPE_VA,
                                   &d->lmr[d->held], &lctx, &rctx, &rsize, &raddr);
    if (rc != DAT_SUCCESS) {
        dat_error("dat_lmr_create", rc);
        return -1;
    }
    d->held++;
    return 0;
}

static int dat_unreg(void *self)
{
    struct dat *d = self;
    if (d->held == 0)
        return -1;
    DAT_RETURN rc = dat_lmr_free(d->lmr[--d->held]);
    d->lmr[d->held] = DAT_HANDLE_NULL;
    if (rc != DAT_SUCCESS) {
        dat_error("dat_lmr_free", rc);
        return -1;
    }
    return 0;
}

static int dat_open(char *name, struct dat *d)
{
    d->async = DAT_HANDLE_NULL;
    DAT_RETURN rc = dat_ia_open(name, 8, &d->async, &d->ia);
    if (rc != DAT_SUCCESS) {
        const char *major = "?", *minor = "?";
        dat_strerror(rc, &major, &minor);
        fprintf(stderr, "reg: noia: dat_ia_open(%s): 0x%08x %s %s\n", name, (unsigned)rc, major, minor);
        return -1;
    }
    rc = dat_pz_create(d->ia, &d->pz);
    if (rc != DAT_SUCCESS) {
        dat_error("dat_pz_create", rc);
        return -1;
    }
    return 0;
}

/* The provider's own DAT2_MR_CACHE* attributes, if it has any, one "cache NAME VALUE" line
 * each (a value may hold spaces). */
static void dat_report_cache(struct dat *d)
{
    DAT_PROVIDER_ATTR pa;
    memset(&pa, 0, sizeof pa);
    if (dat_ia_query(d->ia, NULL, DAT_IA_FIELD_NONE, NULL,
                     DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa) != DAT_SUCCESS)
        return;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++) {
        const DAT_NAMED_ATTR *a = &pa.provider_specific_attr[i];
        if (a->name && a->value && strncmp(a->name, "DAT2_MR_CACHE", 13) == 0)
            printf("cache %s %s\n", a->name, a->value);
    }
}

static void dat_close(struct dat *d)
{
    if (d->pz)
        dat_pz_free(d->pz);
    if (d->ia)
        dat_ia_close(d->ia, DAT_CLOSE_ABRUPT_FLAG);
}

#if defined(REG_PEER_FI) || defined(REG_PEER_UCX)
/* libfabric's or UCX's registration, as backend "fi" or "ucx" (see reg_peer.h). */
#include "reg_peer.h"
#define REG_PEER 1
#endif

/* ------------------------------------------------------------------ the loops */

/* Registers and releases buf, timed; returns the microseconds or -1. */
static double timed_pair(const struct backend *b, void *buf, const struct spec *sp)
{
    double t0 = now_us();
    if (b->reg(b->self, buf, sp->size) || b->unreg(b->self))
        return -1;
    return now_us() - t0;
}

/* Runs one SPEC; records its samples when show is set. */
static int run_spec(const struct backend *b, const struct spec *sp, int show)
{
    reg_priv = sp->priv;
    if (sp->mode == REREG) {
        void *buf = fresh_buffer(sp->size);
        if (!buf)
            return -1;
        int rc = b->reg(b->self, buf, sp->size) || b->unreg(b->self) ? -1 : 0;
        for (unsigned i = 0; rc == 0 && i < sp->iters; i++) {
            double t = timed_pair(b, buf, sp);
            if (t < 0)
                rc = -1;
            else if (show)
                record(sp, t, 0);
        }
        munmap(buf, sp->size);
        return rc;
    }
    if (sp->mode == POOL) {
        size_t len = sp->size * sp->iters;
        char *pool = fresh_buffer(len);
        if (!pool)
            return -1;
        int rc = b->reg(b->self, pool, len) ? -1 : 0;
        for (unsigned i = 0; rc == 0 && i < sp->iters; i++) {
            double t = timed_pair(b, pool + (size_t)i * sp->size, sp);
            if (t < 0)
                rc = -1;
            else if (show)
                record(sp, t, 0);
        }
        if (rc == 0 && b->unreg(b->self))
            rc = -1;
        munmap(pool, len);
        return rc;
    }
    for (unsigned i = 0; i < sp->iters; i++) {
        void *buf = fresh_buffer(sp->size);
        if (!buf)
            return -1;
        double t = timed_pair(b, buf, sp);
        if (t < 0) {
            munmap(buf, sp->size);
            return -1;
        }
        double t1 = now_us();
        munmap(buf, sp->size);
        double t2 = now_us();
        if (show)
            record(sp, t, t2 - t1);
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: reg raw DEVICE MODE[/PRIV]:SIZE:ITERS...\n"
                    "       reg dat IA MODE[/PRIV]:SIZE:ITERS...   (MODE cold, rereg or pool;\n"
                    "                                               PRIV local, rw or all)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 4)
        usage();
    int nspecs = argc - 3;
    struct spec *specs = calloc((size_t)nspecs, sizeof *specs);
    if (!specs)
        return 1;
    for (int i = 0; i < nspecs; i++)
        if (parse_spec(argv[i + 3], &specs[i])) {
            fprintf(stderr, "reg: bad spec %s\n", argv[i + 3]);
            usage();
        }
    for (int i = 0; i < nspecs; i++)
        max_samples += specs[i].iters;
    samples = calloc(max_samples, sizeof *samples);
    if (!samples)
        return 1;

    struct raw raw = {0};
    struct dat dat = {0};
    struct backend b;
    if (strcmp(argv[1], "raw") == 0) {
        if (raw_open(argv[2], &raw)) {
            raw_close(&raw);
            return EXIT_NOIA;
        }
        b = (struct backend){raw_reg, raw_unreg, &raw};
    } else if (strcmp(argv[1], "dat") == 0) {
        if (dat_open(argv[2], &dat)) {
            int noia = dat.ia == DAT_HANDLE_NULL;
            dat_close(&dat);
            return noia ? EXIT_NOIA : 1;
        }
        b = (struct backend){dat_reg, dat_unreg, &dat};
#ifdef REG_PEER
    } else if (strcmp(argv[1], PEER_NAME) == 0) {
        if (peer_backend(argv[2], &b))
            return EXIT_NOIA;
#endif
    } else {
        usage();
    }

    const struct spec warm = {COLD, LOCAL, 4096, 1};
    int rc = run_spec(&b, &warm, 0);
#ifdef REG_PEER
    peer_mark();
#endif
    for (int i = 0; i < nspecs && rc == 0; i++)
        rc = run_spec(&b, &specs[i], 1);

    for (size_t i = 0; i < nsamples; i++)
        printf("sample %s%s%s %zu %.2f %.2f\n", mode_names[samples[i].mode], samples[i].priv == LOCAL ? "" : "/",
               samples[i].priv == LOCAL ? "" : priv_names[samples[i].priv], samples[i].size, samples[i].reg_us,
               samples[i].unmap_us);
    if (b.self == &dat) {
        dat_report_cache(&dat);
        dat_close(&dat);
#ifdef REG_PEER
    } else if (b.self == &peer) {
        peer_finish();
#endif
    } else {
        raw_close(&raw);
    }
    free(samples);
    free(specs);
    return rc ? 1 : 0;
}
