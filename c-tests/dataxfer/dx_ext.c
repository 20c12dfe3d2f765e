/* IB extension cases through the dat_ib_extensions.h macros: RDMA write with immediate
 * data, compare-and-swap, fetch-and-add (also from several processes at once). */
#include "dx.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dx_cases.h"

static const DAT_IB_EXTENSION_EVENT_DATA *ext_of(const DAT_EVENT *ev)
{
    return (const DAT_IB_EXTENSION_EVENT_DATA *)(const void *)ev->event_extension_data;
}

/* Waits for an extended completion on `evd`; returns 1 with it in *ev. */
static int wait_ext_at(int line, DAT_EVD_HANDLE evd, DAT_EVENT *ev, DAT_IB_EXT_TYPE type)
{
    DAT_RETURN rc = wait_ev(evd, WAIT_MS, ev);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "no extended completion (dat_evd_wait 0x%08x)", (unsigned)rc);
        return 0;
    }
    if (ev->event_number != (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT) {
        harness_fail(line, "event 0x%x (status %u), expected DAT_IB_DTO_EVENT 0x40000", (unsigned)ev->event_number,
                (unsigned)ev->event_data.dto_completion_event_data.status);
        return 0;
    }
    if (ext_of(ev)->type != type) {
        harness_fail(line, "extended event type %d, expected %d", (int)ext_of(ev)->type, (int)type);
        return 0;
    }
    return 1;
}
#define WAIT_EXT(evd, ev, type) wait_ext_at(__LINE__, evd, ev, type)

static DAT_RETURN post_lacking(struct pair *p, struct mr *sm, struct mr *cm, int op)
{
    DAT_LMR_TRIPLET l = lt(cm, 0, 8);
    DAT_RMR_TRIPLET r = rt(sm, 64, 8);
    return op == 0   ? dat_ib_post_rdma_write_immed(p->ce, 1, &l, ck(1), &r, 7, DAT_COMPLETION_DEFAULT_FLAG)
           : op == 1 ? dat_ib_post_cmp_and_swap(p->ce, 0, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG)
                     : dat_ib_post_fetch_and_add(p->ce, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG);
}

/* On an IA whose provider attribute `attr` says FALSE (iWARP has no immediate data and no
 * atomics), the request `op` (0 write with immediate, 1 compare-and-swap, 2 fetch-and-add) is
 * refused, nothing is queued, and the connection still carries an RDMA write. An IA with none
 * of the IB extensions reports extension_supported DAT_EXTENSION_NONE: while no IA with
 * extensions is open in the process the library answers DAT_NOT_IMPLEMENTED, as Debian's does;
 * with one open (dat2-soft) the call reaches the provider, which refuses it with
 * DAT_MODEL_NOT_SUPPORTED. Returns 0 where the IA has the feature (the case runs as usual). */
static int refused_where_lacking(const char *attr, int op)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_EVENT ev;
    DAT_IA_ATTR ia_attr;
    if (!dx_ia_lacks(attr))
        return 0;
    harness_note("the IA reports %s=FALSE: the request must be refused", attr);
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    fill(cm.buf, 4096, 3);
    memset(&ia_attr, 0, sizeof ia_attr);
    if (EXPECT_RC(dat_ia_query(p.c.ia, NULL, DAT_IA_FIELD_IA_EXTENSIONS_SUPPORTED, &ia_attr, 0, NULL), DAT_SUCCESS) &&
        ia_attr.extension_supported == DAT_EXTENSION_NONE) {
        EXPECT_RC(post_lacking(&p, &sm, &cm, op), DAT_CLASS_ERROR | DAT_NOT_IMPLEMENTED);
        DAT_IA_HANDLE soft;
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        if (EXPECT_RC(dat_ia_openv((DAT_NAME_PTR) "dat2-soft", 8, &async, &soft, DAT_VERSION_MAJOR, DAT_VERSION_MINOR,
                                   DAT_FALSE),
                      DAT_SUCCESS)) {
            EXPECT_RC(post_lacking(&p, &sm, &cm, op), DAT_CLASS_ERROR | DAT_MODEL_NOT_SUPPORTED);
            dat_ia_close(soft, DAT_CLOSE_ABRUPT_FLAG);
        }
    } else {
        EXPECT_RC(post_lacking(&p, &sm, &cm, op), DAT_CLASS_ERROR | DAT_MODEL_NOT_SUPPORTED);
    }
    EXPECT(DAT_GET_TYPE(dat_evd_dequeue(p.c.req, &ev)) == DAT_QUEUE_EMPTY, "the refused request completed");
    DAT_LMR_TRIPLET l = lt(&cm, 0, 8);
    DAT_RMR_TRIPLET r = rt(&sm, 64, 8);
    if (EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(2), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        EXPECT_RC(wait_ev(p.c.req, WAIT_MS, &ev), DAT_SUCCESS)) {
        EXPECT(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "the RDMA write after it: status %u",
               (unsigned)ev.event_data.dto_completion_event_data.status);
        EXPECT(ev.event_data.dto_completion_event_data.user_cookie.as_64 == 2, "the RDMA write's cookie %llu",
               (unsigned long long)ev.event_data.dto_completion_event_data.user_cookie.as_64);
        EXPECT(memcmp(sm.buf + 64, cm.buf, 8) == 0, "the RDMA write after the refused request did not land");
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
    return 1;
}

void case_ext_write_immed(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_EVENT ev;
    if (refused_where_lacking("DAT_IB_IMMED_DATA", 0))
        return;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 8192, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm) || !post_recv1(p.se, &sm, 0, 64, 5))
        goto out;
    fill(cm.buf, 4096, 11);
    DAT_LMR_TRIPLET l = lt(&cm, 0, 1000);
    DAT_RMR_TRIPLET r = rt(&sm, 4096, 1000);
    if (!EXPECT_RC(dat_ib_post_rdma_write_immed(p.ce, 1, &l, ck(9), &r, 0x12345678u, DAT_COMPLETION_DEFAULT_FLAG),
                   DAT_SUCCESS))
        goto out;
    if (WAIT_EXT(p.s.rcv, &ev, DAT_IB_RDMA_WRITE_IMMED_DATA)) {
        EXPECT(ext_of(&ev)->val.immed.data == 0x12345678u, "immediate data 0x%x, expected 0x12345678",
               (unsigned)ext_of(&ev)->val.immed.data);
        EXPECT(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "receive status %u",
               (unsigned)ev.event_data.dto_completion_event_data.status);
        EXPECT(ev.event_data.dto_completion_event_data.user_cookie.as_64 == 5, "receive cookie %llu",
               (unsigned long long)ev.event_data.dto_completion_event_data.user_cookie.as_64);
        EXPECT(ev.event_data.dto_completion_event_data.ep_handle == p.se, "receive EP %p",
               ev.event_data.dto_completion_event_data.ep_handle);
    }
    EXPECT(memcmp(sm.buf + 4096, cm.buf, 1000) == 0, "the written bytes did not land");
    EXPECT(sm.buf[0] == 0, "the receive buffer was written");
    if (WAIT_EXT(p.c.req, &ev, DAT_IB_RDMA_WRITE_IMMED)) {
        EXPECT(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "initiator status %u",
               (unsigned)ev.event_data.dto_completion_event_data.status);
        EXPECT(ev.event_data.dto_completion_event_data.user_cookie.as_64 == 9, "initiator cookie %llu",
               (unsigned long long)ev.event_data.dto_completion_event_data.user_cookie.as_64);
        EXPECT(ext_of(&ev)->status == DAT_OP_SUCCESS, "extension status %d", (int)ext_of(&ev)->status);
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* Remote 8-byte word in sm at offset 64, local result word in cm at offset 0. */
static int atomic_setup(struct pair *p, struct mr *sm, struct mr *cm, DAT_MEM_PRIV_FLAGS priv)
{
    return pair_up(p, dx_port(0), NULL, NULL, 16) && mr_make(&p->s, p->s.pz, 4096, priv, sm) &&
           mr_make(&p->c, p->c.pz, 4096, PRIV_ALL, cm);
}

static uint64_t *word(struct mr *m, size_t off)
{
    return (uint64_t *)(void *)(m->buf + off);
}

static int cmp_swap(struct pair *p, struct mr *sm, struct mr *cm, uint64_t cmp, uint64_t swap, unsigned *status)
{
    DAT_EVENT ev;
    DAT_LMR_TRIPLET l = lt(cm, 0, 8);
    DAT_RMR_TRIPLET r = rt(sm, 64, 8);
    *status = 99;
    if (!EXPECT_RC(dat_ib_post_cmp_and_swap(p->ce, cmp, swap, &l, ck(cmp), &r, DAT_COMPLETION_DEFAULT_FLAG),
                   DAT_SUCCESS) ||
        !WAIT_EXT(p->c.req, &ev, DAT_IB_CMP_AND_SWAP))
        return 0;
    *status = ev.event_data.dto_completion_event_data.status;
    return 1;
}

static int fetch_add(struct pair *p, struct mr *sm, struct mr *cm, uint64_t add, unsigned *status)
{
    DAT_EVENT ev;
    DAT_LMR_TRIPLET l = lt(cm, 0, 8);
    DAT_RMR_TRIPLET r = rt(sm, 64, 8);
    *status = 99;
    if (!EXPECT_RC(dat_ib_post_fetch_and_add(p->ce, add, &l, ck(add), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
        !WAIT_EXT(p->c.req, &ev, DAT_IB_FETCH_AND_ADD))
        return 0;
    *status = ev.event_data.dto_completion_event_data.status;
    return 1;
}

void case_ext_cmp_and_swap(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    unsigned st;
    if (refused_where_lacking("DAT_IB_CMP_AND_SWAP", 1))
        return;
    if (!atomic_setup(&p, &sm, &cm, PRIV_ALL_ATOMIC))
        goto out;
    *word(&sm, 64) = 5;
    *word(&cm, 0) = 0xdeadbeef;
    if (cmp_swap(&p, &sm, &cm, 5, 9, &st)) {
        EXPECT(st == DAT_DTO_SUCCESS, "status %u", st);
        EXPECT(*word(&cm, 0) == 5, "original value %llu returned, expected 5", (unsigned long long)*word(&cm, 0));
        EXPECT(*word(&sm, 64) == 9, "remote value %llu after a matching swap, expected 9",
               (unsigned long long)*word(&sm, 64));
    }
    if (cmp_swap(&p, &sm, &cm, 5, 11, &st)) {
        EXPECT(st == DAT_DTO_SUCCESS, "status %u", st);
        EXPECT(*word(&cm, 0) == 9, "original value %llu returned, expected 9", (unsigned long long)*word(&cm, 0));
        EXPECT(*word(&sm, 64) == 9, "remote value %llu after a failed compare, expected 9",
               (unsigned long long)*word(&sm, 64));
    }
    *word(&sm, 64) = 0x8000000000000001ull;
    if (cmp_swap(&p, &sm, &cm, 0x8000000000000001ull, 0x7fffffffffffffffull, &st)) {
        EXPECT(*word(&cm, 0) == 0x8000000000000001ull && *word(&sm, 64) == 0x7fffffffffffffffull,
               "64-bit values: returned 0x%llx, remote 0x%llx", (unsigned long long)*word(&cm, 0),
               (unsigned long long)*word(&sm, 64));
    }
    EXPECT(*word(&sm, 56) == 0 && *word(&sm, 72) == 0, "the neighbouring words changed");
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_ext_fetch_and_add(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    unsigned st;
    if (refused_where_lacking("DAT_IB_FETCH_AND_ADD", 2))
        return;
    if (!atomic_setup(&p, &sm, &cm, PRIV_ALL_ATOMIC))
        goto out;
    *word(&sm, 64) = 100;
    if (fetch_add(&p, &sm, &cm, 7, &st)) {
        EXPECT(st == DAT_DTO_SUCCESS, "status %u", st);
        EXPECT(*word(&cm, 0) == 100, "original value %llu returned, expected 100", (unsigned long long)*word(&cm, 0));
        EXPECT(*word(&sm, 64) == 107, "remote value %llu, expected 107", (unsigned long long)*word(&sm, 64));
    }
    if (fetch_add(&p, &sm, &cm, 3, &st)) {
        EXPECT(*word(&cm, 0) == 107, "original value %llu returned, expected 107", (unsigned long long)*word(&cm, 0));
        EXPECT(*word(&sm, 64) == 110, "remote value %llu, expected 110", (unsigned long long)*word(&sm, 64));
    }
    /* wraps modulo 2^64 */
    *word(&sm, 64) = ~0ull;
    if (fetch_add(&p, &sm, &cm, 2, &st))
        EXPECT(*word(&cm, 0) == ~0ull && *word(&sm, 64) == 1, "wrap: returned 0x%llx, remote 0x%llx",
               (unsigned long long)*word(&cm, 0), (unsigned long long)*word(&sm, 64));
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_ext_atomic_no_priv(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    unsigned st;
    if (dx_ia_lacks("DAT_IB_FETCH_AND_ADD")) {
        harness_skip("the IA has no atomics (DAT_IB_FETCH_AND_ADD=FALSE; ext_fetch_and_add checks the refusal)");
        return;
    }
    /* remote read and write, but not DAT_IB_MEM_PRIV_REMOTE_ATOMIC */
    if (!atomic_setup(&p, &sm, &cm, PRIV_ALL))
        goto out;
    *word(&sm, 64) = 40;
    if (fetch_add(&p, &sm, &cm, 2, &st))
        EXPECT(st == DAT_DTO_ERR_REMOTE_ACCESS, "fetch_and_add without the atomic privilege: status %u, expected 6", st);
    EXPECT(*word(&sm, 64) == 40, "the remote value changed to %llu", (unsigned long long)*word(&sm, 64));
    EXPECT_CONN_END(p.c.conn, 2000, "initiator");
    EXPECT_CONN_END(p.s.conn, 2000, "target");
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
    /* and a compare-and-swap on a fresh connection */
    if (!atomic_setup(&p, &sm, &cm, PRIV_ALL))
        goto out2;
    *word(&sm, 64) = 40;
    if (cmp_swap(&p, &sm, &cm, 40, 41, &st))
        EXPECT(st == DAT_DTO_ERR_REMOTE_ACCESS, "cmp_and_swap without the atomic privilege: status %u, expected 6", st);
    EXPECT(*word(&sm, 64) == 40, "the remote value changed to %llu", (unsigned long long)*word(&sm, 64));
out2:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* ---- fetch-and-add from two processes, two threads each ----------------------------- */

enum { ADD_PROCS = 2, ADD_THREADS = 2, ADD_EACH = 1000, ADD_TOTAL = ADD_PROCS * ADD_THREADS * ADD_EACH };

struct add_target {
    uint64_t addr;
    uint32_t rkey;
    uint32_t port;
};

struct adder {
    struct node *n;
    DAT_EP_HANDLE ep;
    DAT_EVD_HANDLE evd;
    struct add_target tg;
    uint64_t *out; /* ADD_EACH originals, in shared memory */
    int errors;
};

static void *adder_main(void *arg)
{
    struct adder *a = arg;
    struct mr m;
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN rl;
    DAT_VADDR ra;
    uint64_t local __attribute__((aligned(8))) = 0;
    memset(&r, 0, sizeof r);
    r.for_va = &local;
    memset(&m, 0, sizeof m);
    if (dat_lmr_create(a->n->ia, DAT_MEM_TYPE_VIRTUAL, r, 8, a->n->pz, PRIV_ALL, DAT_VA_TYPE_VA, &m.h, &m.lkey, &m.rkey,
                       &rl, &ra) != DAT_SUCCESS) {
        a->errors++;
        return NULL;
    }
    for (int i = 0; i < ADD_EACH; i++) {
        DAT_LMR_TRIPLET l = {(DAT_VADDR)(uintptr_t)&local, 8, m.lkey};
        DAT_RMR_TRIPLET rr = {a->tg.addr, 8, a->tg.rkey};
        DAT_EVENT ev;
        if (dat_ib_post_fetch_and_add(a->ep, 1, &l, ck((uint64_t)i), &rr, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
            wait_ev(a->evd, 10000, &ev) != DAT_SUCCESS || ev.event_number != (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT ||
            ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
            a->errors++;
            return NULL;
        }
        a->out[i] = local;
    }
    return NULL;
}

static int read_all(int fd, void *buf, size_t n, int ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, ms) != 1)
        return 0;
    return read(fd, buf, n) == (ssize_t)n;
}

/* One process: two EPs to the target, one thread on each. */
static int adder_process(int k, int fd, uint64_t *shared)
{
    struct node n;
    struct adder a[ADD_THREADS];
    pthread_t t[ADD_THREADS];
    struct add_target tg;
    if (!read_all(fd, &tg, sizeof tg, 10000))
        return 10;
    if (!node_open(&n, PROVIDER, 16, 16))
        return 11;
    for (int i = 0; i < ADD_THREADS; i++) {
        DAT_EVENT ev;
        memset(&a[i], 0, sizeof a[i]);
        a[i].n = &n;
        a[i].tg = tg;
        a[i].out = shared + ((size_t)k * ADD_THREADS + (size_t)i) * ADD_EACH;
        if (dat_evd_create(n.ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &a[i].evd) != DAT_SUCCESS ||
            dat_ep_create(n.ia, n.pz, n.rcv, a[i].evd, n.conn, NULL, &a[i].ep) != DAT_SUCCESS ||
            dat_ep_connect(a[i].ep, dx_loopback(0), tg.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                           DAT_CONNECT_DEFAULT_FLAG) != DAT_SUCCESS ||
            wait_ev(n.conn, 10000, &ev) != DAT_SUCCESS || ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
            return 12;
    }
    for (int i = 0; i < ADD_THREADS; i++)
        if (pthread_create(&t[i], NULL, adder_main, &a[i]) != 0)
            return 13;
    int errors = 0;
    for (int i = 0; i < ADD_THREADS; i++) {
        pthread_join(t[i], NULL);
        errors += a[i].errors;
    }
    dat_ia_close(n.ia, DAT_CLOSE_ABRUPT_FLAG);
    return errors ? 14 : 0;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

void case_ext_atomic_concurrent(void)
{
    int fds[ADD_PROCS][2];
    pid_t pids[ADD_PROCS];
    struct node s;
    struct mr m = {0};
    size_t shared_len = (size_t)ADD_TOTAL * sizeof(uint64_t);
    memset(&s, 0, sizeof s);
    if (dx_ia_lacks("DAT_IB_FETCH_AND_ADD")) {
        harness_skip("the IA has no atomics (DAT_IB_FETCH_AND_ADD=FALSE; ext_fetch_and_add checks the refusal)");
        return;
    }
    uint64_t *shared = mmap(NULL, shared_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!EXPECT(shared != MAP_FAILED, "mmap failed"))
        return;
    memset(shared, 0xff, shared_len);
    for (int k = 0; k < ADD_PROCS; k++)
        pids[k] = -1;
    for (int k = 0; k < ADD_PROCS; k++) {
        pids[k] = dx_fork_peer(NULL, fds[k]);
        if (pids[k] == 0) {
            /* Not the others' pipes either. */
            for (int j = 0; j < k; j++)
                close(fds[j][1]);
            _exit(adder_process(k, fds[k][0], shared));
        }
        if (pids[k] < 0)
            goto out;
    }
    if (!node_open(&s, PROVIDER, 16, 16) || !mr_make(&s, s.pz, 64, PRIV_ALL_ATOMIC, &m) ||
        !node_listen(&s, dx_port(0)))
        goto out;
    struct add_target tg = {(uint64_t)(uintptr_t)m.buf, m.rkey, (uint32_t)s.port};
    for (int k = 0; k < ADD_PROCS; k++)
        EXPECT(write(fds[k][1], &tg, sizeof tg) == (ssize_t)sizeof tg, "pipe write failed");
    for (int i = 0; i < ADD_PROCS * ADD_THREADS; i++) {
        DAT_EVENT ev;
        DAT_EP_HANDLE ep;
        if (!EXPECT_RC(wait_ev(s.cr, 10000, &ev), DAT_SUCCESS) || !ep_make(&s, NULL, &ep) ||
            !EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL), DAT_SUCCESS))
            goto out;
    }
    for (int k = 0; k < ADD_PROCS; k++) {
        int status = 0;
        double t0 = dx_now();
        pid_t r;
        while ((r = waitpid(pids[k], &status, WNOHANG)) == 0 && dx_now() - t0 < 30.0)
            dx_sleep_ms(10);
        if (EXPECT(r == pids[k], "adder process %d did not finish within 30 s", k)) {
            EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "adder process %d ended with status 0x%x", k, status);
            pids[k] = -1;
        }
    }
    uint64_t total = *(volatile uint64_t *)m.buf;
    EXPECT(total == ADD_TOTAL, "the counter is %llu after %d fetch_and_adds of 1", (unsigned long long)total, ADD_TOTAL);
    /* each add saw a distinct original value: together exactly 0 .. total-1 */
    qsort(shared, ADD_TOTAL, sizeof *shared, cmp_u64);
    size_t bad = 0;
    for (size_t i = 0; i < ADD_TOTAL; i++)
        bad += shared[i] != i;
    EXPECT(bad == 0, "%zu of the originals returned are not a permutation of 0..%d", bad, ADD_TOTAL - 1);
out:
    for (int k = 0; k < ADD_PROCS; k++)
        if (pids[k] > 0) {
            int status;
            kill(pids[k], SIGKILL);
            while (waitpid(pids[k], &status, 0) < 0 && errno == EINTR)
                ;
        }
    node_close(&s);
    mr_drop(&m);
    munmap(shared, shared_len);
}
