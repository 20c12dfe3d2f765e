/* Helpers of the data path tests: nodes, EPs, connections, registrations. */
#include "dx.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int dx_port_base = 33000;
int dx_slot;

int dx_expect_type(int line, const char *what, DAT_RETURN got, DAT_RETURN want)
{
    if ((got & 0xffff0000u) == want)
        return 1;
    harness_fail(line, "%.200s returned 0x%08x, expected class and type 0x%08x", what, (unsigned)got, (unsigned)want);
    return 0;
}

const char *dx_ia_name(void)
{
    const char *name = getenv("DAT2_TEST_IA");
    return name && *name ? name : SOFT_IA;
}

int dx_on_soft_device(void)
{
    return strcmp(dx_ia_name(), SOFT_IA) == 0;
}

DAT_COUNT dx_max_pdata(DAT_IA_HANDLE ia)
{
    DAT_PROVIDER_ATTR pa;
    memset(&pa, 0, sizeof pa);
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_MAX_PRIVATE_DATA_SIZE, &pa) != DAT_SUCCESS)
        return 0;
    return pa.max_private_data_size;
}

int dx_on_rxe(DAT_IA_HANDLE ia)
{
    DAT_IA_ATTR a;
    memset(&a, 0, sizeof a);
    if (dx_on_soft_device() || dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADAPTER_NAME, &a, 0, NULL) != DAT_SUCCESS)
        return 0;
    return strncmp(a.adapter_name, "rxe", 3) == 0;
}

/* The value of the IA's provider attribute `name`, or NULL (valid while the IA is open). */
static const char *attr_value(DAT_IA_HANDLE ia, const char *name)
{
    DAT_PROVIDER_ATTR pa;
    memset(&pa, 0, sizeof pa);
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa) != DAT_SUCCESS)
        return NULL;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++) {
        const DAT_NAMED_ATTR *a = &pa.provider_specific_attr[i];
        if (a->name && a->value && strcmp(a->name, name) == 0)
            return a->value;
    }
    return NULL;
}

/* Whether the soft IA says cross-memory attach is on (its DAT2_SOFT_CMA attribute): off when
 * DAT2_SOFT_CMA=0, and for a process of the overflow uid (nobody), whose peers are never
 * believed to be the same user. */
int dx_cma_on(DAT_IA_HANDLE ia)
{
    const char *v = attr_value(ia, "DAT2_SOFT_CMA");
    return v && strncmp(v, "on", 2) == 0;
}

int dx_lacks(DAT_IA_HANDLE ia, const char *attr)
{
    const char *v = attr_value(ia, attr);
    return v && strcmp(v, "FALSE") == 0;
}

int dx_says_true(DAT_IA_HANDLE ia, const char *attr)
{
    const char *v = attr_value(ia, attr);
    return v && strcmp(v, "TRUE") == 0;
}

int dx_iwarp(DAT_IA_HANDLE ia)
{
    const char *v = attr_value(ia, "DAT2_VERBS_TRANSPORT");
    return v && strcmp(v, "iWARP") == 0;
}

/* Asks `what` of an IA opened on dx_ia_name() in a child process, so that the caller's process
 * keeps no device of its own (a verbs device opened before a fork would be shared with the
 * children the case forks: its rdma_cm channel and no progress thread). 1, 0, or 0 when the
 * child could not tell. */
static int ask_ia(int (*what)(DAT_IA_HANDLE))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        DAT_IA_HANDLE ia;
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        if (dat_ia_openv((DAT_NAME_PTR)dx_ia_name(), 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE) !=
            DAT_SUCCESS)
            _exit(2);
        int r = what(ia);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        _exit(r ? 1 : 0);
    }
    int status = 0;
    if (pid < 0)
        return 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

static const char *asked_attr;
static int lacks_asked(DAT_IA_HANDLE ia)
{
    return dx_lacks(ia, asked_attr);
}

static int lacks_windows(DAT_IA_HANDLE ia)
{
    DAT_IA_ATTR a;
    memset(&a, 0, sizeof a);
    return dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_MAX_RMRS, &a, 0, NULL) == DAT_SUCCESS && a.max_rmrs == 0;
}

int dx_ia_iwarp(void)
{
    return ask_ia(dx_iwarp);
}

int dx_ia_lacks_windows(void)
{
    return ask_ia(lacks_windows);
}

int dx_ia_lacks(const char *attr)
{
    asked_attr = attr;
    return ask_ia(lacks_asked);
}

int dx_local_protection(DAT_IA_HANDLE ia, unsigned status)
{
    if (status == DAT_DTO_ERR_LOCAL_PROTECTION)
        return 1;
    if (status == DAT_DTO_ERR_FLUSHED && dx_on_rxe(ia)) {
        harness_note("rxe reported the local protection error as a flush");
        return 1;
    }
    if (status == DAT_DTO_ERR_LOCAL_EP && dx_on_rxe(ia)) {
        /* rxe completes a receive whose lkey it refuses as a malformed WQE (IB_WC_LOC_QP_OP_ERR) */
        harness_note("rxe reported the local protection error as a local QP error (LOCAL_EP)");
        return 1;
    }
    if (status == DAT_DTO_ERR_LOCAL_EP && dx_iwarp(ia)) {
        harness_note("siw reported the local protection error as a local QP error (LOCAL_EP)");
        return 1;
    }
    return 0;
}

int dx_remote_error(DAT_IA_HANDLE ia, unsigned status)
{
    if (status == DAT_DTO_ERR_REMOTE_ACCESS)
        return 1;
    if (dx_iwarp(ia) && (status == DAT_DTO_SUCCESS || status == DAT_DTO_ERR_LOCAL_EP || status == DAT_DTO_ERR_FLUSHED)) {
        harness_note("iWARP: the refused RDMA write completed with status %u (it completes once sent; the target's "
                     "TERMINATE ends the connection)",
                     status);
        return 1;
    }
    return 0;
}

DAT_CONN_QUAL dx_port(int k)
{
    return (DAT_CONN_QUAL)(dx_port_base + dx_slot * 8 + k);
}

double dx_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void dx_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The entries of a /proc directory, -1 if it cannot be read. */
static int count_entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int dx_threads(void)
{
    return count_entries("/proc/self/task");
}

int dx_fds(void)
{
    return count_entries("/proc/self/fd");
}

void dx_reap(int pid, int down_fd, double seconds)
{
    int status;
    if (write(down_fd, "x", 1) != 1)
        kill(pid, SIGKILL);
    double w0 = dx_now();
    while (waitpid(pid, &status, WNOHANG) == 0 && dx_now() - w0 < seconds)
        dx_sleep_ms(20);
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

static void close_pipe(int p[2])
{
    if (p) {
        close(p[0]);
        close(p[1]);
    }
}

pid_t dx_fork_peer(int up[2], int down[2])
{
    if (up && !EXPECT(pipe(up) == 0, "pipe failed"))
        return -1;
    if (down && !EXPECT(pipe(down) == 0, "pipe failed")) {
        close_pipe(up);
        return -1;
    }
    /* Not twice the test's output so far, from both processes' buffers. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close_pipe(up);
        close_pipe(down);
        harness_fail(__LINE__, "fork failed");
        return -1;
    }
    /* Each process keeps its own ends: the peer writes up and reads down. */
    if (up)
        close(up[pid == 0 ? 0 : 1]);
    if (down)
        close(down[pid == 0 ? 1 : 0]);
    return pid;
}

/* ---- nodes and EPs ------------------------------------------------------------ */

int node_open(struct node *n, const char *ia_name, DAT_COUNT req_qlen, DAT_COUNT rcv_qlen)
{
    return node_open_ts(n, ia_name, DAT_TRUE, req_qlen, rcv_qlen);
}

int node_open_ts(struct node *n, const char *ia_name, DAT_BOOLEAN thread_safe, DAT_COUNT req_qlen, DAT_COUNT rcv_qlen)
{
    memset(n, 0, sizeof *n);
    n->async = DAT_HANDLE_NULL;
    if (!EXPECT_RC(dat_ia_openv((DAT_NAME_PTR)ia_name, 32, &n->async, &n->ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR,
                                thread_safe),
                   DAT_SUCCESS)) {
        n->ia = DAT_HANDLE_NULL;
        return 0;
    }
    return EXPECT_RC(dat_pz_create(n->ia, &n->pz), DAT_SUCCESS) &&
           EXPECT_RC(dat_evd_create(n->ia, req_qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &n->req),
                     DAT_SUCCESS) &&
           EXPECT_RC(dat_evd_create(n->ia, rcv_qlen, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &n->rcv), DAT_SUCCESS) &&
           EXPECT_RC(dat_evd_create(n->ia, 64, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &n->conn), DAT_SUCCESS) &&
           EXPECT_RC(dat_evd_create(n->ia, 64, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &n->cr), DAT_SUCCESS);
}

void node_close(struct node *n)
{
    if (n->ia != DAT_HANDLE_NULL)
        EXPECT_RC(dat_ia_close(n->ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    n->ia = DAT_HANDLE_NULL;
}

int node_listen(struct node *n, DAT_CONN_QUAL port)
{
    static const int shift[] = {0, 500, 250, 750, 125, 625, 375, 875};
    DAT_RETURN rc = DAT_SUCCESS;
    for (size_t i = 0; i < sizeof shift / sizeof shift[0]; i++) {
        DAT_CONN_QUAL q = port + (DAT_CONN_QUAL)shift[i];
        if (i > 0 && q >= (DAT_CONN_QUAL)dx_port_base + 1000)
            continue;
        rc = dat_psp_create(n->ia, q, n->cr, DAT_PSP_CONSUMER_FLAG, &n->psp);
        if (rc == DAT_SUCCESS) {
            if (i > 0)
                harness_note("port %llu was taken; listening on %llu", (unsigned long long)port, (unsigned long long)q);
            n->port = q;
            return 1;
        }
        if (rc != 0x80020000u) /* DAT_CONN_QUAL_IN_USE */
            break;
    }
    return EXPECT_RC(rc, DAT_SUCCESS);
}

void attr_init(DAT_EP_ATTR *a)
{
    memset(a, 0, sizeof *a);
    a->service_type = DAT_SERVICE_TYPE_RC;
    a->qos = DAT_QOS_BEST_EFFORT;
    a->recv_completion_flags = 0x1f;
    a->request_completion_flags = 0x1f;
    a->max_recv_dtos = 64;
    a->max_request_dtos = 64;
    a->max_recv_iov = 4;
    a->max_request_iov = 4;
    a->max_rdma_read_in = 4;
    a->max_rdma_read_out = 4;
    a->max_rdma_read_iov = 4;
    a->max_rdma_write_iov = 4;
}

int ep_make(struct node *n, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep)
{
    DAT_EP_ATTR a;
    DAT_IA_ATTR ia;
    if (attr) {
        /* an RDMA read's sink takes as many segments as the IA allows (1 on iWARP); more is
         * DAT_INVALID_PARAMETER from dat_ep_create */
        a = *attr;
        memset(&ia, 0, sizeof ia);
        if (dat_ia_query(n->ia, NULL, DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_RDMA_READ, &ia, 0, NULL) == DAT_SUCCESS &&
            ia.max_iov_segments_per_rdma_read > 0 && a.max_rdma_read_iov > ia.max_iov_segments_per_rdma_read)
            a.max_rdma_read_iov = ia.max_iov_segments_per_rdma_read;
        attr = &a;
    }
    return EXPECT_RC(dat_ep_create(n->ia, n->pz, n->rcv, n->req, n->conn, attr, ep), DAT_SUCCESS);
}

/* The address of the IA under test, asked once from an IA opened for the purpose; NULL
 * when that fails (the caller then falls back to loopback and the connect tells). */
static const struct sockaddr_storage *ia_own_address(void)
{
    static struct sockaddr_storage own;
    static int known;
    if (known)
        return known > 0 ? &own : NULL;
    known = -1;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    if (dat_ia_openv((DAT_NAME_PTR)dx_ia_name(), 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE) !=
        DAT_SUCCESS)
        return NULL;
    DAT_IA_ATTR attr;
    memset(&attr, 0, sizeof attr);
    if (dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL) == DAT_SUCCESS && attr.ia_address_ptr) {
        size_t len = attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                 : sizeof(struct sockaddr_in);
        memcpy(&own, attr.ia_address_ptr, len);
        known = 1;
    }
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return known > 0 ? &own : NULL;
}

DAT_IA_ADDRESS_PTR dx_loopback(int ipv6)
{
    static struct sockaddr_in sin;
    static struct sockaddr_in6 sin6;
    if (!dx_on_soft_device()) {
        const struct sockaddr_storage *own = ia_own_address();
        if (own)
            return (DAT_IA_ADDRESS_PTR)own;
    }
    if (ipv6) {
        memset(&sin6, 0, sizeof sin6);
        sin6.sin6_family = AF_INET6;
        sin6.sin6_addr = in6addr_loopback;
        return (DAT_IA_ADDRESS_PTR)&sin6;
    }
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return (DAT_IA_ADDRESS_PTR)&sin;
}

/* Waits for the ESTABLISHED event of `ep` on `evd`. */
int wait_established(int line, DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, const char *who)
{
    DAT_EVENT ev;
    DAT_EVENT_NUMBER num = wait_conn_at(line, evd, WAIT_MS, &ev);
    if (num != DAT_CONNECTION_EVENT_ESTABLISHED) {
        harness_fail(line, "%s: connection event 0x%x, expected ESTABLISHED 0x4001", who, (unsigned)num);
        return 0;
    }
    if (ev.event_data.connect_event_data.ep_handle != ep) {
        harness_fail(line, "%s: ESTABLISHED for EP %p, expected %p", who, ev.event_data.connect_event_data.ep_handle, ep);
        return 0;
    }
    return 1;
}

int connect_eps(struct node *s, DAT_EP_HANDLE se, struct node *c, DAT_EP_HANDLE ce, int ipv6)
{
    DAT_EVENT ev;
    if (!EXPECT_RC(dat_ep_connect(ce, dx_loopback(ipv6), s->port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS))
        return 0;
    if (!EXPECT_RC(wait_ev(s->cr, WAIT_MS, &ev), DAT_SUCCESS))
        return 0;
    if (!EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "server got event 0x%x, expected a connection request",
                (unsigned)ev.event_number))
        return 0;
    if (!EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, se, 0, NULL), DAT_SUCCESS))
        return 0;
    return wait_established(__LINE__, s->conn, se, "server") && wait_established(__LINE__, c->conn, ce, "client");
}

int pair_up(struct pair *p, DAT_CONN_QUAL port, const DAT_EP_ATTR *sattr, const DAT_EP_ATTR *cattr, DAT_COUNT qlen)
{
    memset(p, 0, sizeof *p);
    return node_open(&p->s, PROVIDER, qlen, qlen) && node_open(&p->c, PROVIDER, qlen, qlen) &&
           ep_make(&p->s, sattr, &p->se) && ep_make(&p->c, cattr, &p->ce) && node_listen(&p->s, port) &&
           connect_eps(&p->s, p->se, &p->c, p->ce, 0);
}

int pair_up_mrs(struct pair *p, DAT_CONN_QUAL port, struct mr *cm, struct mr *sm)
{
    return pair_up(p, port, NULL, NULL, 16) && mr_make(&p->c, p->c.pz, 4096, PRIV_ALL, cm) &&
           mr_make(&p->s, p->s.pz, 4096, PRIV_ALL, sm);
}

int pairs_up(struct pair *p, DAT_COUNT qlen, struct pair *q, struct mr *qcm, struct mr *qsm)
{
    memset(q, 0, sizeof *q);
    return pair_up(p, dx_port(0), NULL, NULL, qlen) && pair_up_mrs(q, dx_port(1), qcm, qsm);
}

void pair_down(struct pair *p)
{
    node_close(&p->c);
    node_close(&p->s);
}

/* ---- events ------------------------------------------------------------------- */

DAT_RETURN wait_ev(DAT_EVD_HANDLE evd, int ms, DAT_EVENT *ev)
{
    DAT_COUNT nmore = 0;
    memset(ev, 0, sizeof *ev);
    return dat_evd_wait(evd, (DAT_TIMEOUT)ms * 1000u, 1, ev, &nmore);
}

int wait_dto_at(int line, DAT_EVD_HANDLE evd, int ms, DAT_DTO_COMPLETION_EVENT_DATA *d)
{
    DAT_EVENT ev;
    DAT_RETURN rc = wait_ev(evd, ms, &ev);
    memset(d, 0, sizeof *d);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "no DTO completion within %d ms (dat_evd_wait 0x%08x)", ms, (unsigned)rc);
        return 0;
    }
    if (ev.event_number != DAT_DTO_COMPLETION_EVENT) {
        harness_fail(line, "event 0x%x, expected a DTO completion", (unsigned)ev.event_number);
        return 0;
    }
    *d = ev.event_data.dto_completion_event_data;
    return 1;
}

DAT_EVENT_NUMBER wait_conn_at(int line, DAT_EVD_HANDLE evd, int ms, DAT_EVENT *ev)
{
    DAT_RETURN rc = wait_ev(evd, ms, ev);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "no connection event within %d ms (dat_evd_wait 0x%08x)", ms, (unsigned)rc);
        return 0;
    }
    return ev->event_number;
}

int expect_conn_end_at(int line, DAT_EVD_HANDLE evd, int ms, const char *who)
{
    DAT_EVENT ev;
    DAT_RETURN rc = wait_ev(evd, ms, &ev);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "%s: no BROKEN or DISCONNECTED event within %d ms (dat_evd_wait 0x%08x)", who, ms, (unsigned)rc);
        return 0;
    }
    if (ev.event_number == DAT_CONNECTION_EVENT_BROKEN || ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED)
        return 1;
    harness_fail(line, "%s: connection event 0x%x, expected BROKEN 0x4006 or DISCONNECTED 0x4005", who,
            (unsigned)ev.event_number);
    return 0;
}

int expect_empty_at(int line, DAT_EVD_HANDLE evd, const char *what)
{
    DAT_EVENT ev;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN rc = dat_evd_dequeue(evd, &ev);
    if (rc == RC_QUEUE_EMPTY)
        return 1;
    harness_fail(line, "%s: dequeue returned 0x%08x (event 0x%x, status %u), expected empty", what, (unsigned)rc,
            (unsigned)ev.event_number, (unsigned)ev.event_data.dto_completion_event_data.status);
    return 0;
}

/* ---- memory ------------------------------------------------------------------- */

int mr_make(struct node *n, DAT_PZ_HANDLE pz, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv, struct mr *m)
{
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN rlen = 0;
    DAT_VADDR raddr = 0;
    /* one page of slack after the registration: a provider that failed to check bounds
     * would touch our memory, not someone else's */
    size_t alloc = (((size_t)len + 4095) & ~(size_t)4095) + 4096;
    memset(m, 0, sizeof *m);
    m->buf = aligned_alloc(4096, alloc);
    if (!EXPECT(m->buf != NULL, "out of memory"))
        return 0;
    memset(m->buf, 0, alloc);
    m->alloc = alloc;
    m->len = len;
    memset(&r, 0, sizeof r);
    r.for_va = m->buf;
    return EXPECT_RC(dat_lmr_create(n->ia, DAT_MEM_TYPE_VIRTUAL, r, len, pz, priv, DAT_VA_TYPE_VA, &m->h, &m->lkey,
                                    &m->rkey, &rlen, &raddr),
                     DAT_SUCCESS);
}

int mr_make_shared(struct node *n, DAT_PZ_HANDLE pz, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv, struct mr *m)
{
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN rlen = 0;
    DAT_VADDR raddr = 0;
    size_t alloc = (((size_t)len + 4095) & ~(size_t)4095) + 4096;
    memset(m, 0, sizeof *m);
    int fd = memfd_create("dx-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (!EXPECT(fd >= 0 && ftruncate(fd, (off_t)alloc) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0,
                "sealed memfd: %s", strerror(errno)))
        return 0;
    void *p = mmap(NULL, alloc, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    /* the descriptor stays open (the library finds the file through it); exit closes it */
    if (!EXPECT(p != MAP_FAILED, "mmap of the memfd: %s", strerror(errno)))
        return 0;
    m->buf = p;
    m->shared = 1;
    m->alloc = alloc;
    m->len = len;
    memset(&r, 0, sizeof r);
    r.for_va = m->buf;
    return EXPECT_RC(dat_lmr_create(n->ia, DAT_MEM_TYPE_VIRTUAL, r, len, pz, priv, DAT_VA_TYPE_VA, &m->h, &m->lkey,
                                    &m->rkey, &rlen, &raddr),
                     DAT_SUCCESS);
}

int dx_shm_mappings(void)
{
    char line[512];
    int n = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "/memfd:dx-shm"))
            n++;
    fclose(f);
    return n;
}

/* Frees the LMR (if the case has not) before its memory, as a consumer must: freeing registered
 * memory first would leave a peer's transfer of it, or the device's thread finishing one,
 * reading freed memory (ASan saw the soft device's writer thread in sendmsg do that when the
 * LMR was left to the IA's close). The result is not checked: a case may have freed it. */
void mr_drop(struct mr *m)
{
    if (m->h != DAT_HANDLE_NULL) {
        (void)dat_lmr_free(m->h);
        m->h = DAT_HANDLE_NULL;
    }
    if (m->shared)
        munmap(m->buf, m->alloc);
    else
        free(m->buf);
    m->buf = NULL;
}

DAT_LMR_TRIPLET lt(const struct mr *m, size_t off, DAT_SEG_LENGTH len)
{
    DAT_LMR_TRIPLET t;
    memset(&t, 0, sizeof t);
    t.lmr_context = m->lkey;
    t.virtual_address = (DAT_VADDR)(uintptr_t)(m->buf + off);
    t.segment_length = len;
    return t;
}

DAT_RMR_TRIPLET rt(const struct mr *m, size_t off, DAT_SEG_LENGTH len)
{
    DAT_RMR_TRIPLET t;
    memset(&t, 0, sizeof t);
    t.rmr_context = m->rkey;
    t.virtual_address = (DAT_VADDR)(uintptr_t)(m->buf + off);
    t.segment_length = len;
    return t;
}

DAT_DTO_COOKIE ck(uint64_t v)
{
    DAT_DTO_COOKIE c;
    c.as_64 = v;
    return c;
}

void fill(unsigned char *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (unsigned char)(x >> 16);
    }
}

int post_recv1(DAT_EP_HANDLE ep, const struct mr *m, size_t off, DAT_SEG_LENGTH len, uint64_t cookie)
{
    DAT_LMR_TRIPLET t = lt(m, off, len);
    return EXPECT_RC(dat_ep_post_recv(ep, 1, &t, ck(cookie), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
}
