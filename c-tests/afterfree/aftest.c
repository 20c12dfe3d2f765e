/*
 * Nothing touches memory after the call that gives it up has returned: dat_lmr_free (with
 * requests outstanding that use the LMR, on either side of a connection), an RMR's unbind and
 * dat_rmr_free (with the peer's RDMA writes through the window outstanding), dat_ep_free and
 * dat_ia_close (with the EP's requests and receives outstanding). Like an HCA after
 * ibv_dereg_mr: a request that would touch the memory afterwards completes in error
 * (LOCAL_PROTECTION, or FLUSHED once the connection has broken), never SUCCESS with data moved
 * after the call returned. dat_lmr_free itself returns DAT_SUCCESS with requests outstanding.
 *
 * The cases (each with its peer in one of the modes below):
 *   read_sink_freed_*     k RDMA READs queued (max_rdma_read_out 1), the sink LMR of the last
 *                         one freed right after posting
 *   write_source_freed_*  an RDMA WRITE fenced behind k-1 READs, its source LMR freed right
 *                         after posting and given new contents: none may reach the target
 *   recv_freed_*          a large send landing in a receive whose LMR is freed once the first
 *                         bytes arrived (the send queued behind a READ of ours, so that the
 *                         soft device cannot finish it inside the peer's post)
 *   rmr_unbind_*, rmr_free_*  the peer's RDMA WRITEs through a window of ours (queued behind a
 *                         READ), the window unbound (and its completion taken) or freed once
 *                         the first bytes arrived
 *   ep_free_*, ia_close_* READs queued and a large send landing in a receive, then dat_ep_free
 *                         or dat_ia_close(ABRUPT): neither the sinks nor the receive change
 *   cache_kept_only_when_idle  a device with a registration cache (verbs) keeps the MR of an
 *                         LMR freed with nothing outstanding (the next LMR of the range is a
 *                         hit), and not that of one freed with a READ queued on it
 * and, in stale.c (appended to the table): requests posted with a freed LMR's lmr_context
 * (recv_stale_key_*, send_stale_key_*, their _alias variants, free_while_posting_*).
 *
 * Each case: the side under test (this process) sets up the requests, gives up the memory, and
 * at once writes a pattern of its own into it, from the end backwards (a device that copies
 * forwards then runs into bytes already written). Once every completion has arrived (and, where
 * no completion can tell, a while more) the pattern must be intact. Bytes of the pattern are
 * even and never 0; bytes of data sent by either side are odd; so a byte of the wrong kind says
 * which side wrote it. Each case repeats up to a few times, with a fresh connection, and reports
 * in how many iterations the race was really exercised: the memory was given up before the
 * request in question was done (it did not complete with SUCCESS, or went on moving data).
 * Nothing waits on a sleep alone: landing is seen in memory, completions are waited for; only
 * after dat_ep_free/dat_ia_close, where nothing completes any more, a wrong device is given
 * linger_ms to show itself.
 *
 *   aftest list     the case names, one a line
 *   aftest NAME     one case: "PASS afterfree:NAME [note]", "FAIL afterfree:NAME why" or
 *                   "SKIP afterfree:NAME why"
 *   aftest all      every case in this one process (for development)
 * (the runner of c-tests/common/harness.c), and "aftest peer ..." (below).
 *
 * The peer (the other side of the connection) runs in a thread of this process (_thread), in
 * another process (_fork: the default same-host path, cross-memory attach on the soft device),
 * in another process with DAT2_SOFT_CMA=0 (_tcp, soft device only), or in another process with
 * both sides' memory in sealed memfds (_shm: the soft device's shared-file path, soft only). The
 * peer process is this program started afresh (fork and exec, "aftest peer ..."), so that it
 * inherits no library state; it is driven over a pair of pipes, and its registered memory is a
 * memfd mapped by both processes, so this one can look at what landed there.
 *
 * Sizes: 8 MiB RDMA and 64 MiB sends on the soft device; 1 MiB RDMA and 8 MiB sends on any other
 * IA (DAT2_TEST_IA, e.g. dat2-verbs-rxe0-1 in the VM, where TCG makes everything ~30x slower).
 * Ports: DX_PORT_BASE (default 34000 here) + 8 * (the case's index in the whole table).
 */
#include "dx.h"
#include "af.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PRIV_LOCAL (DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG)
#define NO_STATUS 0xffffu
#define MAXK 16

/* ---- modes and sizes ---------------------------------------------------------------- */

static const char *mode_name(enum mode m)
{
    static const char *names[] = {"peer in a thread", "peer in another process", "peer in another process, TCP",
                                  "peer in another process, shared files"};
    return names[m];
}

struct sizes {
    size_t big;     /* one RDMA request */
    int k;          /* requests queued */
    size_t send;    /* one large send */
    int iters;      /* at most this many iterations */
    int want_hits;  /* stop once the race was exercised this often */
    int wait_ms;    /* for any completion */
    int linger_ms;  /* after ep_free/ia_close: time a wrong device would take to go on writing */
};

static struct sizes sizes(void)
{
    struct sizes s;
    if (dx_on_soft_device()) {
        s.big = 8u << 20;
        s.k = 8;
        s.send = 64u << 20;
        s.iters = 4;
        s.want_hits = 2;
        s.wait_ms = 30000;
        s.linger_ms = 300;
    } else {
        s.big = 1u << 20;
        s.k = 4;
        s.send = 8u << 20;
        s.iters = 2;
        s.want_hits = 1;
        s.wait_ms = 120000;
        s.linger_ms = 2000;
    }
    return s;
}

static const char *st_name(unsigned s)
{
    static const char *names[] = {"SUCCESS",          "FLUSHED",        "LOCAL_LENGTH",      "LOCAL_EP",
                                  "LOCAL_PROTECTION", "BAD_RESPONSE",   "REMOTE_ACCESS",     "REMOTE_RESPONDER",
                                  "TRANSPORT",        "RECEIVER_NOT_READY", "PARTIAL_PACKET", "RMR_OPERATION"};
    if (s < sizeof names / sizeof names[0])
        return names[s];
    return s == NO_STATUS ? "none" : "other";
}

/* ---- patterns ------------------------------------------------------------------------ */

#define ODD_BYTES 0x0101010101010101ull

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Data: every byte odd. Word j of the stream `seed`. */
static uint64_t data_word(uint64_t seed, size_t j)
{
    return mix64(seed * 0x100000001b3ull + j) | ODD_BYTES;
}

/* The pattern written into memory that was given up: every byte even and never 0. It repeats
 * a block of PAT_BLOCK bytes, so that writing it is a memcpy: the faster it is written, the
 * more of what a wrong device writes afterwards stays visible. */
#define PAT_BLOCK 65536
static const unsigned char *pat_block(uint64_t seed)
{
    static unsigned char block[PAT_BLOCK];
    static uint64_t made = 0;
    if (made != seed + 1) {
        for (size_t j = 0; j < PAT_BLOCK / 8; j++) {
            uint64_t w = (mix64(seed * 0x100000001b3ull + j + 0x5555) & ~ODD_BYTES) | (ODD_BYTES << 1);
            memcpy(block + 8 * j, &w, 8);
        }
        made = seed + 1;
    }
    return block;
}

/* Fills `len` bytes (a multiple of 8) with data words base, base+1, ... */
static void fill_data(unsigned char *p, size_t len, uint64_t seed, size_t base)
{
    for (size_t j = 0; j < len / 8; j++) {
        uint64_t w = data_word(seed, base + j);
        memcpy(p + 8 * j, &w, 8);
    }
}

/* Writes the pattern from the last block to the first (a device that copies forwards then
 * runs into bytes already written). */
static void fill_pat_backwards(unsigned char *p, size_t len, uint64_t seed)
{
    const unsigned char *block = pat_block(seed);
    size_t n = (len + PAT_BLOCK - 1) / PAT_BLOCK;
    for (size_t i = n; i-- > 0;) {
        size_t off = i * PAT_BLOCK, part = len - off < PAT_BLOCK ? len - off : PAT_BLOCK;
        memcpy(p + off, block, part);
    }
}

/* How memory compares with the pattern: bytes that differ, and of those the odd ones (data). */
struct diff {
    size_t changed, data;
    size_t first; /* offset of the first changed byte */
};

static struct diff diff_pat(const unsigned char *p, size_t len, uint64_t seed)
{
    struct diff d = {0, 0, 0};
    const unsigned char *block = pat_block(seed);
    for (size_t off = 0; off < len; off += PAT_BLOCK) {
        size_t part = len - off < PAT_BLOCK ? len - off : PAT_BLOCK;
        if (memcmp(p + off, block, part) == 0)
            continue;
        for (size_t i = 0; i < part; i++)
            if (p[off + i] != block[i]) {
                if (d.changed++ == 0)
                    d.first = off + i;
                if (p[off + i] & 1)
                    d.data++;
            }
    }
    return d;
}

/* Bytes that differ from the data words base, base+1, ... */
static size_t diff_data(const unsigned char *p, size_t len, uint64_t seed, size_t base)
{
    size_t n = 0;
    for (size_t j = 0; j < len / 8; j++) {
        uint64_t w = data_word(seed, base + j), got;
        memcpy(&got, p + 8 * j, 8);
        if (got != w)
            for (int b = 0; b < 8; b++)
                n += p[8 * j + (size_t)b] != (unsigned char)(w >> (8 * b));
    }
    return n;
}

/* Bytes of a pattern (even and not 0): what a request read from memory after it was given up. */
static size_t count_pat_bytes(const unsigned char *p, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += p[i] != 0 && !(p[i] & 1);
    return n;
}

/* Polls until the 8 bytes at p are not 0 (data has begun to land), for at most ms. */
static int wait_landing(const unsigned char *p, int ms)
{
    double end = dx_now() + ms / 1000.0;
    int spins = 0;
    while (__atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_ACQUIRE) == 0) {
        if (dx_now() > end)
            return 0;
        if (++spins > 1000)
            sched_yield();
    }
    return 1;
}

/* ---- memory that both processes see ------------------------------------------------- */

struct shared {
    unsigned char *buf;
    size_t len, alloc;
    int fd; /* a sealed memfd (_shm), else -1 */
};

static int shared_map(struct shared *s)
{
    s->buf = mmap(NULL, s->alloc, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (!EXPECT(s->buf != MAP_FAILED, "mmap of %zu bytes: %s", s->alloc, strerror(errno))) {
        s->buf = NULL;
        return 0;
    }
    return 1;
}

static int shared_make(struct shared *s, size_t len, int sealed)
{
    s->len = len;
    s->alloc = ((len + 4095) & ~(size_t)4095) + 4096;
    s->buf = NULL;
    /* a memfd, so that the peer process (exec'd) maps the same pages; only a sealed one is
     * what the soft device's shared-file path takes */
    s->fd = memfd_create(sealed ? "af-shm" : "af-mem", MFD_CLOEXEC | (sealed ? MFD_ALLOW_SEALING : 0));
    if (!EXPECT(s->fd >= 0 && ftruncate(s->fd, (off_t)s->alloc) == 0, "memfd: %s", strerror(errno)))
        return 0;
    if (sealed && !EXPECT(fcntl(s->fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0, "F_SEAL_SHRINK: %s", strerror(errno)))
        return 0;
    return shared_map(s);
}

static void shared_drop(struct shared *s)
{
    if (s->buf)
        munmap(s->buf, s->alloc);
    if (s->fd >= 0)
        close(s->fd);
    s->buf = NULL;
    s->fd = -1;
}

/* Registers the whole of a shared buffer. */
static int mr_over(struct node *n, const struct shared *s, DAT_MEM_PRIV_FLAGS priv, struct mr *m)
{
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN rlen = 0;
    DAT_VADDR raddr = 0;
    memset(m, 0, sizeof *m);
    m->buf = s->buf;
    m->len = s->len;
    m->alloc = s->alloc;
    memset(&r, 0, sizeof r);
    r.for_va = m->buf;
    return EXPECT_RC(dat_lmr_create(n->ia, DAT_MEM_TYPE_VIRTUAL, r, s->len, n->pz, priv, DAT_VA_TYPE_VA, &m->h, &m->lkey,
                                    &m->rkey, &rlen, &raddr),
                     DAT_SUCCESS);
}

/* A registration this process gives up: private memory (mr_make), or a sealed memfd (_shm). */
static int mr_local(struct node *n, enum mode mode, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv, struct mr *m)
{
    return mode == M_SHM ? mr_make_shared(n, n->pz, len, priv, m) : mr_make(n, n->pz, len, priv, m);
}

/* ---- the peer ------------------------------------------------------------------------ */

enum op { OP_QUIT = 1, OP_SEND, OP_WRITE, OP_WAIT };

struct cmd {
    uint32_t op, n;
    uint64_t len, off, addr; /* per request: bytes, offset in the peer's memory, remote address */
    uint32_t rkey, ms;
    /* OP_SEND, OP_WRITE: an RDMA READ of lead_len bytes from (lead_addr, lead_rkey) into the
     * peer's memory at lead_off, posted first (cookie LEAD), so that what follows waits behind
     * it: on the soft device, a request with nothing outstanding ahead of it may be done by the
     * initiator itself before its post returns, and then nothing is left to race with */
    uint64_t lead_len, lead_addr, lead_off;
    uint32_t lead_rkey, pad;
};
#define LEAD (MAXK - 1)

struct reply {
    int32_t ok;
    uint32_t n;    /* requests posted / completions collected */
    uint32_t port; /* where the peer listens */
    uint32_t rkey; /* the peer's memory */
    uint64_t addr;
    uint32_t st[MAXK];
};

struct peer {
    enum mode mode;
    pid_t pid;
    pthread_t thread;
    int running;
    int cmd[2], rep[2]; /* pipes: commands to the peer, replies from it */
    struct shared mem;  /* the peer's registered memory (PRIV_ALL) */
    struct reply hello;
};

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0;
        c += w;
        n -= (size_t)w;
    }
    return 1;
}

static int read_all(int fd, void *p, size_t n, int ms)
{
    char *c = p;
    double end = dx_now() + ms / 1000.0;
    while (n > 0) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int left = (int)((end - dx_now()) * 1000.0);
        if (left < 0 || poll(&pfd, 1, left) <= 0)
            return 0;
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        c += r;
        n -= (size_t)r;
    }
    return 1;
}

/* The peer: listens, accepts one connection, then does what it is told. Plain calls only:
 * the errors it meets on purpose are no failures of the case. */
static int peer_main(int cmd_fd, int rep_fd, struct shared *mem)
{
    struct node n;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_EP_ATTR attr;
    struct mr m;
    struct reply r;
    DAT_EVENT ev;
    struct sizes sz = sizes();
    int ok = 0, posted = 0;
    memset(&r, 0, sizeof r);
    attr_init(&attr);
    attr.max_rdma_read_in = 8;
    attr.max_rdma_read_out = 8;
    if (!node_open(&n, PROVIDER, 64, 64) || !ep_make(&n, &attr, &ep) || !mr_over(&n, mem, PRIV_ALL, &m) ||
        !node_listen(&n, dx_port(0))) {
        write_all(rep_fd, &r, sizeof r);
        goto out;
    }
    r.ok = 1;
    r.port = (uint32_t)n.port;
    r.rkey = m.rkey;
    r.addr = (uint64_t)(uintptr_t)m.buf;
    if (!write_all(rep_fd, &r, sizeof r))
        goto out;
    if (wait_ev(n.cr, sz.wait_ms, &ev) != DAT_SUCCESS || ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
        dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL) != DAT_SUCCESS ||
        wait_ev(n.conn, sz.wait_ms, &ev) != DAT_SUCCESS || ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
        harness_note("peer: no connection (event 0x%x)", (unsigned)ev.event_number);
        goto out;
    }
    ok = 1;
    for (;;) {
        struct cmd c;
        if (!read_all(cmd_fd, &c, sizeof c, 600000) || c.op == OP_QUIT)
            break;
        memset(&r, 0, sizeof r);
        r.ok = 1;
        if ((c.op == OP_SEND || c.op == OP_WRITE) && c.lead_len) {
            DAT_LMR_TRIPLET t = lt(&m, c.lead_off, (DAT_SEG_LENGTH)c.lead_len);
            DAT_RMR_TRIPLET rt_;
            rt_.rmr_context = c.lead_rkey;
            rt_.virtual_address = c.lead_addr;
            rt_.segment_length = (DAT_SEG_LENGTH)c.lead_len;
            if (dat_ep_post_rdma_read(ep, 1, &t, ck(LEAD), &rt_, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
                r.ok = 0;
            else
                posted++;
        }
        if (!r.ok) {
        } else if (c.op == OP_SEND) {
            DAT_LMR_TRIPLET t = lt(&m, c.off, (DAT_SEG_LENGTH)c.len);
            r.ok = dat_ep_post_send(ep, 1, &t, ck(1), DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS;
            r.n = (uint32_t)r.ok;
            posted += r.ok;
        } else if (c.op == OP_WRITE) {
            for (uint32_t i = 0; i < c.n; i++) {
                DAT_LMR_TRIPLET t = lt(&m, c.off, (DAT_SEG_LENGTH)c.len);
                DAT_RMR_TRIPLET rt_;
                rt_.rmr_context = c.rkey;
                rt_.virtual_address = c.addr + i * c.len;
                rt_.segment_length = (DAT_SEG_LENGTH)c.len;
                if (dat_ep_post_rdma_write(ep, 1, &t, ck(i), &rt_, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS) {
                    r.ok = 0;
                    break;
                }
                r.n++;
                posted++;
            }
        } else if (c.op == OP_WAIT) {
            /* every request posted since the last OP_WAIT; statuses by cookie (writes 0..n-1,
             * the send 1, the lead read LEAD) */
            for (int i = 0; i < MAXK; i++)
                r.st[i] = NO_STATUS;
            double end = dx_now() + c.ms / 1000.0;
            while ((int)r.n < posted) {
                int left = (int)((end - dx_now()) * 1000.0);
                if (left <= 0 || wait_ev(n.req, left, &ev) != DAT_SUCCESS)
                    break;
                if (ev.event_number != DAT_DTO_COMPLETION_EVENT)
                    continue;
                uint64_t k = ev.event_data.dto_completion_event_data.user_cookie.as_64;
                if (k < MAXK)
                    r.st[k] = ev.event_data.dto_completion_event_data.status;
                r.n++;
            }
            posted = 0;
        }
        if (!write_all(rep_fd, &r, sizeof r))
            break;
    }
out:
    node_close(&n);
    return ok ? 0 : 1;
}

static void *peer_thread(void *arg)
{
    struct peer *pe = arg;
    peer_main(pe->cmd[0], pe->rep[1], &pe->mem);
    return NULL;
}

/* `aftest peer SLOT CMD_FD REP_FD MEM_FD LEN`: the peer in a process of its own, started
 * afresh (exec) so that it inherits nothing of this process's library state. */
static int peer_process(char **argv)
{
    struct shared mem;
    dx_slot = atoi(argv[2]);
    memset(&mem, 0, sizeof mem);
    mem.fd = atoi(argv[5]);
    mem.len = (size_t)strtoull(argv[6], NULL, 10);
    mem.alloc = ((mem.len + 4095) & ~(size_t)4095) + 4096;
    if (!shared_map(&mem))
        return 1;
    return peer_main(atoi(argv[3]), atoi(argv[4]), &mem);
}

/* Starts a peer whose memory is `len` bytes of data stream `seed` (0: zeros). */
static int peer_start(struct peer *pe, enum mode mode, size_t len, uint64_t seed)
{
    struct sizes sz = sizes();
    memset(pe, 0, sizeof *pe);
    pe->mode = mode;
    pe->mem.fd = -1;
    pe->cmd[0] = pe->cmd[1] = pe->rep[0] = pe->rep[1] = -1;
    if (!shared_make(&pe->mem, len, mode == M_SHM))
        return 0;
    if (seed)
        fill_data(pe->mem.buf, len, seed, 0);
    if (!EXPECT(pipe2(pe->cmd, O_CLOEXEC) == 0 && pipe2(pe->rep, O_CLOEXEC) == 0, "pipe: %s", strerror(errno)))
        return 0;
    if (mode == M_THREAD) {
        if (!EXPECT(pthread_create(&pe->thread, NULL, peer_thread, pe) == 0, "pthread_create failed"))
            return 0;
    } else {
        char a_slot[16], a_cmd[16], a_rep[16], a_fd[16], a_len[32];
        snprintf(a_slot, sizeof a_slot, "%d", dx_slot);
        snprintf(a_cmd, sizeof a_cmd, "%d", pe->cmd[0]);
        snprintf(a_rep, sizeof a_rep, "%d", pe->rep[1]);
        snprintf(a_fd, sizeof a_fd, "%d", pe->mem.fd);
        snprintf(a_len, sizeof a_len, "%zu", len);
        char *args[] = {(char *)"aftest", (char *)"peer", a_slot, a_cmd, a_rep, a_fd, a_len, NULL};
        fflush(stdout);
        pe->pid = fork();
        if (pe->pid == 0) {
            /* only async-signal-safe calls between fork and exec (this process has threads) */
            fcntl(pe->cmd[0], F_SETFD, 0);
            fcntl(pe->rep[1], F_SETFD, 0);
            fcntl(pe->mem.fd, F_SETFD, 0);
            execv("/proc/self/exe", args);
            _exit(127);
        }
        if (!EXPECT(pe->pid > 0, "fork: %s", strerror(errno)))
            return 0;
        /* the peer's ends are the peer's */
        close(pe->cmd[0]);
        close(pe->rep[1]);
        pe->cmd[0] = pe->rep[1] = -1;
    }
    pe->running = 1;
    return EXPECT(read_all(pe->rep[0], &pe->hello, sizeof pe->hello, sz.wait_ms) && pe->hello.ok,
                  "the peer did not start listening");
}

static int peer_do(struct peer *pe, const struct cmd *c, struct reply *r, int ms)
{
    memset(r, 0, sizeof *r);
    return EXPECT(write_all(pe->cmd[1], c, sizeof *c) && read_all(pe->rep[0], r, sizeof *r, ms),
                  "the peer did not answer command %u", (unsigned)c->op);
}

static void peer_stop(struct peer *pe)
{
    if (pe->running) {
        struct cmd c;
        memset(&c, 0, sizeof c);
        c.op = OP_QUIT;
        write_all(pe->cmd[1], &c, sizeof c);
        if (pe->mode == M_THREAD) {
            pthread_join(pe->thread, NULL);
        } else {
            int status;
            double end = dx_now() + sizes().wait_ms / 1000.0;
            while (waitpid(pe->pid, &status, WNOHANG) == 0) {
                if (dx_now() > end) {
                    harness_note("the peer process did not exit: killed");
                    kill(pe->pid, SIGKILL);
                    waitpid(pe->pid, &status, 0);
                    break;
                }
                dx_sleep_ms(5);
            }
        }
    }
    pe->running = 0;
    for (int i = 0; i < 2; i++) {
        if (pe->cmd[i] >= 0)
            close(pe->cmd[i]);
        if (pe->rep[i] >= 0)
            close(pe->rep[i]);
        pe->cmd[i] = pe->rep[i] = -1;
    }
    shared_drop(&pe->mem);
}

/* ---- this side ------------------------------------------------------------------------ */

/* Opens this side's IA and EP and connects them to the peer. */
static int side_up(struct node *n, DAT_EP_HANDLE *ep, const struct peer *pe, const DAT_EP_ATTR *attr)
{
    DAT_EVENT ev;
    struct sizes sz = sizes();
    if (!node_open(n, PROVIDER, 64, 64) || !ep_make(n, attr, ep))
        return 0;
    if (!EXPECT_RC(dat_ep_connect(*ep, dx_loopback(0), (DAT_CONN_QUAL)pe->hello.port, 30000000, 0, NULL,
                                  DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS))
        return 0;
    DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, n->conn, sz.wait_ms, &ev);
    return EXPECT(num == DAT_CONNECTION_EVENT_ESTABLISHED, "connection event 0x%x, expected ESTABLISHED", (unsigned)num);
}

/* Collects `n` DTO completions from evd into st[cookie]; returns how many came. */
static int collect(DAT_EVD_HANDLE evd, int n, int ms, unsigned *st, int nst)
{
    DAT_EVENT ev;
    int got = 0;
    double end = dx_now() + ms / 1000.0;
    for (int i = 0; i < nst; i++)
        st[i] = NO_STATUS;
    while (got < n) {
        int left = (int)((end - dx_now()) * 1000.0);
        if (left <= 0 || wait_ev(evd, left, &ev) != DAT_SUCCESS)
            break;
        if (ev.event_number != DAT_DTO_COMPLETION_EVENT)
            continue;
        uint64_t k = ev.event_data.dto_completion_event_data.user_cookie.as_64;
        if (k < (uint64_t)nst)
            st[k] = ev.event_data.dto_completion_event_data.status;
        got++;
    }
    return got;
}

static void statuses(char *out, size_t size, const unsigned *st, int n)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? " " : "", st_name(st[i]));
}

/* ---- iterations and the verdict --------------------------------------------------------- */

struct tally {
    int iters, hits;
    char last[256]; /* what the last iteration that exercised the race saw */
};

/* One iteration: returns 1 when the memory was given up before the request in question was
 * done (the race was exercised: it did not complete with SUCCESS, or it went on moving data
 * after the memory was given up), 0 when not, and records failures with EXPECT. */
typedef int (*once_fn)(enum mode mode, struct tally *t);

static void repeat(once_fn once, enum mode mode)
{
    struct sizes sz = sizes();
    struct tally t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < sz.iters && t.hits < sz.want_hits; i++) {
        int before = harness_failures();
        int hit = once(mode, &t);
        t.iters++;
        t.hits += hit > 0;
        if (harness_failures() > before || harness_skipped())
            break;
    }
    harness_note("%s: race exercised in %d of %d iterations", mode_name(mode), t.hits, t.iters);
    harness_verdict_note("(%s; race exercised in %d of %d iterations%s%s)", mode_name(mode),
             t.hits, t.iters, t.last[0] ? "; " : "", t.last);
}

/* ---- 1: an RDMA READ queued behind others, its sink LMR freed ------------------------- */

static int once_read_sink(enum mode mode, struct tally *t)
{
    struct sizes sz = sizes();
    struct peer pe;
    struct node n;
    DAT_EP_HANDLE ep;
    DAT_EP_ATTR attr;
    struct mr a = {0}, b = {0};
    unsigned st[MAXK];
    const uint64_t seed = 101, pat = 7;
    int hit = 0, k = sz.k;
    memset(&n, 0, sizeof n);
    attr_init(&attr);
    attr.max_rdma_read_out = 1; /* the reads wait in order behind each other */
    if (!peer_start(&pe, mode, (size_t)k * sz.big, seed) || !side_up(&n, &ep, &pe, &attr) ||
        !mr_local(&n, mode, (DAT_VLEN)(k - 1) * sz.big, PRIV_LOCAL, &a) || !mr_local(&n, mode, sz.big, PRIV_LOCAL, &b))
        goto out;
    for (int i = 0; i < k; i++) {
        DAT_LMR_TRIPLET l = i < k - 1 ? lt(&a, (size_t)i * sz.big, (DAT_SEG_LENGTH)sz.big) : lt(&b, 0, (DAT_SEG_LENGTH)sz.big);
        DAT_RMR_TRIPLET r;
        r.rmr_context = pe.hello.rkey;
        r.virtual_address = pe.hello.addr + (uint64_t)i * sz.big;
        r.segment_length = (DAT_SEG_LENGTH)sz.big;
        if (!EXPECT_RC(dat_ep_post_rdma_read(ep, 1, &l, ck((uint64_t)i), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
    }
    /* at once: the last read has not begun (the others are ahead of it) */
    double t0 = dx_now();
    EXPECT_RC(dat_lmr_free(b.h), DAT_SUCCESS);
    double took = dx_now() - t0;
    fill_pat_backwards(b.buf, sz.big, pat);
    int got = collect(n.req, k, sz.wait_ms, st, MAXK);
    EXPECT(got == k, "%d of %d reads completed within %d ms", got, k, sz.wait_ms);
    char s[128];
    statuses(s, sizeof s, st, k);
    harness_note("read statuses (the last one's sink freed): %s; dat_lmr_free took %.3f ms", s, took * 1000);
    /* the reads before it: what they moved is right */
    for (int i = 0; i < k - 1; i++)
        if (st[i] == DAT_DTO_SUCCESS) {
            size_t bad = diff_data(a.buf + (size_t)i * sz.big, sz.big, seed, (size_t)i * sz.big / 8);
            EXPECT(bad == 0, "read %d completed SUCCESS but %zu bytes of its sink are not the source's", i, bad);
        }
    /* the freed sink: the pattern written after dat_lmr_free returned is intact */
    struct diff d = diff_pat(b.buf, sz.big, pat);
    hit = st[k - 1] != DAT_DTO_SUCCESS || d.changed > 0;
    if (hit)
        snprintf(t->last, sizeof t->last, "the read whose sink was freed: %s", st_name(st[k - 1]));
    EXPECT(d.changed == 0,
           "%zu bytes of the freed sink changed after dat_lmr_free returned (%zu of them the source's data, first at "
           "offset %zu); the read completed %s",
           d.changed, d.data, d.first, st_name(st[k - 1]));
out:
    node_close(&n);
    peer_stop(&pe);
    if (a.buf)
        mr_drop(&a);
    if (b.buf)
        mr_drop(&b);
    return hit;
}

/* ---- 2: an RDMA WRITE queued behind others, its source LMR freed ----------------------- */

/* The write waits behind k-1 RDMA READs (one outstanding at a time, and the write fenced), so
 * that it has not begun when its source is freed. */
static int once_write_source(enum mode mode, struct tally *t)
{
    struct sizes sz = sizes();
    struct peer pe;
    struct node n;
    DAT_EP_HANDLE ep;
    DAT_EP_ATTR attr;
    struct mr a = {0}, b = {0};
    unsigned st[MAXK];
    const uint64_t seed = 201, seed_b = 202, pat = 9;
    int hit = 0, k = sz.k;
    size_t tgt = (size_t)(k - 1) * sz.big; /* the write's target in the peer's memory */
    memset(&n, 0, sizeof n);
    attr_init(&attr);
    attr.max_rdma_read_out = 1;
    if (!peer_start(&pe, mode, tgt + sz.big, seed))
        goto out;
    memset(pe.mem.buf + tgt, 0, sz.big);
    if (!side_up(&n, &ep, &pe, &attr) || !mr_local(&n, mode, (DAT_VLEN)tgt, PRIV_LOCAL, &a) ||
        !mr_local(&n, mode, sz.big, DAT_MEM_PRIV_LOCAL_READ_FLAG, &b))
        goto out;
    fill_data(b.buf, sz.big, seed_b, 0);
    for (int i = 0; i < k; i++) {
        DAT_RMR_TRIPLET r;
        r.rmr_context = pe.hello.rkey;
        r.virtual_address = pe.hello.addr + (uint64_t)i * sz.big;
        r.segment_length = (DAT_SEG_LENGTH)sz.big;
        if (i < k - 1) {
            DAT_LMR_TRIPLET l = lt(&a, (size_t)i * sz.big, (DAT_SEG_LENGTH)sz.big);
            if (!EXPECT_RC(dat_ep_post_rdma_read(ep, 1, &l, ck((uint64_t)i), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
                goto out;
        } else {
            DAT_LMR_TRIPLET l = lt(&b, 0, (DAT_SEG_LENGTH)sz.big);
            if (!EXPECT_RC(dat_ep_post_rdma_write(ep, 1, &l, ck((uint64_t)i), &r, DAT_COMPLETION_BARRIER_FENCE_FLAG),
                           DAT_SUCCESS))
                goto out;
        }
    }
    double t0 = dx_now();
    EXPECT_RC(dat_lmr_free(b.h), DAT_SUCCESS);
    double took = dx_now() - t0;
    /* the source's new contents: bytes the write may never carry now */
    fill_pat_backwards(b.buf, sz.big, pat);
    int got = collect(n.req, k, sz.wait_ms, st, MAXK);
    EXPECT(got == k, "%d of %d requests completed within %d ms", got, k, sz.wait_ms);
    char s[128];
    statuses(s, sizeof s, st, k);
    harness_note("statuses of %d reads and the write whose source was freed: %s; dat_lmr_free took %.3f ms", k - 1, s,
            took * 1000);
    for (int i = 0; i < k - 1; i++)
        if (st[i] == DAT_DTO_SUCCESS) {
            size_t bad = diff_data(a.buf + (size_t)i * sz.big, sz.big, seed, (size_t)i * sz.big / 8);
            EXPECT(bad == 0, "read %d completed SUCCESS but %zu bytes of its sink are not the source's", i, bad);
        }
    const unsigned char *target = pe.mem.buf + tgt;
    size_t leaked = count_pat_bytes(target, sz.big);
    hit = st[k - 1] != DAT_DTO_SUCCESS || leaked > 0;
    if (hit)
        snprintf(t->last, sizeof t->last, "the write whose source was freed: %s", st_name(st[k - 1]));
    EXPECT(leaked == 0,
           "%zu bytes of the source's new contents (written after dat_lmr_free returned) reached the target; the write "
           "completed %s",
           leaked, st_name(st[k - 1]));
    if (st[k - 1] == DAT_DTO_SUCCESS) {
        size_t bad = diff_data(target, sz.big, seed_b, 0);
        EXPECT(bad == 0,
               "the write completed SUCCESS but %zu bytes of its target are not the source's data as it was before "
               "the free",
               bad);
    }
out:
    node_close(&n);
    peer_stop(&pe);
    if (a.buf)
        mr_drop(&a);
    if (b.buf)
        mr_drop(&b);
    return hit;
}

/* ---- 3: a large send landing in a receive whose LMR is freed -------------------------- */

static int once_recv(enum mode mode, struct tally *t)
{
    struct sizes sz = sizes();
    struct peer pe;
    struct node n;
    DAT_EP_HANDLE ep;
    struct mr r = {0}, lead = {0};
    struct cmd c;
    struct reply rep;
    unsigned st[2];
    const uint64_t seed = 301, pat = 11;
    int hit = 0;
    memset(&n, 0, sizeof n);
    memset(&rep, 0, sizeof rep);
    if (!peer_start(&pe, mode, sz.send + sz.big, seed) || !side_up(&n, &ep, &pe, NULL) ||
        !mr_local(&n, mode, sz.send, PRIV_LOCAL, &r) || !mr_make(&n, n.pz, sz.big, PRIV_ALL, &lead) ||
        !post_recv1(ep, &r, 0, (DAT_SEG_LENGTH)sz.send, 0))
        goto out;
    memset(&c, 0, sizeof c);
    c.op = OP_SEND;
    c.len = sz.send;
    /* the send waits behind a read of ours */
    c.lead_len = sz.big;
    c.lead_addr = (uint64_t)(uintptr_t)lead.buf;
    c.lead_rkey = lead.rkey;
    c.lead_off = sz.send;
    if (!peer_do(&pe, &c, &rep, sz.wait_ms) || !EXPECT(rep.ok, "the peer could not post its send"))
        goto out;
    /* the message has begun to land */
    if (!EXPECT(wait_landing(r.buf, sz.wait_ms), "no byte of the send landed within %d ms", sz.wait_ms))
        goto out;
    double t0 = dx_now();
    EXPECT_RC(dat_lmr_free(r.h), DAT_SUCCESS);
    double took = dx_now() - t0;
    fill_pat_backwards(r.buf, sz.send, pat);
    int got = collect(n.rcv, 1, sz.wait_ms, st, 1);
    EXPECT(got == 1, "the receive did not complete within %d ms", sz.wait_ms);
    c.op = OP_WAIT;
    c.n = 1;
    c.ms = (uint32_t)sz.wait_ms;
    if (peer_do(&pe, &c, &rep, sz.wait_ms + 5000))
        EXPECT(rep.n == 2, "%u of the peer's read and send completed within %d ms", rep.n, sz.wait_ms);
    harness_note("receive %s, the peer's send %s; dat_lmr_free took %.3f ms", st_name(st[0]), st_name(rep.st[1]), took * 1000);
    struct diff d = diff_pat(r.buf, sz.send, pat);
    hit = st[0] != DAT_DTO_SUCCESS || d.changed > 0;
    if (hit)
        snprintf(t->last, sizeof t->last, "receive %s, send %s", st_name(st[0]), st_name(rep.st[1]));
    EXPECT(d.changed == 0,
           "%zu bytes of the freed receive buffer changed after dat_lmr_free returned (%zu of them the sender's data, "
           "first at offset %zu); the receive completed %s",
           d.changed, d.data, d.first, st_name(st[0]));
out:
    node_close(&n);
    peer_stop(&pe);
    if (r.buf)
        mr_drop(&r);
    if (lead.buf)
        mr_drop(&lead);
    return hit;
}

/* ---- 4: the peer's RDMA writes through a window that is unbound or freed ---------------- */

/* Whether the IA has no memory windows (max_rmrs 0: Soft-iWARP), where dat_rmr_create is
 * refused with DAT_MODEL_NOT_SUPPORTED (memory:rmr_without_windows checks it). */
static int no_windows(DAT_IA_HANDLE ia)
{
    DAT_IA_ATTR a;
    memset(&a, 0, sizeof a);
    return dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_MAX_RMRS, &a, 0, NULL) == DAT_SUCCESS && a.max_rmrs == 0;
}

static int once_rmr(enum mode mode, struct tally *t, int free_it)
{
    struct sizes sz = sizes();
    struct peer pe;
    struct node n;
    DAT_EP_HANDLE ep;
    struct mr m = {0};
    DAT_RMR_HANDLE rmr = DAT_HANDLE_NULL;
    DAT_RMR_CONTEXT ctx = 0, after = 0;
    DAT_RMR_COOKIE cookie;
    DAT_EVENT ev;
    struct cmd c;
    struct reply rep;
    const uint64_t seed = 401, pat = 13;
    int hit = 0, k = sz.k;
    size_t window = (size_t)k * sz.big;
    memset(&n, 0, sizeof n);
    memset(&rep, 0, sizeof rep);
    if (!peer_start(&pe, mode, 2 * sz.big, seed) || !side_up(&n, &ep, &pe, NULL))
        goto out;
    if (no_windows(n.ia)) {
        harness_skip("the IA has no memory windows (max_rmrs 0; memory:rmr_without_windows checks the refusal)");
        goto out;
    }
    if (!mr_local(&n, mode, window, PRIV_ALL, &m) || !EXPECT_RC(dat_rmr_create(n.pz, &rmr), DAT_SUCCESS))
        goto out;
    DAT_LMR_TRIPLET w = lt(&m, 0, (DAT_SEG_LENGTH)window);
    cookie.as_64 = 1;
    if (!EXPECT_RC(dat_rmr_bind(rmr, m.h, &w, DAT_MEM_PRIV_REMOTE_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG,
                                DAT_VA_TYPE_VA, ep, cookie, DAT_COMPLETION_DEFAULT_FLAG, &ctx),
                   DAT_SUCCESS) ||
        !EXPECT_RC(wait_ev(n.req, sz.wait_ms, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT &&
                    ev.event_data.rmr_completion_event_data.status == DAT_RMR_BIND_SUCCESS,
                "bind: event 0x%x status %u", (unsigned)ev.event_number,
                (unsigned)ev.event_data.rmr_completion_event_data.status))
        goto out;
    memset(&c, 0, sizeof c);
    c.op = OP_WRITE;
    c.n = (uint32_t)k;
    c.len = sz.big;
    c.addr = (uint64_t)(uintptr_t)m.buf;
    c.rkey = ctx;
    /* the writes wait behind a read of ours (of the LMR, not through the window) */
    c.lead_len = sz.big;
    c.lead_addr = (uint64_t)(uintptr_t)m.buf;
    c.lead_rkey = m.rkey;
    c.lead_off = sz.big;
    if (!peer_do(&pe, &c, &rep, sz.wait_ms) || !EXPECT(rep.ok && rep.n == (uint32_t)k, "the peer posted %u of %d writes", rep.n, k))
        goto out;
    if (!EXPECT(wait_landing(m.buf, sz.wait_ms), "no byte of the peer's writes landed within %d ms", sz.wait_ms))
        goto out;
    double t0 = dx_now();
    if (free_it) {
        EXPECT_RC(dat_rmr_free(rmr), DAT_SUCCESS);
        rmr = DAT_HANDLE_NULL;
    } else {
        DAT_LMR_TRIPLET none = lt(&m, 0, 0);
        cookie.as_64 = 2;
        if (!EXPECT_RC(dat_rmr_bind(rmr, m.h, &none, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, ep, cookie,
                                    DAT_COMPLETION_DEFAULT_FLAG, &after),
                       DAT_SUCCESS))
            goto out;
        /* the unbind is done when its completion is reported; writes may complete meanwhile */
        for (;;) {
            if (!EXPECT_RC(wait_ev(n.req, sz.wait_ms, &ev), DAT_SUCCESS))
                goto out;
            if (ev.event_number == DAT_RMR_BIND_COMPLETION_EVENT)
                break;
        }
        harness_note("unbind completed %s", st_name(ev.event_data.rmr_completion_event_data.status));
    }
    double took = dx_now() - t0;
    fill_pat_backwards(m.buf, window, pat);
    c.op = OP_WAIT;
    c.n = (uint32_t)k;
    c.ms = (uint32_t)sz.wait_ms;
    if (peer_do(&pe, &c, &rep, sz.wait_ms + 5000))
        EXPECT(rep.n == (uint32_t)k + 1, "%u of the peer's read and %d writes completed within %d ms", rep.n, k,
               sz.wait_ms);
    char s[128];
    statuses(s, sizeof s, rep.st, k);
    harness_note("the peer's writes: %s; %s took %.3f ms", s, free_it ? "dat_rmr_free" : "the unbind", took * 1000);
    struct diff d = diff_pat(m.buf, window, pat);
    for (int i = 0; i < k; i++)
        if (rep.st[i] != DAT_DTO_SUCCESS)
            hit = 1;
    hit |= d.changed > 0;
    if (hit)
        snprintf(t->last, sizeof t->last, "the peer's writes: %s", s);
    EXPECT(d.changed == 0,
           "%zu bytes of the window changed after %s (%zu of them the peer's data, first at offset %zu); "
           "the peer's writes completed %s",
           d.changed, free_it ? "dat_rmr_free returned" : "the unbind's completion was taken", d.data, d.first, s);
out:
    node_close(&n);
    peer_stop(&pe);
    if (m.buf)
        mr_drop(&m);
    return hit;
}

static int once_rmr_unbind(enum mode mode, struct tally *t)
{
    return once_rmr(mode, t, 0);
}

static int once_rmr_free(enum mode mode, struct tally *t)
{
    return once_rmr(mode, t, 1);
}

/* ---- 5, 6: dat_ep_free / dat_ia_close with reads and a receive outstanding ---------------- */

static int once_teardown(enum mode mode, struct tally *t, int close_ia)
{
    struct sizes sz = sizes();
    struct peer pe;
    struct node n;
    DAT_EP_HANDLE ep;
    DAT_EP_ATTR attr;
    struct mr s = {0}, r = {0};
    struct cmd c;
    struct reply rep;
    unsigned st[MAXK];
    const uint64_t seed = 501, pat_s = 15, pat_r = 17;
    int hit = 0, k = sz.k;
    size_t peer_len = (size_t)k * sz.big > sz.send ? (size_t)k * sz.big : sz.send;
    memset(&n, 0, sizeof n);
    memset(&rep, 0, sizeof rep);
    attr_init(&attr);
    attr.max_rdma_read_out = 1;
    if (!peer_start(&pe, mode, peer_len, seed) || !side_up(&n, &ep, &pe, &attr) ||
        !mr_local(&n, mode, (DAT_VLEN)k * sz.big, PRIV_LOCAL, &s) || !mr_local(&n, mode, sz.send, PRIV_LOCAL, &r) ||
        !post_recv1(ep, &r, 0, (DAT_SEG_LENGTH)sz.send, 0))
        goto out;
    for (int i = 0; i < k; i++) {
        DAT_LMR_TRIPLET l = lt(&s, (size_t)i * sz.big, (DAT_SEG_LENGTH)sz.big);
        DAT_RMR_TRIPLET rr;
        rr.rmr_context = pe.hello.rkey;
        rr.virtual_address = pe.hello.addr + (uint64_t)i * sz.big;
        rr.segment_length = (DAT_SEG_LENGTH)sz.big;
        if (!EXPECT_RC(dat_ep_post_rdma_read(ep, 1, &l, ck((uint64_t)i), &rr, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
    }
    memset(&c, 0, sizeof c);
    c.op = OP_SEND;
    c.len = sz.send;
    if (!peer_do(&pe, &c, &rep, sz.wait_ms) || !EXPECT(rep.ok, "the peer could not post its send"))
        goto out;
    /* the send has begun to land; the reads are in flight, queued, or done */
    if (!EXPECT(wait_landing(r.buf, sz.wait_ms), "no byte of the peer's send landed within %d ms", sz.wait_ms))
        goto out;
    double t0 = dx_now();
    if (close_ia) {
        EXPECT_RC(dat_ia_close(n.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
        n.ia = DAT_HANDLE_NULL;
    } else {
        EXPECT_RC(dat_ep_free(ep), DAT_SUCCESS);
    }
    double took = dx_now() - t0;
    const char *what = close_ia ? "dat_ia_close" : "dat_ep_free";
    fill_pat_backwards(s.buf, (size_t)k * sz.big, pat_s);
    fill_pat_backwards(r.buf, sz.send, pat_r);
    char sl[128] = "", rs[32] = "";
    if (!close_ia) {
        /* what the EP had outstanding completes (flushed) on its EVDs */
        unsigned rst[1];
        int got = collect(n.req, k, sz.wait_ms, st, MAXK);
        int rgot = collect(n.rcv, 1, sz.wait_ms, rst, 1);
        statuses(sl, sizeof sl, st, k);
        snprintf(rs, sizeof rs, "%s", st_name(rst[0]));
        EXPECT(got == k && rgot == 1, "%d of %d reads and %d of 1 receive completed after dat_ep_free", got, k, rgot);
    }
    /* the peer's send ends one way or another once the connection is gone: if it did not
     * succeed, the message was still arriving when the EP or IA went */
    c.op = OP_WAIT;
    c.ms = (uint32_t)sz.wait_ms;
    if (peer_do(&pe, &c, &rep, sz.wait_ms + 5000)) {
        const char *sent = rep.n ? st_name(rep.st[1]) : "no completion";
        hit = !rep.n || rep.st[1] != DAT_DTO_SUCCESS;
        if (close_ia)
            snprintf(t->last, sizeof t->last, "the peer's send %s", sent);
        else
            snprintf(t->last, sizeof t->last, "the peer's send %s; reads %s; receive %s", sent, sl, rs);
        harness_note("%s; %s took %.3f ms", t->last, what, took * 1000);
    }
    /* no completion can tell when a wrong device would stop writing: give it time */
    dx_sleep_ms(sz.linger_ms);
    struct diff ds = diff_pat(s.buf, (size_t)k * sz.big, pat_s);
    struct diff dr = diff_pat(r.buf, sz.send, pat_r);
    hit |= ds.changed > 0 || dr.changed > 0;
    EXPECT(ds.changed == 0, "%zu bytes of the reads' sinks changed after %s returned (%zu of them the peer's data, first at offset %zu)",
           ds.changed, what, ds.data, ds.first);
    EXPECT(dr.changed == 0, "%zu bytes of the receive buffer changed after %s returned (%zu of them the peer's data, first at offset %zu)",
           dr.changed, what, dr.data, dr.first);
out:
    node_close(&n);
    peer_stop(&pe);
    if (s.buf)
        mr_drop(&s);
    if (r.buf)
        mr_drop(&r);
    return hit;
}

static int once_ep_free(enum mode mode, struct tally *t)
{
    return once_teardown(mode, t, 0);
}

static int once_ia_close(enum mode mode, struct tally *t)
{
    return once_teardown(mode, t, 1);
}

/* ---- the registration cache keeps what nothing uses, and only that -------------------- */

/* The value of a provider-specific attribute of the IA, or NULL. */
static const char *provider_attr(DAT_IA_HANDLE ia, const char *name, char *out, size_t size)
{
    DAT_PROVIDER_ATTR pa;
    memset(&pa, 0, sizeof pa);
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa) != DAT_SUCCESS)
        return NULL;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++)
        if (pa.provider_specific_attr[i].name && strcmp(pa.provider_specific_attr[i].name, name) == 0) {
            snprintf(out, size, "%s", pa.provider_specific_attr[i].value ? pa.provider_specific_attr[i].value : "");
            return out;
        }
    return NULL;
}

static long cache_hits(DAT_IA_HANDLE ia)
{
    char v[64];
    return provider_attr(ia, "DAT2_MR_CACHE_HITS", v, sizeof v) ? atol(v) : -1;
}

/* Registers [buf, buf+len) again (the same range, PZ and privileges as before). */
static int mr_again(struct node *n, struct mr *m, DAT_MEM_PRIV_FLAGS priv)
{
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN rlen = 0;
    DAT_VADDR raddr = 0;
    memset(&r, 0, sizeof r);
    r.for_va = m->buf;
    return EXPECT_RC(dat_lmr_create(n->ia, DAT_MEM_TYPE_VIRTUAL, r, m->len, n->pz, priv, DAT_VA_TYPE_VA, &m->h, &m->lkey,
                                    &m->rkey, &rlen, &raddr),
                     DAT_SUCCESS);
}

/* On a device with a registration cache (verbs): a local-only LMR freed with nothing
 * outstanding is kept (the next LMR of the range is a hit), one freed with a request still
 * queued on it is not (a miss), and that request completes in error. */
static int once_cache(enum mode mode, struct tally *t)
{
    struct sizes sz = sizes();
    struct peer pe;
    struct node n;
    DAT_EP_HANDLE ep;
    DAT_EP_ATTR attr;
    struct mr a = {0}, b = {0};
    unsigned st[MAXK];
    char state[128];
    const uint64_t seed = 601, pat = 19;
    int hit = 0, k = sz.k;
    memset(&n, 0, sizeof n);
    attr_init(&attr);
    attr.max_rdma_read_out = 1;
    if (!peer_start(&pe, mode, (size_t)k * sz.big, seed) || !side_up(&n, &ep, &pe, &attr))
        goto out;
    if (!provider_attr(n.ia, "DAT2_MR_CACHE", state, sizeof state) || strncmp(state, "on", 2) != 0) {
        harness_skip("the IA keeps no registrations (DAT2_MR_CACHE is not on)");
        goto out;
    }
    if (!mr_make(&n, n.pz, (DAT_VLEN)(k - 1) * sz.big, PRIV_LOCAL, &a) || !mr_make(&n, n.pz, sz.big, PRIV_LOCAL, &b))
        goto out;
    DAT_RMR_TRIPLET src;
    src.rmr_context = pe.hello.rkey;
    src.virtual_address = pe.hello.addr + (uint64_t)(k - 1) * sz.big;
    src.segment_length = (DAT_SEG_LENGTH)sz.big;
    /* 1: a read into b, completed and its completion taken, then the free: b's MR is kept */
    DAT_LMR_TRIPLET l = lt(&b, 0, (DAT_SEG_LENGTH)sz.big);
    if (!EXPECT_RC(dat_ep_post_rdma_read(ep, 1, &l, ck(0), &src, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
        collect(n.req, 1, sz.wait_ms, st, MAXK) != 1 || !EXPECT(st[0] == DAT_DTO_SUCCESS, "the read: %s", st_name(st[0])))
        goto out;
    long h0 = cache_hits(n.ia);
    EXPECT_RC(dat_lmr_free(b.h), DAT_SUCCESS);
    if (!mr_again(&n, &b, PRIV_LOCAL))
        goto out;
    long h1 = cache_hits(n.ia);
    char sink[8];
    if (provider_attr(n.ia, "DAT2_VERBS_SINK_REMOTE_WRITE", sink, sizeof sink) && strcmp(sink, "TRUE") == 0) {
        /* iWARP RNICs (not siw): an RDMA read's sink is remotely writable, so a registration
         * with local write is never kept (src/builtin/mr/SAFETY.md) */
        EXPECT(h1 == h0, "registration cache hits %ld -> %ld: a registration with local write (remotely writable "
                         "here) was kept",
               h0, h1);
        harness_note("the freed read sink's registration (remotely writable here) was not kept");
        goto out;
    }
    EXPECT(h1 == h0 + 1, "registration cache hits %ld -> %ld after an LMR with nothing outstanding was freed and its "
                         "range registered again: expected a hit",
           h0, h1);
    /* 2: reads queued, the last into b, and b freed at once: not kept, so the same range
     * registers afresh, and the read completes in error */
    for (int i = 0; i < k; i++) {
        DAT_LMR_TRIPLET li = i < k - 1 ? lt(&a, (size_t)i * sz.big, (DAT_SEG_LENGTH)sz.big) : lt(&b, 0, (DAT_SEG_LENGTH)sz.big);
        DAT_RMR_TRIPLET r;
        r.rmr_context = pe.hello.rkey;
        r.virtual_address = pe.hello.addr + (uint64_t)i * sz.big;
        r.segment_length = (DAT_SEG_LENGTH)sz.big;
        if (!EXPECT_RC(dat_ep_post_rdma_read(ep, 1, &li, ck((uint64_t)i), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
    }
    EXPECT_RC(dat_lmr_free(b.h), DAT_SUCCESS);
    fill_pat_backwards(b.buf, sz.big, pat);
    int again = mr_again(&n, &b, PRIV_LOCAL);
    long h2 = cache_hits(n.ia);
    EXPECT(h2 == h1, "registration cache hits %ld -> %ld: an LMR freed with a read still queued on it was kept", h1, h2);
    int got = collect(n.req, k, sz.wait_ms, st, MAXK);
    EXPECT(got == k, "%d of %d reads completed within %d ms", got, k, sz.wait_ms);
    char sl[128];
    statuses(sl, sizeof sl, st, k);
    harness_note("hits %ld, %ld, %ld; reads %s", h0, h1, h2, sl);
    struct diff d = diff_pat(b.buf, sz.big, pat);
    hit = st[k - 1] != DAT_DTO_SUCCESS || d.changed > 0;
    if (hit)
        snprintf(t->last, sizeof t->last, "the read whose sink was freed: %s", st_name(st[k - 1]));
    EXPECT(d.changed == 0, "%zu bytes of the freed sink changed after dat_lmr_free returned (%zu of them the source's data); the read completed %s",
           d.changed, d.data, st_name(st[k - 1]));
    if (again)
        EXPECT_RC(dat_lmr_free(b.h), DAT_SUCCESS);
out:
    node_close(&n);
    peer_stop(&pe);
    if (a.buf)
        mr_drop(&a);
    if (b.buf)
        mr_drop(&b);
    return hit;
}

/* ---- the table ----------------------------------------------------------------------- */

/* The peer mode of the case being run (its arg in the table; set by prepare). */
enum mode case_mode;

/* The case functions: each repeats its once_ function in the case's mode. */
#define REPEAT(f)                                                                                                      \
    static void repeat_##f(void)                                                                                       \
    {                                                                                                                  \
        repeat(f, case_mode);                                                                                          \
    }
REPEAT(once_read_sink)
REPEAT(once_write_source)
REPEAT(once_recv)
REPEAT(once_rmr_unbind)
REPEAT(once_rmr_free)
REPEAT(once_ep_free)
REPEAT(once_ia_close)
REPEAT(once_cache)

#define CASES(n, f)                                                                                                   \
    {#n "_thread", repeat_##f, M_THREAD}, {#n "_fork", repeat_##f, M_FORK}, {#n "_tcp", repeat_##f, M_TCP},         \
        {#n "_shm", repeat_##f, M_SHM}

static const struct harness_case cases[] = {
    CASES(read_sink_freed, once_read_sink),
    CASES(write_source_freed, once_write_source),
    CASES(recv_freed, once_recv),
    {"rmr_unbind_fork", repeat_once_rmr_unbind, M_FORK},
    {"rmr_unbind_tcp", repeat_once_rmr_unbind, M_TCP},
    {"rmr_free_fork", repeat_once_rmr_free, M_FORK},
    {"rmr_free_tcp", repeat_once_rmr_free, M_TCP},
    {"ep_free_fork", repeat_once_ep_free, M_FORK},
    {"ep_free_tcp", repeat_once_ep_free, M_TCP},
    {"ia_close_fork", repeat_once_ia_close, M_FORK},
    {"ia_close_tcp", repeat_once_ia_close, M_TCP},
    {"cache_kept_only_when_idle", repeat_once_cache, M_THREAD},
};

/* Each case has the TCP ports of its slot (its index); _tcp sets DAT2_SOFT_CMA=0, the others
 * unset it; _tcp and _shm concern the soft device only. */
static void prepare(const struct harness_case *c, size_t index)
{
    case_mode = (enum mode)c->arg;
    dx_slot = (int)index;
    if ((case_mode == M_TCP || case_mode == M_SHM) && !dx_on_soft_device()) {
        harness_skip("%s concerns the soft device only (IA %s)",
                     case_mode == M_TCP ? "DAT2_SOFT_CMA=0" : "the shared-file path", dx_ia_name());
        return;
    }
    if (case_mode == M_TCP)
        setenv("DAT2_SOFT_CMA", "0", 1);
    else
        unsetenv("DAT2_SOFT_CMA");
}

int main(int argc, char **argv)
{
    /* one table: these cases, then stale.c's (a case's index is its slot of ports) */
    static struct harness_case all[sizeof cases / sizeof cases[0] + 32];
    size_t n = sizeof cases / sizeof cases[0];
    if (stale_ncases > sizeof all / sizeof all[0] - n) {
        fprintf(stderr, "aftest: stale.c has %zu cases, room for %zu\n", stale_ncases, sizeof all / sizeof all[0] - n);
        return 2;
    }
    memcpy(all, cases, sizeof cases);
    memcpy(all + n, stale_cases, stale_ncases * sizeof stale_cases[0]);
    n += stale_ncases;
    const struct harness_group group = {"afterfree", all, n, prepare, NULL};
    const char *base = getenv("DX_PORT_BASE");
    dx_port_base = base && atoi(base) > 0 ? atoi(base) : 34000;
    signal(SIGPIPE, SIG_IGN);
    if (argc == 7 && strcmp(argv[1], "peer") == 0)
        return peer_process(argv);
    return harness_main(argc, argv, &group);
}
