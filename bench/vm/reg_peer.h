/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: the registration of the libraries a user would pick instead of a DAT library,
 * as extra backends of bench/vm/reg.c. reg.c includes this file when built with one of:
 *
 *   -DREG_PEER_FI   reg fi DOMAIN SPEC...    libfabric: fi_mr_reg + fi_close on the verbs
 *                                            provider's domain DOMAIN (e.g. rxe0), with its MR
 *                                            cache (FI_MR_CACHE_MONITOR picks the monitor)
 *                   link: -lfabric -ldl -rdynamic
 *   -DREG_PEER_UCX  reg ucx DEVICE SPEC...   UCX: ucp_mem_map + ucp_mem_unmap, its md's rcache
 *                                            (UCX_NET_DEVICES=DEVICE:1 is set unless given)
 *                   link: -lucp -lucs -ldl -rdynamic
 *
 * Privileges are local (what a send or receive buffer needs) unless REG_PEER_ACCESS=remote
 * asks for remote read and write too.
 *
 * Whether a cache really serves a registration is counted, not guessed: the program defines
 * ibv_reg_mr, ibv_reg_mr_iova, ibv_reg_mr_iova2 and ibv_dereg_mr itself (exported with
 * -rdynamic, so the libraries' calls and those of the providers they dlopen land here), counts
 * them and calls libibverbs' own. At the end it prints, beside reg.c's samples:
 *   peer regs N                  device registrations made while timing (after the warm-up)
 *   peer deregs N                device deregistrations while timing
 *   peer calls N                 registrations asked for meanwhile (rereg's first, untimed, included)
 * A pair served by the cache makes no device registration, so regs < calls means hits. */
#define _GNU_SOURCE
#include <dlfcn.h>

#if defined(REG_PEER_FI) == defined(REG_PEER_UCX)
#error "define exactly one of REG_PEER_FI and REG_PEER_UCX"
#endif

/* ------------------------------------------------------------------ counting verbs calls */

static unsigned long peer_nreg, peer_ndereg, peer_ncalls;

static void *peer_verbs(const char *name, const char *version)
{
    void *f = dlvsym(RTLD_NEXT, name, version);
    if (!f) {
        fprintf(stderr, "reg: %s@%s not found in libibverbs\n", name, version);
        abort();
    }
    return f;
}

/* The parentheses keep verbs.h's ibv_reg_mr macro from expanding. */
struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    static struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t, int);
    if (!real)
        real = (struct ibv_mr * (*)(struct ibv_pd *, void *, size_t, int)) peer_verbs("ibv_reg_mr", "IBVERBS_1.1");
    __atomic_fetch_add(&peer_nreg, 1, __ATOMIC_RELAXED);
    return real(pd, addr, length, access);
}

struct ibv_mr *(ibv_reg_mr_iova)(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
    static struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t, uint64_t, int);
    if (!real)
        real = (struct ibv_mr * (*)(struct ibv_pd *, void *, size_t, uint64_t, int))
            peer_verbs("ibv_reg_mr_iova", "IBVERBS_1.7");
    __atomic_fetch_add(&peer_nreg, 1, __ATOMIC_RELAXED);
    return real(pd, addr, length, iova, access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
    static struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int);
    if (!real)
        real = (struct ibv_mr * (*)(struct ibv_pd *, void *, size_t, uint64_t, unsigned int))
            peer_verbs("ibv_reg_mr_iova2", "IBVERBS_1.8");
    __atomic_fetch_add(&peer_nreg, 1, __ATOMIC_RELAXED);
    return real(pd, addr, length, iova, access);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
    static int (*real)(struct ibv_mr *);
    if (!real)
        real = (int (*)(struct ibv_mr *))peer_verbs("ibv_dereg_mr", "IBVERBS_1.1");
    __atomic_fetch_add(&peer_ndereg, 1, __ATOMIC_RELAXED);
    return real(mr);
}

static int peer_remote(void)
{
    const char *a = getenv("REG_PEER_ACCESS");
    return a && strcmp(a, "remote") == 0;
}

#ifdef REG_PEER_FI
/* ------------------------------------------------------------------ libfabric */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#define PEER_NAME "fi"

struct peer {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_mr *mr;
    uint64_t access;
};

static int peer_reg(void *self, void *buf, size_t len)
{
    struct peer *p = self;
    peer_ncalls++;
    int rc = fi_mr_reg(p->domain, buf, len, p->access, 0, 0, 0, &p->mr, NULL);
    if (rc) {
        fprintf(stderr, "reg: fi_mr_reg of %zu bytes: %s\n", len, fi_strerror(-rc));
        return -1;
    }
    return 0;
}

static int peer_unreg(void *self)
{
    struct peer *p = self;
    int rc = fi_close(&p->mr->fid);
    p->mr = NULL;
    if (rc) {
        fprintf(stderr, "reg: fi_close of an MR: %s\n", fi_strerror(-rc));
        return -1;
    }
    return 0;
}

static int peer_open(const char *dev, struct peer *p)
{
    struct fi_info *hints = fi_allocinfo();
    if (!hints)
        return -1;
    hints->fabric_attr->prov_name = strdup("verbs");
    hints->domain_attr->name = strdup(dev);
    hints->ep_attr->type = FI_EP_MSG;
    hints->caps = FI_MSG | FI_RMA;
    hints->mode = ~0ULL;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &p->info);
    fi_freeinfo(hints);
    if (rc) {
        fprintf(stderr, "reg: noia: fi_getinfo(verbs, %s): %s\n", dev, fi_strerror(-rc));
        return -1;
    }
    rc = fi_fabric(p->info->fabric_attr, &p->fabric, NULL);
    if (!rc)
        rc = fi_domain(p->fabric, p->info, &p->domain, NULL);
    if (rc) {
        fprintf(stderr, "reg: noia: fi_fabric/fi_domain(%s): %s\n", p->info->domain_attr->name, fi_strerror(-rc));
        return -1;
    }
    p->access = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    if (peer_remote())
        p->access |= FI_REMOTE_READ | FI_REMOTE_WRITE;
    return 0;
}

static void peer_close(struct peer *p)
{
    if (p->domain)
        fi_close(&p->domain->fid);
    if (p->fabric)
        fi_close(&p->fabric->fid);
    if (p->info)
        fi_freeinfo(p->info);
}
#endif

#ifdef REG_PEER_UCX
/* ------------------------------------------------------------------ UCX */
#include <ucp/api/ucp.h>

#define PEER_NAME "ucx"

struct peer {
    ucp_context_h ctx;
    ucp_mem_h memh;
    unsigned prot;
};

static int peer_reg(void *self, void *buf, size_t len)
{
    struct peer *p = self;
    peer_ncalls++;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_PROT,
        .address = buf,
        .length = len,
        .prot = p->prot,
    };
    ucs_status_t st = ucp_mem_map(p->ctx, &mp, &p->memh);
    if (st != UCS_OK) {
        fprintf(stderr, "reg: ucp_mem_map of %zu bytes: %s\n", len, ucs_status_string(st));
        return -1;
    }
    return 0;
}

static int peer_unreg(void *self)
{
    struct peer *p = self;
    ucs_status_t st = ucp_mem_unmap(p->ctx, p->memh);
    p->memh = NULL;
    if (st != UCS_OK) {
        fprintf(stderr, "reg: ucp_mem_unmap: %s\n", ucs_status_string(st));
        return -1;
    }
    return 0;
}

static int peer_open(const char *dev, struct peer *p)
{
    char net[64];
    snprintf(net, sizeof net, "%s:1", dev);
    setenv("UCX_NET_DEVICES", net, 0);
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        fprintf(stderr, "reg: noia: ucp_config_read: %s\n", ucs_status_string(st));
        return -1;
    }
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_RMA | UCP_FEATURE_TAG,
    };
    st = ucp_init(&params, cfg, &p->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        fprintf(stderr, "reg: noia: ucp_init (%s): %s\n", net, ucs_status_string(st));
        return -1;
    }
    p->prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE;
    if (peer_remote())
        p->prot |= UCP_MEM_MAP_PROT_REMOTE_READ | UCP_MEM_MAP_PROT_REMOTE_WRITE;
    return 0;
}

static void peer_close(struct peer *p)
{
    if (p->ctx)
        ucp_cleanup(p->ctx);
}
#endif

static struct peer peer;

/* Opens the peer backend into *b; non-zero when it does not open (reg.c's "noia"). */
static int peer_backend(const char *dev, struct backend *b)
{
    if (peer_open(dev, &peer))
        return -1;
    *b = (struct backend){peer_reg, peer_unreg, &peer};
    return 0;
}

static unsigned long peer_base_reg, peer_base_dereg, peer_base_calls;

/* Called after the warm-up: the counts printed are those of the timed pairs. */
static void peer_mark(void)
{
    peer_base_reg = __atomic_load_n(&peer_nreg, __ATOMIC_RELAXED);
    peer_base_dereg = __atomic_load_n(&peer_ndereg, __ATOMIC_RELAXED);
    peer_base_calls = peer_ncalls;
}

static void peer_finish(void)
{
    printf("peer regs %lu\npeer deregs %lu\npeer calls %lu\n", peer_nreg - peer_base_reg, peer_ndereg - peer_base_dereg,
           peer_ncalls - peer_base_calls);
    fflush(stdout);
    peer_close(&peer);
}
