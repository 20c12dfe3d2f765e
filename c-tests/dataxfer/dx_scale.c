/* Many connections between two processes (the soft device only): each carries a message, and
 * what each process pays for them is bounded: threads (/proc/self/task, not growing with the
 * number) and descriptors (one per connection) and, reported only, time and resident memory
 * per connection. DX_SCALE_N sets the number (default 500; try 10000 by hand, which raises
 * RLIMIT_NOFILE as far as the hard limit allows). */
#include "dx.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dx_cases.h"

/* Threads a process may add per connection: none (the process's engine serves them all;
 * before, a reader and a writer thread each). */
#define SCALE_THREADS_PER_CONN 0
/* And threads it may add besides: the engine, the peer watcher. */
#define SCALE_THREADS_FIXED 16
/* Threads the client may add while SCALE_WAVE connects are in flight: the engine and the peer
 * watcher; a connect's handshake has no thread of its own (before, each had one). */
#define SCALE_THREADS_CONNECTING 4
/* Descriptors a process may add besides one per connection (its socket). */
#define SCALE_FDS_FIXED 32
#define SCALE_MSG 64
/* How long the case may take: 14 s for the default, more for thousands by hand. */
#define SCALE_SECONDS(n) ((n) <= 1000 ? 14.0 : 14.0 + (n) / 200.0)
/* Connects in flight at a time. */
#define SCALE_WAVE 128
#define SCALE_MAGIC 0x5ca1ab1eu

static long scale_rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Raises the descriptor limit to what `n` connections need, as far as the hard limit allows. */
static void scale_nofile(int n)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return;
    rlim_t want = (rlim_t)n * 3 + 256;
    if (r.rlim_cur < want) {
        r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max > want ? want : r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

static int scale_read(int fd, void *buf, size_t len, double seconds)
{
    double t0 = dx_now();
    size_t got = 0;
    while (got < len && dx_now() - t0 < seconds) {
        ssize_t k = read(fd, (char *)buf + got, len - got);
        if (k > 0)
            got += (size_t)k;
        else if (k == 0 || (errno != EINTR && errno != EAGAIN))
            return 0;
    }
    return got == len;
}

/* The server's report: connections established, messages received intact and distinct, its
 * threads before and with them, resident memory before and with them, and failures seen. */
struct scale_report {
    int32_t est, got, threads0, threads, bad, fds0, fds;
    int64_t rss0, rss;
};

/* The accepting side, in a child process: accepts every request, posts a receive on each EP
 * first, and checks every message. Writes its port, then its report. */
static int scale_server(int n, int up, int down)
{
    struct scale_report r = {0};
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr, conn, dto;
    DAT_PZ_HANDLE pz;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lkey;
    DAT_RMR_CONTEXT rkey;
    scale_nofile(n);
    if (dat_ia_openv((DAT_NAME_PTR)SOFT_IA, 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE) !=
        DAT_SUCCESS)
        return 2;
    r.threads0 = dx_threads();
    r.fds0 = dx_fds();
    r.rss0 = scale_rss_kib();
    unsigned char *buf = calloc((size_t)n, SCALE_MSG);
    unsigned char *seen = calloc((size_t)n, 1);
    DAT_REGION_DESCRIPTION region = {.for_va = buf};
    DAT_VADDR va;
    DAT_VLEN reg;
    if (!buf || !seen || dat_pz_create(ia, &pz) != DAT_SUCCESS ||
        dat_evd_create(ia, n, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr) != DAT_SUCCESS ||
        dat_evd_create(ia, 2 * n, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn) != DAT_SUCCESS ||
        dat_evd_create(ia, n, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto) != DAT_SUCCESS ||
        dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, (DAT_VLEN)n * SCALE_MSG, pz, DAT_MEM_PRIV_ALL_FLAG,
                       DAT_VA_TYPE_VA, &lmr, &lkey, &rkey, &reg, &va) != DAT_SUCCESS)
        return 3;
    uint32_t port = 0;
    for (int k = 0; k < 4 && port == 0; k++)
        if (dat_psp_create(ia, dx_port(k), cr, DAT_PSP_CONSUMER_FLAG, &psp) == DAT_SUCCESS)
            port = (uint32_t)dx_port(k);
    if (port == 0 || write(up, &port, sizeof port) != (ssize_t)sizeof port)
        return 4;
    int accepted = 0;
    double t0 = dx_now();
    while ((r.est < n || r.got < n) && dx_now() - t0 < SCALE_SECONDS(n)) {
        DAT_EVENT ev;
        int idle = 1;
        while (dat_evd_dequeue(cr, &ev) == DAT_SUCCESS) {
            idle = 0;
            DAT_CR_HANDLE h = ev.event_data.cr_arrival_event_data.cr_handle;
            DAT_EP_HANDLE ep;
            if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT || accepted >= n ||
                dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep) != DAT_SUCCESS) {
                r.bad++;
                dat_cr_reject(h, 0, NULL);
                continue;
            }
            DAT_LMR_TRIPLET t = {.lmr_context = lkey,
                                 .virtual_address = (DAT_VADDR)(uintptr_t)(buf + (size_t)accepted * SCALE_MSG),
                                 .segment_length = SCALE_MSG};
            DAT_DTO_COOKIE c = {.as_64 = (DAT_UINT64)accepted};
            if (dat_ep_post_recv(ep, 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
                dat_cr_accept(h, ep, 0, NULL) != DAT_SUCCESS)
                r.bad++;
            accepted++;
        }
        while (dat_evd_dequeue(conn, &ev) == DAT_SUCCESS) {
            idle = 0;
            if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED)
                r.est++;
            else
                r.bad++;
        }
        while (dat_evd_dequeue(dto, &ev) == DAT_SUCCESS) {
            idle = 0;
            DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
            uint32_t w[2] = {0, 0};
            if (d->user_cookie.as_64 < (DAT_UINT64)n)
                memcpy(w, buf + d->user_cookie.as_64 * SCALE_MSG, sizeof w);
            if (ev.event_number != DAT_DTO_COMPLETION_EVENT || d->status != DAT_DTO_SUCCESS ||
                d->transfered_length != SCALE_MSG || w[0] != SCALE_MAGIC || w[1] >= (uint32_t)n || seen[w[1]]) {
                r.bad++;
                continue;
            }
            seen[w[1]] = 1;
            r.got++;
        }
        if (idle)
            dx_sleep_ms(1);
    }
    r.threads = dx_threads();
    r.fds = dx_fds();
    r.rss = scale_rss_kib();
    if (write(up, &r, sizeof r) != (ssize_t)sizeof r)
        return 5;
    char x;
    scale_read(down, &x, 1, 60.0);
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return 0;
}

void case_conn_scale(void)
{
    int up[2], down[2];
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, conn, dto;
    DAT_PZ_HANDLE pz;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lkey;
    DAT_RMR_CONTEXT rkey;
    if (!dx_on_soft_device()) {
        harness_skip("the soft device's threads and descriptors only");
        return;
    }
    const char *env = getenv("DX_SCALE_N");
    int n = env ? atoi(env) : 500;
    if (n < 1)
        n = 500;
    /* The server is forked before this process opens anything. */
    pid_t pid = dx_fork_peer(up, down);
    if (pid == 0)
        _exit(scale_server(n, up[1], down[0]));
    if (pid < 0)
        return;
    DAT_EP_HANDLE *eps = calloc((size_t)n, sizeof *eps);
    unsigned char *buf = calloc((size_t)n, SCALE_MSG);
    uint32_t port;
    if (!EXPECT(eps && buf, "calloc failed") ||
        !EXPECT(scale_read(up[0], &port, sizeof port, 10.0), "the server did not start"))
        goto out;
    scale_nofile(n);
    if (!EXPECT_RC(dat_ia_openv((DAT_NAME_PTR)SOFT_IA, 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE),
                   DAT_SUCCESS)) {
        ia = DAT_HANDLE_NULL;
        goto out;
    }
    int threads0 = dx_threads(), fds0 = dx_fds();
    long rss0 = scale_rss_kib();
    DAT_REGION_DESCRIPTION region = {.for_va = buf};
    DAT_VADDR va;
    DAT_VLEN reg;
    if (!EXPECT_RC(dat_pz_create(ia, &pz), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_create(ia, 2 * n, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn), DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_create(ia, n, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto), DAT_SUCCESS) ||
        !EXPECT_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, (DAT_VLEN)n * SCALE_MSG, pz, DAT_MEM_PRIV_ALL_FLAG,
                                  DAT_VA_TYPE_VA, &lmr, &lkey, &rkey, &reg, &va),
                   DAT_SUCCESS))
        goto out;
    double t0 = dx_now();
    int started = 0, est = 0, bad = 0, sent = 0, done = 0, peak = threads0;
    double last = t0; /* when the last send completed */
    unsigned first_bad = 0;
    DAT_RETURN rc = DAT_SUCCESS;
    while ((est < n || done < n) && dx_now() - t0 < SCALE_SECONDS(n) && rc == DAT_SUCCESS) {
        while (started < n && started - est - bad < SCALE_WAVE) {
            rc = dat_ep_create(ia, pz, dto, dto, conn, NULL, &eps[started]);
            if (rc == DAT_SUCCESS)
                rc = dat_ep_connect(eps[started], dx_loopback(0), port, 10000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                    DAT_CONNECT_DEFAULT_FLAG);
            if (!EXPECT_RC(rc, DAT_SUCCESS))
                break;
            started++;
        }
        if (started - est - bad > 0) {
            int now = dx_threads();
            peak = now > peak ? now : peak;
        }
        DAT_EVENT ev;
        int idle = 1;
        while (dat_evd_dequeue(conn, &ev) == DAT_SUCCESS) {
            idle = 0;
            if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
                if (bad++ == 0)
                    first_bad = (unsigned)ev.event_number;
                continue;
            }
            est++;
            /* Which EP: the event names it; its message carries its index. */
            int i = 0;
            while (i < started && eps[i] != ev.event_data.connect_event_data.ep_handle)
                i++;
            uint32_t w[2] = {SCALE_MAGIC, (uint32_t)i};
            memcpy(buf + (size_t)i * SCALE_MSG, w, sizeof w);
            DAT_LMR_TRIPLET t = {.lmr_context = lkey,
                                 .virtual_address = (DAT_VADDR)(uintptr_t)(buf + (size_t)i * SCALE_MSG),
                                 .segment_length = SCALE_MSG};
            DAT_DTO_COOKIE c = {.as_64 = (DAT_UINT64)i};
            if (i < started && dat_ep_post_send(eps[i], 1, &t, c, DAT_COMPLETION_DEFAULT_FLAG) == DAT_SUCCESS)
                sent++;
            else
                bad++;
        }
        while (dat_evd_dequeue(dto, &ev) == DAT_SUCCESS) {
            idle = 0;
            if (ev.event_number == DAT_DTO_COMPLETION_EVENT &&
                ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS) {
                done++;
                last = dx_now();
            } else if (bad++ == 0) {
                first_bad = (unsigned)ev.event_number;
            }
        }
        if (idle)
            dx_sleep_ms(1);
    }
    double took = last - t0;
    int bound = threads0 + SCALE_THREADS_PER_CONN * n + SCALE_THREADS_FIXED, threads = dx_threads();
    for (double w0 = dx_now(); threads > bound && dx_now() - w0 < 2.0; threads = dx_threads())
        dx_sleep_ms(20);
    long rss = scale_rss_kib();
    int fds = dx_fds();
    struct scale_report r;
    if (!EXPECT(scale_read(up[0], &r, sizeof r, SCALE_SECONDS(n) + 10.0), "the server did not report"))
        goto out;
    harness_note("%d connections: %d established, %d sends completed (the last %.2f s after the first connect), %d "
                 "failures here (the first: event 0x%x, rc 0x%x); the server: %d established, %d messages intact, %d "
                 "failures",
                 n, est, done, took, bad, first_bad, (unsigned)rc, r.est, r.got, r.bad);
    harness_note("threads: client %d -> %d (at most %d while connecting), server %d -> %d; descriptors: client %d -> %d, server %d -> %d; resident "
                 "memory per connection: client %.1f KiB, server %.1f KiB",
                 threads0, threads, peak, r.threads0, r.threads, fds0, fds, r.fds0, r.fds, (double)(rss - rss0) / n,
                 (double)(r.rss - r.rss0) / n);
    EXPECT(est == n && sent == n && done == n && bad == 0,
           "client: %d of %d established, %d sent, %d completed, %d failures", est, n, sent, done, bad);
    EXPECT(r.est == n && r.got == n && r.bad == 0, "server: %d of %d established, %d messages, %d failures", r.est, n,
           r.got, r.bad);
    EXPECT(peak <= threads0 + SCALE_THREADS_CONNECTING, "the client ran %d threads while connecting (%d before)", peak,
           threads0);
    EXPECT(threads <= bound, "the client has %d threads with %d connections (%d before; bound %d)", threads, n,
           threads0, bound);
    EXPECT(r.threads <= r.threads0 + SCALE_THREADS_PER_CONN * n + SCALE_THREADS_FIXED,
           "the server has %d threads with %d connections (%d before)", r.threads, n, r.threads0);
    EXPECT(fds <= fds0 + n + SCALE_FDS_FIXED, "the client has %d descriptors with %d connections (%d before)", fds, n,
           fds0);
    EXPECT(r.fds <= r.fds0 + n + SCALE_FDS_FIXED, "the server has %d descriptors with %d connections (%d before)",
           r.fds, n, r.fds0);
out:
    if (pid > 0)
        dx_reap(pid, down[1], 20.0);
    if (ia != DAT_HANDLE_NULL)
        EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    close(up[0]);
    close(down[1]);
    free(eps);
    free(buf);
}

/* Service points a process may hold without a thread each. */
#define SCALE_PSPS 50

/* Many PSPs cost no thread each: the process's engine serves every listener (before, each
 * had a `dat2-soft-listen` thread). Counted after the first, which starts the engine. */
void case_conn_scale_psps(void)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, crq = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp[SCALE_PSPS] = {0};
    if (!dx_on_soft_device()) {
        harness_skip("the soft device's threads only");
        return;
    }
    if (!EXPECT_RC(dat_ia_openv((DAT_NAME_PTR)SOFT_IA, 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE),
                   DAT_SUCCESS))
        return;
    if (!EXPECT_RC(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &crq), DAT_SUCCESS))
        goto out;
    int threads0 = -1, made = 0;
    for (; made < SCALE_PSPS; made++) {
        DAT_CONN_QUAL qual = 0;
        if (!EXPECT_RC(dat_psp_create_any(ia, &qual, crq, DAT_PSP_CONSUMER_FLAG, &psp[made]), DAT_SUCCESS))
            break;
        if (made == 0)
            threads0 = dx_threads();
    }
    int threads = dx_threads();
    harness_note("threads: %d with one PSP, %d with %d", threads0, threads, made);
    EXPECT(made == SCALE_PSPS && threads0 > 0 && threads <= threads0, "%d PSPs: %d threads, %d with one", made, threads,
           threads0);
    for (int k = 0; k < made; k++)
        EXPECT_RC(dat_psp_free(psp[k]), DAT_SUCCESS);
out:
    if (crq)
        dat_evd_free(crq);
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}
