/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: a two-process benchmark of an IA through the DAT 2.0 API only.
 *
 *   rdma_bench -s [-p PORT] [options]          server: the target of the writes
 *   rdma_bench -c HOST [-p PORT] [options]     client: drives both tests, prints the results
 *
 * After connecting (psp_create / ep_connect / cr_accept on connection qualifier PORT), each
 * side sends the other the RMR triplets of its two registered regions (data and control).
 * The client then measures
 *   - RDMA write bandwidth per message size: a window of writes is kept in flight, each one
 *     signalled, until a byte volume and a minimum time are reached (or a maximum time);
 *   - 8-byte RDMA write ping-pong latency, as ucx_perftest's ucp_put_lat measures it: the
 *     client writes a counter into the server's memory, the server spins on that word (memory,
 *     not a completion) and writes the value back, the client spins on its own word; each
 *     iteration is timed whole (post, the spin, and taking whatever completions are already
 *     there), and the median round trip / 2 is the one-way latency ("dat2 lat 8 USEC");
 *   - the same ping-pong where each side also waits for its own write's completion (polling
 *     dat_evd_dequeue) before it spins on memory ("dat2 latc 8 USEC").
 *     The ping-pong words are in the control region, or with -M in the shared data buffer.
 * Results go to stdout as machine-readable lines ("dat2 bw SIZE MBPS", "dat2 lat 8 USEC"),
 * MB meaning 2^20 bytes (as ucx_perftest counts); details go on lines starting with '#'.
 *
 * With -m (messages) the two sides instead exchange 8-byte messages, sends into a ring of
 * posted receives, over an RC connection or, with -u, between two unreliable datagram (UD)
 * EPs of the IB extensions (the client resolves the server's EP at its PSP, each side sends
 * with dat_ib_post_send_ud to the address handle its UD connection event gave):
 *   - latency: the client sends a ping, the server answers each with a pong; the median
 *     round trip / 2 is the one-way latency ("dat2 msglat 8 USEC");
 *   - message rate: the client streams messages, at most as many as the server has receives
 *     posted and not yet reported back (the server returns a credit message for every 32 it
 *     took and reposted, so that no datagram finds the ring empty and is dropped); messages
 *     per second over the stream, counted when their credit is back ("dat2 rate 8 MSGS").
 * Both sides poll their receive EVD with dat_evd_dequeue (with -k they block in dat_evd_wait). A UD client or server whose IA does
 * not report DAT_IB_UD=TRUE prints "# UD not offered" and exits with status 4.
 *
 * The IA is dat2-soft unless -i names another; run with DAT_OVERRIDE=/nonexistent so that no
 * dat.conf entry shadows the built-in provider.
 * Build: cc -O2 rdma_bench.c -I$ROOT/include -L$ROOT/build -ldat2 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

#define MIB (1024.0 * 1024.0)
#define CTL_LEN 4096
/* Control region layout (both sides). */
#define OFF_PING 0      /* the word the peer writes */
#define OFF_ECHO 64     /* the source of our 8-byte writes */
#define OFF_SEND 256    /* outgoing control message */
#define OFF_RECV 1024   /* two incoming control message slots */
#define MSG_LEN 128
#define MAGIC 0x64617432u

enum msg_kind { MSG_INFO = 1, MSG_LAT = 2, MSG_STOP = 3 };

struct msg {
    uint32_t magic;
    uint32_t kind;
    uint64_t data_addr, data_len;
    uint64_t ctl_addr, ctl_len;
    uint32_t data_rkey, ctl_rkey;
    /* MSG_LAT: the ping-pong's mode (LAT_*) and the counter's last value before it */
    uint32_t mode, pad;
    uint64_t base;
};

/* Latency modes: spin on memory only (ucx_perftest's way), or wait for the write's completion too. */
enum lat_mode { LAT_POLL_MEMORY = 0, LAT_WAIT_COMPLETION = 1 };

static char default_ia[] = "dat2-soft";

static struct {
    int server;
    const char *host;
    char *ia_name;
    unsigned port;
    size_t sizes[16];
    int nsizes;
    double volume;   /* bytes per size */
    double min_time; /* seconds per size */
    double max_time;
    int window;
    int lat_iters;
    int lat_warmup;
    double lat_max_time;
    int yield; /* sched_yield() while spinning (else pause) */
    int block; /* -m: wait for messages in dat_evd_wait instead of polling dat_evd_dequeue */
    int mem;   /* -m: see each message in its receive's memory first, its completion after (-X) */
    int do_bw, do_lat;
    int shared; /* buffers in a sealed memfd (-M) */
    int mark;   /* a getppid() before and after each latency run's measured loop (-I) */
    int no_latc; /* no completion-mode latency run (-K) */
    int msg;    /* 8-byte send/recv messages instead of RDMA (-m) */
    int ud;     /* ... between UD EPs (-u) */
    int rate_max; /* messages of the rate test (-R), at most -T seconds */
    unsigned alarm_secs;
} opt = {
    .ia_name = default_ia,
    .port = 20200,
    .volume = 2.0 * 1024 * 1024 * 1024,
    .min_time = 0.5,
    .max_time = 3.0,
    .window = 8,
    .lat_iters = 20000,
    .lat_warmup = 1000,
    .lat_max_time = 10.0,
    .do_bw = 1,
    .do_lat = 1,
    .yield = 1,
    .alarm_secs = 170,
    .rate_max = 2000000,
};

static DAT_IA_HANDLE ia;
static DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL, req_evd, recv_evd, conn_evd, cr_evd;
static DAT_PZ_HANDLE pz;
static DAT_EP_HANDLE ep;
static DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
static DAT_LMR_HANDLE data_lmr, ctl_lmr;
static DAT_LMR_CONTEXT data_lkey, ctl_lkey;
static DAT_RMR_CONTEXT data_rkey, ctl_rkey;
static char *data_buf, *ctl_buf;
static size_t data_len;
static struct msg peer;
/* Where the ping-pong words are: the control region, or with -M the shared data buffer. */
static char *lat_buf;
static DAT_LMR_CONTEXT lat_lkey;
static uint64_t peer_lat_addr;
static DAT_RMR_CONTEXT peer_lat_rkey;
static int unreaped; /* signalled requests whose completions we have not taken yet */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rdma_bench %s: ", opt.server ? "server" : "client");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void check(DAT_RETURN rc, const char *what)
{
    if (rc == DAT_SUCCESS)
        return;
    const char *major = "", *minor = "";
    dat_strerror(rc, &major, &minor);
    die("%s: %s %s (%#x)", what, major, minor, (unsigned)rc);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void relax(void)
{
    if (opt.yield)
        sched_yield();
    else
        __builtin_ia32_pause();
}

/* Waits for one event on evd (timeout in seconds) and checks its number. */
static void wait_event(DAT_EVD_HANDLE evd, double secs, DAT_EVENT_NUMBER want, DAT_EVENT *ev,
                       const char *what)
{
    DAT_COUNT nmore;
    DAT_RETURN rc = dat_evd_wait(evd, (DAT_TIMEOUT)(secs * 1e6), 1, ev, &nmore);
    if (DAT_GET_TYPE(rc) == DAT_TIMEOUT_EXPIRED)
        die("%s: no event within %.0f s", what, secs);
    check(rc, what);
    if (ev->event_number != want)
        die("%s: event %#x, expected %#x", what, (unsigned)ev->event_number, (unsigned)want);
    if (want == DAT_DTO_COMPLETION_EVENT && ev->event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
        die("%s: DTO status %d", what, (int)ev->event_data.dto_completion_event_data.status);
}

static DAT_LMR_TRIPLET local_seg(DAT_LMR_CONTEXT key, void *addr, size_t len)
{
    DAT_LMR_TRIPLET t;
    t.lmr_context = key;
    t.virtual_address = (DAT_VADDR)(uintptr_t)addr;
    t.segment_length = len;
    return t;
}

static void post_recv_slot(int slot)
{
    DAT_LMR_TRIPLET seg = local_seg(ctl_lkey, ctl_buf + OFF_RECV + slot * MSG_LEN, MSG_LEN);
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = (DAT_UINT64)slot;
    check(dat_ep_post_recv(ep, 1, &seg, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
}

/* A dequeued request completion: it must be a successful DTO completion. */
static void check_completion(DAT_RETURN rc, const DAT_EVENT *ev)
{
    check(rc, "dat_evd_dequeue");
    if (ev->event_number != DAT_DTO_COMPLETION_EVENT ||
        ev->event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
        die("request completion: event %#x status %d", (unsigned)ev->event_number,
            (int)ev->event_data.dto_completion_event_data.status);
}

/* Takes the completions of signalled requests that are already there; blocks only while
 * more than `keep` are outstanding. */
static void reap(int keep)
{
    DAT_EVENT ev;
    while (unreaped > 0) {
        DAT_RETURN rc = dat_evd_dequeue(req_evd, &ev);
        if (rc == DAT_QUEUE_EMPTY || DAT_GET_TYPE(rc) == DAT_QUEUE_EMPTY) {
            if (unreaped <= keep)
                return;
            wait_event(req_evd, 10, DAT_DTO_COMPLETION_EVENT, &ev, "request completion");
        } else {
            check_completion(rc, &ev);
        }
        unreaped--;
    }
}

/* Takes every outstanding completion, spinning on dat_evd_dequeue (the completion mode). */
static void reap_spin(void)
{
    DAT_EVENT ev;
    double t0 = 0;
    unsigned spins = 0;
    while (unreaped > 0) {
        DAT_RETURN rc = dat_evd_dequeue(req_evd, &ev);
        if (DAT_GET_TYPE(rc) == DAT_QUEUE_EMPTY) {
            if (++spins % 65536 == 0) {
                if (t0 == 0)
                    t0 = now();
                else if (now() - t0 > 10)
                    die("no completion within 10 s");
            }
            relax();
            continue;
        }
        check_completion(rc, &ev);
        unreaped--;
    }
}

static void send_msg_lat(enum msg_kind kind, uint32_t mode, uint64_t base)
{
    struct msg *m = (struct msg *)(void *)(ctl_buf + OFF_SEND);
    memset(m, 0, sizeof *m);
    m->magic = MAGIC;
    m->kind = kind;
    m->data_addr = (uint64_t)(uintptr_t)data_buf;
    m->data_len = data_len;
    m->data_rkey = data_rkey;
    m->ctl_addr = (uint64_t)(uintptr_t)ctl_buf;
    m->ctl_len = CTL_LEN;
    m->ctl_rkey = ctl_rkey;
    m->mode = mode;
    m->base = base;
    DAT_LMR_TRIPLET seg = local_seg(ctl_lkey, m, sizeof *m);
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = 0;
    reap(0);
    check(dat_ep_post_send(ep, 1, &seg, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_send");
    unreaped++;
    reap(0);
}

static void send_msg(enum msg_kind kind)
{
    send_msg_lat(kind, 0, 0);
}

/* Checks a received control message (from a receive completion) and reposts its slot. */
static struct msg take_msg(const DAT_EVENT *ev)
{
    int slot = (int)ev->event_data.dto_completion_event_data.user_cookie.as_64;
    struct msg m;
    memcpy(&m, ctl_buf + OFF_RECV + slot * MSG_LEN, sizeof m);
    if (m.magic != MAGIC)
        die("bad control message");
    post_recv_slot(slot);
    return m;
}

static struct msg recv_msg(double secs, const char *what)
{
    DAT_EVENT ev;
    wait_event(recv_evd, secs, DAT_DTO_COMPLETION_EVENT, &ev, what);
    return take_msg(&ev);
}

static void post_write(void *src, size_t len, DAT_LMR_CONTEXT lkey, uint64_t raddr,
                       DAT_RMR_CONTEXT rkey, uint64_t id)
{
    DAT_LMR_TRIPLET seg = local_seg(lkey, src, len);
    DAT_RMR_TRIPLET rseg;
    rseg.rmr_context = rkey;
    rseg.virtual_address = raddr;
    rseg.segment_length = len;
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = id;
    check(dat_ep_post_rdma_write(ep, 1, &seg, cookie, &rseg, DAT_COMPLETION_DEFAULT_FLAG),
          "dat_ep_post_rdma_write");
    unreaped++;
}

/* ---------------------------------------------------------------------------------------- */

static void setup(void)
{
    check(dat_ia_open(opt.ia_name, 16, &async_evd, &ia), "dat_ia_open");
    check(dat_pz_create(ia, &pz), "dat_pz_create");
    check(dat_evd_create(ia, 256, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req_evd), "dat_evd_create");
    check(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &recv_evd), "dat_evd_create");
    check(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd),
          "dat_evd_create");
    if (opt.server)
        check(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), "dat_evd_create");

    data_len = 0;
    for (int i = 0; i < opt.nsizes; i++)
        if (opt.sizes[i] > data_len)
            data_len = opt.sizes[i];
    if (data_len < 4096)
        data_len = 4096;
    if (opt.shared) {
        /* Shared memory, as UCX's posix transport allocates it: a memfd that cannot shrink,
         * mapped shared (dat2-soft then copies between the two processes' files, shm.rs). */
        int fd = memfd_create("rdma_bench", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)data_len) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
            die("memfd for the data buffer: %s", strerror(errno));
        data_buf = mmap(NULL, data_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (data_buf == MAP_FAILED)
            die("mmap of the data buffer: %s", strerror(errno));
        /* fd stays open: the library finds the file through it */
        if (posix_memalign((void **)&ctl_buf, 4096, CTL_LEN))
            die("out of memory");
    } else if (posix_memalign((void **)&data_buf, 4096, data_len) || posix_memalign((void **)&ctl_buf, 4096, CTL_LEN))
        die("out of memory");
    memset(data_buf, opt.server ? 0 : 0x5a, data_len); /* fault the pages in */
    memset(ctl_buf, 0, CTL_LEN);

    DAT_REGION_DESCRIPTION region;
    DAT_VLEN reg_len;
    DAT_VADDR reg_addr;
    region.for_va = data_buf;
    check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, data_len, pz, DAT_MEM_PRIV_ALL_FLAG,
                         DAT_VA_TYPE_VA, &data_lmr, &data_lkey, &data_rkey, &reg_len, &reg_addr),
          "dat_lmr_create (data)");
    region.for_va = ctl_buf;
    check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, CTL_LEN, pz, DAT_MEM_PRIV_ALL_FLAG,
                         DAT_VA_TYPE_VA, &ctl_lmr, &ctl_lkey, &ctl_rkey, &reg_len, &reg_addr),
          "dat_lmr_create (control)");
    check(dat_ep_create(ia, pz, recv_evd, req_evd, conn_evd, NULL, &ep), "dat_ep_create");
    post_recv_slot(0);
    post_recv_slot(1);
}

static void teardown(void)
{
    DAT_EVENT ev;
    DAT_COUNT nmore;
    reap(0);
    dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG);
    /* Both sides disconnect; wait (briefly) until ours is reported. */
    while (dat_evd_wait(conn_evd, 2000000, 1, &ev, &nmore) == DAT_SUCCESS)
        if (ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED ||
            ev.event_number == DAT_CONNECTION_EVENT_BROKEN)
            break;
    while (dat_evd_dequeue(recv_evd, &ev) == DAT_SUCCESS)
        ;
    while (dat_evd_dequeue(req_evd, &ev) == DAT_SUCCESS)
        ;
    check(dat_ep_free(ep), "dat_ep_free");
    if (psp != DAT_HANDLE_NULL)
        check(dat_psp_free(psp), "dat_psp_free");
    check(dat_lmr_free(data_lmr), "dat_lmr_free");
    check(dat_lmr_free(ctl_lmr), "dat_lmr_free");
    check(dat_evd_free(req_evd), "dat_evd_free");
    check(dat_evd_free(recv_evd), "dat_evd_free");
    check(dat_evd_free(conn_evd), "dat_evd_free");
    if (opt.server)
        check(dat_evd_free(cr_evd), "dat_evd_free");
    check(dat_pz_free(pz), "dat_pz_free");
    check(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
    if (opt.shared)
        munmap(data_buf, data_len);
    else
        free(data_buf);
    free(ctl_buf);
}

static void exchange_info(void)
{
    send_msg(MSG_INFO);
    peer = recv_msg(10, "peer's RMR triplets");
    if (peer.kind != MSG_INFO)
        die("expected the peer's RMR triplets");
    if (opt.shared) {
        /* Both ends of the ping-pong in shared memory (the data buffers, idle by then). */
        lat_buf = data_buf;
        lat_lkey = data_lkey;
        peer_lat_addr = peer.data_addr;
        peer_lat_rkey = peer.data_rkey;
    } else {
        lat_buf = ctl_buf;
        lat_lkey = ctl_lkey;
        peer_lat_addr = peer.ctl_addr;
        peer_lat_rkey = peer.ctl_rkey;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Server */

/* The server's half of the ping-pong: echo each counter value the client writes (after
 * `base`), until the client's next control message arrives, which it returns. In the
 * completion mode each echo's completion is taken before the next spin. */
static struct msg echo_loop(enum lat_mode mode, uint64_t base)
{
    volatile uint64_t *ping = (volatile uint64_t *)(void *)(lat_buf + OFF_PING);
    uint64_t *echo = (uint64_t *)(void *)(lat_buf + OFF_ECHO);
    /* The client's first write may land before we get here, so the start is not read from
     * memory: it comes with the request. */
    uint64_t expect = base + 1;
    double deadline = now() + 150;
    DAT_EVENT ev;
    for (;; expect++) {
        unsigned spins = 0;
        while (*ping != expect) {
            if (++spins % 4096 != 0) {
                relax();
                continue;
            }
            if (dat_evd_dequeue(recv_evd, &ev) == DAT_SUCCESS) {
                if (ev.event_number != DAT_DTO_COMPLETION_EVENT ||
                    ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
                    DAT_EVENT cev;
                    unsigned cn = dat_evd_dequeue(conn_evd, &cev) == DAT_SUCCESS ? (unsigned)cev.event_number : 0;
                    die("latency test: event %#x status %d (connection event %#x)", (unsigned)ev.event_number,
                        (int)ev.event_data.dto_completion_event_data.status, cn);
                }
                return take_msg(&ev);
            }
            if (now() > deadline)
                die("latency test: the client went quiet");
        }
        *echo = expect;
        post_write(echo, 8, lat_lkey, peer_lat_addr + OFF_PING, peer_lat_rkey, expect);
        if (mode == LAT_WAIT_COMPLETION)
            reap_spin();
        else
            reap(64);
    }
}

static void run_server(void)
{
    DAT_EVENT ev;
    check(dat_psp_create(ia, opt.port, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create");
    printf("# server listening on %s, conn qual %u\n", opt.ia_name, opt.port);
    fflush(stdout);
    wait_event(cr_evd, 60, DAT_CONNECTION_REQUEST_EVENT, &ev, "connection request");
    check(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL), "dat_cr_accept");
    wait_event(conn_evd, 10, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "connection established");
    exchange_info();

    /* Idle (blocked, not spinning) through the bandwidth test, then echo until told to stop. */
    struct msg m = recv_msg(150, "the client's next step");
    while (m.kind == MSG_LAT)
        m = echo_loop((enum lat_mode)m.mode, m.base);
    if (m.kind != MSG_STOP)
        die("unexpected control message %u", m.kind);
    teardown();
}

/* ---------------------------------------------------------------------------------------- */
/* Client */

static void connect_to_server(void)
{
    struct addrinfo hints, *ai;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(opt.host, NULL, &hints, &ai);
    if (gai != 0)
        die("%s: %s", opt.host, gai_strerror(gai));
    DAT_EVENT ev;
    /* The server may not be listening yet: retry a refused connection for a while. */
    for (int attempt = 0;; attempt++) {
        check(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)ai->ai_addr, opt.port, 5000000, 0, NULL,
                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              "dat_ep_connect");
        DAT_COUNT nmore;
        DAT_RETURN rc = dat_evd_wait(conn_evd, 10000000, 1, &ev, &nmore);
        check(rc, "waiting for the connection");
        if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
            break;
        if (ev.event_number != DAT_CONNECTION_EVENT_NON_PEER_REJECTED || attempt >= 100)
            die("connect to %s:%u: event %#x", opt.host, opt.port, (unsigned)ev.event_number);
        /* The EP is disconnected now: reset it, repost the receives, try again. */
        check(dat_ep_reset(ep), "dat_ep_reset");
        while (dat_evd_dequeue(recv_evd, &ev) == DAT_SUCCESS)
            ;
        post_recv_slot(0);
        post_recv_slot(1);
        usleep(100000);
    }
    freeaddrinfo(ai);
}

static void bandwidth(size_t size)
{
    DAT_EVENT ev;
    int inflight = 0;
    uint64_t posted = 0, done = 0;
    double t0 = 0;
    int measuring = 0, stop = 0;
    /* Warm-up: two windows' worth, then the clock starts. */
    uint64_t warm = (uint64_t)opt.window * 2;
    if (size > data_len || size > peer.data_len)
        die("size %zu exceeds the buffers", size);
    for (;;) {
        while (!stop && inflight < opt.window) {
            post_write(data_buf, size, data_lkey, peer.data_addr, peer.data_rkey, posted++);
            inflight++;
        }
        wait_event(req_evd, 10, DAT_DTO_COMPLETION_EVENT, &ev, "RDMA write completion");
        unreaped--;
        inflight--;
        if (ev.event_data.dto_completion_event_data.transfered_length != size)
            die("write completion: %llu bytes, expected %zu",
                (unsigned long long)ev.event_data.dto_completion_event_data.transfered_length, size);
        if (!measuring) {
            if (--warm == 0) {
                measuring = 1;
                t0 = now();
            }
            continue;
        }
        done++;
        double el = now() - t0;
        if (!stop && (((double)done * (double)size >= opt.volume && el >= opt.min_time) || el >= opt.max_time))
            stop = 1;
        if (stop && inflight == 0)
            break;
    }
    double secs = now() - t0;
    double mbs = (double)done * (double)size / secs / MIB;
    printf("dat2 bw %zu %.1f\n", size, mbs);
    printf("# bw %zu: %" PRIu64 " writes, %.2f GiB in %.3f s, window %d\n", size, done,
           (double)done * (double)size / (MIB * 1024), secs, opt.window);
    fflush(stdout);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One ping-pong run in `mode`, the counter continuing from *v; prints "dat2 lat 8 USEC"
 * (memory polled) or "dat2 latc 8 USEC" (each write's completion taken too). Each
 * iteration is timed whole, from one iteration's start to the next's, as ucx_perftest does. */
static void latency(enum lat_mode mode, uint64_t *v)
{
    send_msg_lat(MSG_LAT, mode, *v);
    volatile uint64_t *ping = (volatile uint64_t *)(void *)(lat_buf + OFF_PING);
    uint64_t *echo = (uint64_t *)(void *)(lat_buf + OFF_ECHO);
    int total = opt.lat_warmup + opt.lat_iters;
    double *rtt = malloc(sizeof(double) * (size_t)total);
    if (!rtt)
        die("out of memory");
    int n = 0;
    double start = now(), t = start;
    for (int i = 0; i < total; i++) {
        if (opt.mark && i == opt.lat_warmup)
            getppid(); /* the first mark for bench/inscount */
        ++*v;
        *echo = *v;
        post_write(echo, 8, lat_lkey, peer_lat_addr + OFF_PING, peer_lat_rkey, *v);
        if (mode == LAT_WAIT_COMPLETION)
            reap_spin();
        unsigned spins = 0;
        while (*ping != *v) {
            if (++spins % 65536 == 0 && now() - t > 10)
                die("latency test: no echo of %" PRIu64 " within 10 s", *v);
            relax();
        }
        if (mode == LAT_POLL_MEMORY)
            reap(64);
        double end = now();
        rtt[i] = end - t;
        t = end;
        n = i + 1;
        if (i >= opt.lat_warmup && end - start > opt.lat_max_time)
            break;
    }
    if (opt.mark)
        getppid(); /* the second mark */
    reap(0);
    int m = n - opt.lat_warmup;
    if (m <= 0)
        die("latency test: no measured iterations");
    double *s = rtt + opt.lat_warmup;
    double sum = 0;
    for (int i = 0; i < m; i++)
        sum += s[i];
    qsort(s, (size_t)m, sizeof *s, cmp_double);
    double med = s[m / 2] / 2 * 1e6;
    const char *key = mode == LAT_POLL_MEMORY ? "lat" : "latc";
    printf("dat2 %s 8 %.3f\n", key, med);
    printf("# %s 8 (%s): one-way (rtt/2) over %d iterations after %d warm-up: median %.3f us, "
           "mean %.3f, min %.3f, p90 %.3f, p99 %.3f\n",
           key, mode == LAT_POLL_MEMORY ? "target memory polled" : "each write's completion taken",
           m, opt.lat_warmup, med, sum / m / 2 * 1e6, s[0] / 2 * 1e6, s[(size_t)(m * 0.9)] / 2 * 1e6,
           s[(size_t)(m * 0.99)] / 2 * 1e6);
    fflush(stdout);
    free(rtt);
}

static void run_client(void)
{
    connect_to_server();
    exchange_info();
    if (opt.do_bw)
        for (int i = 0; i < opt.nsizes; i++)
            bandwidth(opt.sizes[i]);
    if (opt.do_lat) {
        uint64_t v = 0;
        latency(LAT_POLL_MEMORY, &v);
        if (!opt.no_latc)
            latency(LAT_WAIT_COMPLETION, &v);
    }
    send_msg(MSG_STOP);
    teardown();
}

/* ---------------------------------------------------------------------------------------- */
/* Messages: 8-byte send/recv over RC, or datagrams between UD EPs (-m, -u) */

#define RING 256         /* receives each side keeps posted */
#define SLOT 128         /* bytes per receive (a UD receive gives the first 40 to the GRH) */
#define SEND_SLOTS 1024  /* 8-byte source slots, used in turn (a send may be read after the post) */
#define CREDIT_BATCH 32  /* the server returns credits this many at a time */
#define GRH_LEN 40

enum mkind { M_PING = 1, M_PONG = 2, M_DATA = 3, M_CREDIT = 4, M_STOP = 5 };

static DAT_IB_ADDR_HANDLE peer_ah; /* UD: where our datagrams go */
static DAT_LMR_HANDLE ring_lmr;
static DAT_LMR_CONTEXT ring_lkey;
static char *ring_buf; /* RING receive slots, then SEND_SLOTS send slots of 8 bytes */
static unsigned last_slot; /* the slot of the receive m_recv took last */
static unsigned send_next;

static void m_post_recv(unsigned slot)
{
    /* -X: the slot reads 0 until a message lands (every kind is nonzero) */
    memset(ring_buf + (size_t)slot * SLOT, 0, SLOT);
    DAT_LMR_TRIPLET seg = local_seg(ring_lkey, ring_buf + (size_t)slot * SLOT, SLOT);
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = slot;
    check(dat_ep_post_recv(ep, 1, &seg, cookie, DAT_COMPLETION_DEFAULT_FLAG), "dat_ep_post_recv");
}

/* Sends one 8-byte message (kind, value). A successful send queues no event (suppressed);
 * a failed one does, and the receive loop reports it. */
static void m_send(uint32_t kind, uint32_t value)
{
    uint32_t *p = (uint32_t *)(void *)(ring_buf + (size_t)RING * SLOT + (size_t)(send_next++ % SEND_SLOTS) * 8);
    p[0] = kind;
    p[1] = value;
    DAT_LMR_TRIPLET seg = local_seg(ring_lkey, p, 8);
    DAT_DTO_COOKIE cookie;
    cookie.as_64 = kind;
    DAT_RETURN rc;
    for (int tries = 0;; tries++) {
        rc = opt.ud ? dat_ib_post_send_ud(ep, 1, &seg, &peer_ah, cookie, DAT_COMPLETION_SUPPRESS_FLAG)
                    : dat_ep_post_send(ep, 1, &seg, cookie, DAT_COMPLETION_SUPPRESS_FLAG);
        /* a full send queue drains by itself: try again */
        if (DAT_GET_TYPE(rc) != DAT_INSUFFICIENT_RESOURCES || tries > 1000000)
            break;
        relax();
    }
    check(rc, opt.ud ? "dat_ib_post_send_ud" : "dat_ep_post_send");
}

/* Takes the next message within `secs` (0 when none came), reposting its receive. */
static int m_recv(double secs, uint32_t *kind, uint32_t *value)
{
    DAT_EVENT ev;
    double end = 0;
    unsigned spins = 0;
    for (;;) {
        DAT_COUNT nmore;
        DAT_RETURN rc = opt.block ? dat_evd_wait(recv_evd, (DAT_TIMEOUT)(secs * 1e6), 1, &ev, &nmore)
                                  : dat_evd_dequeue(recv_evd, &ev);
        if (opt.block && DAT_GET_TYPE(rc) == DAT_TIMEOUT_EXPIRED)
            return 0;
        if (rc == DAT_SUCCESS)
            break;
        if (rc != DAT_QUEUE_EMPTY && DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY)
            check(rc, "dat_evd_dequeue");
        if (++spins % 256 == 0) {
            double t = now();
            if (end == 0)
                end = t + secs;
            else if (t > end)
                return 0;
            /* a failed (unsuppressed) send shows up here */
            if (dat_evd_dequeue(req_evd, &ev) == DAT_SUCCESS)
                die("send completion: event %#x status %d", (unsigned)ev.event_number,
                    (int)ev.event_data.dto_completion_event_data.status);
        }
        relax();
    }
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
    DAT_EVENT_NUMBER want = opt.ud ? (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT : DAT_DTO_COMPLETION_EVENT;
    DAT_COUNT len = opt.ud ? GRH_LEN + 8 : 8;
    if (ev.event_number != want || d->status != DAT_DTO_SUCCESS || d->transfered_length != (DAT_VLEN)len)
        die("receive: event %#x status %d length %llu", (unsigned)ev.event_number, (int)d->status,
            (unsigned long long)d->transfered_length);
    unsigned slot = (unsigned)d->user_cookie.as_64;
    last_slot = slot;
    const uint32_t *p = (const uint32_t *)(const void *)(ring_buf + (size_t)slot * SLOT + (opt.ud ? GRH_LEN : 0));
    *kind = p[0];
    *value = p[1];
    m_post_recv(slot);
    return 1;
}

/* -X: the number of messages seen in memory, whose receives are taken in order: message k
 * lands in the receive posted k-th, slot k % RING (each slot is reposted as it completes). */
static uint64_t mem_seen, mem_reaped;

/* Spins on the next message's receive memory until it lands, within `secs` (0: none came). */
static int m_recv_mem(double secs, uint32_t *kind, uint32_t *value)
{
    volatile uint32_t *p = (volatile uint32_t *)(void *)(ring_buf + (size_t)(mem_seen % RING) * SLOT);
    double end = 0;
    unsigned spins = 0;
    while (p[0] == 0) {
        if (++spins % 65536 == 0) {
            double t = now();
            if (end == 0)
                end = t + secs;
            else if (t > end)
                return 0;
        }
        __builtin_ia32_pause();
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    *kind = p[0];
    *value = p[1];
    mem_seen++;
    return 1;
}

/* Takes the completions of the messages seen in memory, reposting their receives. */
static void m_reap_mem(void)
{
    while (mem_reaped < mem_seen) {
        uint32_t kind, value;
        if (!m_recv(10, &kind, &value))
            die("no receive completion within 10 s for a message seen in memory");
        if ((unsigned)(mem_reaped % RING) != last_slot)
            die("message %llu completed in slot %u, not %u", (unsigned long long)mem_reaped, last_slot,
                (unsigned)(mem_reaped % RING));
        mem_reaped++;
    }
}

static int ud_offered(void)
{
    DAT_PROVIDER_ATTR pa;
    memset(&pa, 0, sizeof pa);
    check(dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa), "dat_ia_query");
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++)
        if (pa.provider_specific_attr[i].name && strcmp(pa.provider_specific_attr[i].name, DAT_IB_ATTR_UD) == 0)
            return pa.provider_specific_attr[i].value && strcmp(pa.provider_specific_attr[i].value, "TRUE") == 0;
    return 0;
}

static void m_setup(void)
{
    check(dat_ia_open(opt.ia_name, 16, &async_evd, &ia), "dat_ia_open");
    if (opt.ud && !ud_offered()) {
        printf("# UD not offered by %s (DAT_IB_UD is not TRUE)\n", opt.ia_name);
        fflush(stdout);
        exit(4);
    }
    check(dat_pz_create(ia, &pz), "dat_pz_create");
    check(dat_evd_create(ia, 1024, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &req_evd), "dat_evd_create");
    check(dat_evd_create(ia, 2 * RING, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &recv_evd), "dat_evd_create");
    check(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd), "dat_evd_create");
    if (opt.server)
        check(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), "dat_evd_create");
    size_t len = (size_t)RING * SLOT + (size_t)SEND_SLOTS * 8;
    if (posix_memalign((void **)&ring_buf, 4096, len))
        die("out of memory");
    memset(ring_buf, 0, len);
    DAT_REGION_DESCRIPTION region;
    DAT_VLEN reg_len;
    DAT_VADDR reg_addr;
    DAT_RMR_CONTEXT rkey;
    region.for_va = ring_buf;
    check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                         DAT_VA_TYPE_VA, &ring_lmr, &ring_lkey, &rkey, &reg_len, &reg_addr),
          "dat_lmr_create");
    DAT_EP_ATTR a;
    memset(&a, 0, sizeof a);
    a.service_type = opt.ud ? (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD : DAT_SERVICE_TYPE_RC;
    a.max_message_size = 64;
    a.qos = DAT_QOS_BEST_EFFORT;
    a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    a.request_completion_flags = DAT_COMPLETION_SUPPRESS_FLAG;
    a.max_recv_dtos = RING;
    a.max_request_dtos = 1024;
    a.max_recv_iov = 1;
    a.max_request_iov = 1;
    check(dat_ep_create(ia, pz, recv_evd, req_evd, conn_evd, &a, &ep), "dat_ep_create");
    for (unsigned i = 0; i < RING; i++)
        m_post_recv(i);
}

static void m_teardown(void)
{
    DAT_EVENT ev;
    if (!opt.ud) {
        DAT_COUNT nmore;
        dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG);
        while (dat_evd_wait(conn_evd, 2000000, 1, &ev, &nmore) == DAT_SUCCESS)
            if (ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED || ev.event_number == DAT_CONNECTION_EVENT_BROKEN)
                break;
    } else {
        check(dat_ib_ud_ah_free(ep, &peer_ah), "dat_ib_ud_ah_free");
    }
    while (dat_evd_dequeue(recv_evd, &ev) == DAT_SUCCESS)
        ;
    while (dat_evd_dequeue(req_evd, &ev) == DAT_SUCCESS)
        ;
    check(dat_ep_free(ep), "dat_ep_free");
    if (psp != DAT_HANDLE_NULL)
        check(dat_psp_free(psp), "dat_psp_free");
    check(dat_lmr_free(ring_lmr), "dat_lmr_free");
    check(dat_evd_free(req_evd), "dat_evd_free");
    check(dat_evd_free(recv_evd), "dat_evd_free");
    check(dat_evd_free(conn_evd), "dat_evd_free");
    if (opt.server)
        check(dat_evd_free(cr_evd), "dat_evd_free");
    check(dat_pz_free(pz), "dat_pz_free");
    check(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), "dat_ia_close");
    free(ring_buf);
}

/* A UD connection event: keeps the peer's address handle, releases the record. */
static void m_ud_established(const DAT_EVENT *ev)
{
    const DAT_IB_EXTENSION_EVENT_DATA *x = (const DAT_IB_EXTENSION_EVENT_DATA *)(const void *)ev->event_extension_data;
    peer_ah = x->remote_ah;
    check(dat_ib_ud_cm_free(ep, x->context.as_ptr), "dat_ib_ud_cm_free");
}

static void m_run_server(void)
{
    DAT_EVENT ev;
    check(dat_psp_create(ia, opt.port, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create");
    printf("# server listening on %s, conn qual %u (%s messages)\n", opt.ia_name, opt.port, opt.ud ? "UD" : "RC");
    fflush(stdout);
    wait_event(cr_evd, 60, opt.ud ? (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT : DAT_CONNECTION_REQUEST_EVENT, &ev,
               "connection request");
    check(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL), "dat_cr_accept");
    wait_event(conn_evd, 10,
               opt.ud ? (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED : DAT_CONNECTION_EVENT_ESTABLISHED, &ev,
               "connection established");
    if (opt.ud)
        m_ud_established(&ev);
    uint64_t taken = 0;
    for (;;) {
        uint32_t kind, value;
        if (!(opt.mem ? m_recv_mem(150, &kind, &value) : m_recv(150, &kind, &value)))
            die("the client went quiet");
        if (kind == M_PING) {
            m_send(M_PONG, value);
            if (opt.mem)
                m_reap_mem();
        } else if (kind == M_DATA) {
            /* the receive is reposted: credit it back, a batch at a time */
            if (++taken % CREDIT_BATCH == 0)
                m_send(M_CREDIT, CREDIT_BATCH);
        } else if (kind == M_STOP) {
            if (opt.mem)
                m_reap_mem();
            break;
        } else {
            die("unexpected message %u", kind);
        }
    }
    printf("# server: %llu data messages\n", (unsigned long long)taken);
    m_teardown();
}

static void m_connect(void)
{
    struct addrinfo hints, *ai;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(opt.host, NULL, &hints, &ai);
    if (gai != 0)
        die("%s: %s", opt.host, gai_strerror(gai));
    DAT_EVENT ev;
    for (int attempt = 0;; attempt++) {
        check(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)ai->ai_addr, opt.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                             DAT_CONNECT_DEFAULT_FLAG),
              "dat_ep_connect");
        DAT_COUNT nmore;
        check(dat_evd_wait(conn_evd, 10000000, 1, &ev, &nmore), "waiting for the connection");
        if (opt.ud && ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED) {
            m_ud_established(&ev);
            break;
        }
        if (!opt.ud && ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
            break;
        int retry = opt.ud ? ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_ERROR_EVENT
                           : ev.event_number == DAT_CONNECTION_EVENT_NON_PEER_REJECTED;
        if (!retry || attempt >= 100)
            die("connect to %s:%u: event %#x", opt.host, opt.port, (unsigned)ev.event_number);
        if (!opt.ud) {
            /* the EP is disconnected now: reset it and repost the ring */
            check(dat_ep_reset(ep), "dat_ep_reset");
            while (dat_evd_dequeue(recv_evd, &ev) == DAT_SUCCESS)
                ;
            for (unsigned i = 0; i < RING; i++)
                m_post_recv(i);
        }
        usleep(100000);
    }
    freeaddrinfo(ai);
}

static void m_latency(void)
{
    int total = opt.lat_warmup + opt.lat_iters;
    double *rtt = malloc(sizeof(double) * (size_t)total);
    if (!rtt)
        die("out of memory");
    int n = 0;
    double start = now();
    for (int i = 0; i < total; i++) {
        uint32_t kind, value;
        double t = now();
        m_send(M_PING, (uint32_t)i);
        if (!(opt.mem ? m_recv_mem(10, &kind, &value) : m_recv(10, &kind, &value)))
            die("latency test: no answer to ping %d within 10 s%s", i, opt.ud ? " (a datagram was lost)" : "");
        rtt[i] = now() - t;
        if (kind != M_PONG || value != (uint32_t)i)
            die("latency test: message %u/%u, expected the pong of %d", kind, value, i);
        if (opt.mem)
            m_reap_mem();
        n = i + 1;
        if (i >= opt.lat_warmup && now() - start > opt.lat_max_time)
            break;
    }
    int m = n - opt.lat_warmup;
    if (m <= 0)
        die("latency test: no measured iterations");
    double *s = rtt + opt.lat_warmup;
    qsort(s, (size_t)m, sizeof *s, cmp_double);
    double med = s[m / 2] / 2 * 1e6;
    printf("dat2 %s 8 %.2f\n", opt.mem ? "memlat" : "msglat", med);
    printf("# %s 8 (%s send/recv%s): one-way (rtt/2) over %d iterations after %d warm-up: median %.2f us, "
           "min %.2f, p90 %.2f, p99 %.2f\n",
           opt.mem ? "memlat" : "msglat", opt.ud ? "UD" : "RC", opt.mem ? ", seen in memory" : "", m, opt.lat_warmup, med, s[0] / 2 * 1e6, s[(size_t)(m * 0.9)] / 2 * 1e6,
           s[(size_t)(m * 0.99)] / 2 * 1e6);
    fflush(stdout);
    free(rtt);
}

static void m_rate(void)
{
    /* the ring minus a few receives for the pings of a slow start */
    int credits = RING - 8;
    uint64_t sent = 0, back = 0;
    double t0 = now(), last = t0;
    int stopping = 0;
    for (;;) {
        if (!stopping && ((int64_t)sent >= opt.rate_max || now() - t0 > opt.max_time))
            stopping = 1;
        /* a stream ends on a whole credit batch, so that every message is credited */
        while (credits > 0 && (!stopping || sent % CREDIT_BATCH != 0)) {
            m_send(M_DATA, (uint32_t)sent);
            sent++;
            credits--;
        }
        if (stopping && back == sent)
            break;
        uint32_t kind, value;
        if (!m_recv(2, &kind, &value)) {
            printf("# rate: no credit for 2 s: %llu of %llu messages not credited%s\n", (unsigned long long)(sent - back),
                   (unsigned long long)sent, opt.ud ? " (datagrams lost)" : "");
            break;
        }
        if (kind != M_CREDIT)
            die("rate test: message %u, expected a credit", kind);
        credits += (int)value;
        back += value;
        last = now();
    }
    double secs = last - t0;
    if (back == 0 || secs <= 0)
        die("rate test: nothing credited");
    printf("dat2 rate 8 %.0f\n", (double)back / secs);
    printf("# rate 8 (%s send/recv): %llu messages in %.3f s, at most %d outstanding\n", opt.ud ? "UD" : "RC",
           (unsigned long long)back, secs, RING - 8);
    fflush(stdout);
}

static void m_run_client(void)
{
    m_connect();
    if (opt.do_lat)
        m_latency();
    if (opt.do_bw)
        m_rate();
    m_send(M_STOP, 0);
    /* let the STOP leave before the EP goes */
    usleep(100000);
    m_teardown();
}

/* ---------------------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: rdma_bench -s [options]            (server)\n"
            "       rdma_bench -c HOST [options]       (client)\n"
            "  -p PORT   connection qualifier (20200)\n"
            "  -i NAME   IA name (dat2-soft)\n"
            "  -S LIST   message sizes for the bandwidth test, comma separated (65536,1048576,16777216)\n"
            "  -V BYTES  bytes to write per size (2147483648), at least -t seconds (0.5), at most -T (3)\n"
            "  -t SECS, -T SECS\n"
            "  -W N      writes in flight (8)\n"
            "  -n N      latency iterations (20000) after -w N warm-up ones (1000), at most -L SECS (10)\n"
            "  -P        spin with the pause instruction only (default: sched_yield() in spin loops,\n"
            "            which leaves the CPU to the provider's progress threads on small machines)\n"
            "  -B        bandwidth only;  -l  latency only\n"
            "  -M        data buffer in shared memory (a sealed memfd) instead of the heap\n"
            "  -I        mark each latency run's measured iterations with a getppid() before and after,\n"
            "            for bench/inscount (instructions per iteration; timings are then meaningless)\n"
            "  -K        no latency run that waits for each write's completion (memory polled only)\n"
            "  -m        8-byte messages (send/recv) instead of RDMA: latency and message rate\n"
            "            (-B: rate only, -l: latency only; -R N messages at most, 2000000, within -T)\n"
            "  -u        with -m: between UD EPs (dat_ib_post_send_ud) instead of over RC\n"
            "  -k        with -m: wait for each message in dat_evd_wait instead of polling dat_evd_dequeue\n"
            "  -X        with -m, over RC: latency only, each side spinning on the memory of the receive\n"
            "            the next message lands in (calling nothing), as a program that polls its buffers\n"
            "            does; the receive's completion is taken after the answer went (\"dat2 memlat 8 USEC\")\n"
            "  -A SECS   abort the whole run after SECS (170)\n"
            "The server takes the same -S list (it sizes its buffer from it).\n");
    exit(2);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "rdma_bench: time limit reached\n";
    if (write(2, m, sizeof m - 1) < 0) {
        /* nothing more to do */
    }
    _exit(3);
}

int main(int argc, char **argv)
{
    int c;
    char *list = NULL;
    while ((c = getopt(argc, argv, "sc:p:i:S:V:t:T:W:n:w:L:PBlMIKmukXR:A:h")) != -1) {
        switch (c) {
        case 's': opt.server = 1; break;
        case 'c': opt.host = optarg; break;
        case 'p': opt.port = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'i': opt.ia_name = optarg; break;
        case 'S': list = optarg; break;
        case 'V': opt.volume = strtod(optarg, NULL); break;
        case 't': opt.min_time = strtod(optarg, NULL); break;
        case 'T': opt.max_time = strtod(optarg, NULL); break;
        case 'W': opt.window = atoi(optarg); break;
        case 'n': opt.lat_iters = atoi(optarg); break;
        case 'w': opt.lat_warmup = atoi(optarg); break;
        case 'L': opt.lat_max_time = strtod(optarg, NULL); break;
        case 'P': opt.yield = 0; break;
        case 'B': opt.do_lat = 0; break;
        case 'l': opt.do_bw = 0; break;
        case 'M': opt.shared = 1; break;
        case 'I': opt.mark = 1; break;
        case 'K': opt.no_latc = 1; break;
        case 'm': opt.msg = 1; break;
        case 'u': opt.ud = 1; break;
        case 'k': opt.block = 1; break;
        case 'X': opt.mem = 1; break;
        case 'R': opt.rate_max = atoi(optarg); break;
        case 'A': opt.alarm_secs = (unsigned)strtoul(optarg, NULL, 0); break;
        default: usage();
        }
    }
    if (opt.server == (opt.host != NULL) || optind != argc || opt.window < 1 || opt.window > 128 ||
        opt.lat_iters < 1 || opt.lat_warmup < 0 || (opt.ud && !opt.msg) || opt.rate_max < CREDIT_BATCH)
        usage();
    if (list) {
        for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
            if (opt.nsizes == 16)
                usage();
            opt.sizes[opt.nsizes++] = (size_t)strtoull(tok, NULL, 0);
        }
    } else {
        opt.sizes[0] = 64 << 10;
        opt.sizes[1] = 1 << 20;
        opt.sizes[2] = 16 << 20;
        opt.nsizes = 3;
    }
    signal(SIGALRM, on_alarm);
    alarm(opt.alarm_secs);
    if (opt.mem && (!opt.msg || opt.ud || opt.block))
        die("-X goes with -m over RC, polled");
    if (opt.mem)
        opt.do_bw = 0;
    if (opt.msg) {
        m_setup();
        if (opt.server)
            m_run_server();
        else
            m_run_client();
        return 0;
    }
    setup();
    if (opt.server)
        run_server();
    else
        run_client();
    return 0;
}
