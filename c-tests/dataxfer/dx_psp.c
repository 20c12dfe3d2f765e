/* A flood of connection requests at a PSP with DAT_PSP_PROVIDER_FLAG whose CR EVD is full:
 * a request that cannot be delivered must leave nothing behind in the target (no EP, no CR, no
 * handle, no memory), and a graceful dat_ia_close must succeed once the consumer has rejected
 * what it was told of. The requests come from RC EPs, or (the _ud case) from UD EPs, for which
 * the provider makes UD EPs. */
#include "dx.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dx_cases.h"

enum {
    FLOOD_WARM = 500,      /* requests before the target's memory is first measured */
    FLOOD_N = 5000,        /* requests measured */
    FLOOD_INFLIGHT = 32,   /* connects outstanding at once */
    FLOOD_CR_QLEN = 4,     /* the target's CR EVD */
    FLOOD_SECONDS = 40,    /* the most the flood may take */
    FLOOD_GROWTH = 1 << 20 /* resident bytes the target may gain (a leaked EP was ~170 KB) */
};

/* The process's resident memory in bytes (/proc/self/statm), or -1. */
static long resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = -1;
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

static int read_full(int fd, void *buf, size_t len, int ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    size_t got = 0;
    while (got < len) {
        if (poll(&pfd, 1, ms) != 1)
            return 0;
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r <= 0)
            return 0;
        got += (size_t)r;
    }
    return 1;
}

/* Whether the requests come from UD EPs. */
static int flood_ud;

static int connect_one(struct node *c, DAT_CONN_QUAL port, DAT_EP_HANDLE *ep)
{
    DAT_EP_ATTR a;
    attr_init(&a);
    if (flood_ud) {
        a.service_type = (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD;
        a.max_message_size = 1024;
        a.max_rdma_read_in = a.max_rdma_read_out = a.max_rdma_read_iov = a.max_rdma_write_iov = 0;
    } else {
        /* an RDMA read's sink takes as many segments as the IA allows (1 on iWARP) */
        DAT_IA_ATTR ia;
        memset(&ia, 0, sizeof ia);
        if (dat_ia_query(c->ia, NULL, DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_RDMA_READ, &ia, 0, NULL) == DAT_SUCCESS &&
            ia.max_iov_segments_per_rdma_read > 0 && a.max_rdma_read_iov > ia.max_iov_segments_per_rdma_read)
            a.max_rdma_read_iov = ia.max_iov_segments_per_rdma_read;
    }
    DAT_RETURN rc = dat_ep_create(c->ia, c->pz, c->rcv, c->req, c->conn, &a, ep);
    if (rc != DAT_SUCCESS) {
        harness_note("flooding peer: dat_ep_create returned 0x%x", (unsigned)rc);
        return 0;
    }
    rc = dat_ep_connect(*ep, dx_loopback(0), port, 30000000, 0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
    if (rc != DAT_SUCCESS)
        harness_note("flooding peer: dat_ep_connect returned 0x%x", (unsigned)rc);
    return rc == DAT_SUCCESS;
}

/* The flooding peer's connects: `eps[0..live]` are waiting for an answer, each made in round
 * `made_in[k]` (a request of the warm-up may be answered during the next round: under the
 * VM's emulation the target can take longer than the quiet seconds). */
struct flood {
    struct node c;
    DAT_CONN_QUAL port;
    DAT_EP_HANDLE eps[FLOOD_INFLIGHT];
    int made_in[FLOOD_INFLIGHT];
    int live;
    int round;
};

/* Makes `n` more requests, FLOOD_INFLIGHT at a time (at most FLOOD_SECONDS), each EP freed
 * once its request is answered. The requests the target queued are answered only at its
 * end, so once all are made three quiet seconds end the round. Returns {made, answered}, or
 * made -1 when a connect failed. */
static void flood_round(struct flood *f, int n, int32_t res[2])
{
    int issued = 0, answered = 0;
    double t0 = dx_now();
    f->round++;
    for (; f->live < FLOOD_INFLIGHT && issued < n; f->live++, issued++) {
        f->made_in[f->live] = f->round;
        if (!connect_one(&f->c, f->port, &f->eps[f->live]))
            goto failed;
    }
    while (f->live > 0) {
        DAT_EVENT ev;
        if (wait_ev(f->c.conn, issued < n ? 10000 : 3000, &ev) != DAT_SUCCESS)
            break;
        DAT_EP_HANDLE done = ev.event_data.connect_event_data.ep_handle;
        int k = 0;
        while (k < f->live && f->eps[k] != done)
            k++;
        if (k == f->live)
            continue;
        if (f->made_in[k] == f->round)
            answered++;
        dat_ep_free(done);
        f->live--;
        f->eps[k] = f->eps[f->live];
        f->made_in[k] = f->made_in[f->live];
        if (issued < n && dx_now() - t0 < FLOOD_SECONDS) {
            f->made_in[f->live] = f->round;
            if (!connect_one(&f->c, f->port, &f->eps[f->live]))
                goto failed;
            f->live++;
            issued++;
        }
    }
    res[0] = issued;
    res[1] = answered;
    return;
failed:
    res[0] = -1;
    res[1] = answered;
}

/* The flooding peer: a warm-up round of FLOOD_WARM requests, then (told to go on `down`)
 * FLOOD_N more; reports each round's {made, answered} on `up`, then waits for the target to
 * finish before it closes its IA. */
static int flood_child(int down, int up)
{
    static struct flood f;
    uint32_t port;
    int32_t res[2] = {0, 0};
    char byte;
    if (!read_full(down, &port, sizeof port, 20000) || !node_open(&f.c, PROVIDER, 16, 16))
        return 1;
    f.port = port;
    flood_round(&f, FLOOD_WARM, res);
    if (write(up, res, sizeof res) != (ssize_t)sizeof res || !read_full(down, &byte, 1, 20000))
        return 2;
    flood_round(&f, FLOOD_N, res);
    if (write(up, res, sizeof res) != (ssize_t)sizeof res)
        return 3;
    read_full(down, &byte, 1, 30000);
    node_close(&f.c);
    return 0;
}

static void psp_provider_flood(void)
{
    int up[2], down[2];
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL, crq = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_CONN_QUAL port = 0;
    /* The peer is forked before this process opens anything (it opens its own IA). */
    pid_t pid = dx_fork_peer(up, down);
    if (pid == 0)
        _exit(flood_child(down[0], up[1]));
    if (pid < 0)
        return;
    if (!EXPECT_RC(dat_ia_openv((DAT_NAME_PTR)PROVIDER, 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE),
                   DAT_SUCCESS) ||
        !EXPECT_RC(dat_evd_create(ia, FLOOD_CR_QLEN, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &crq), DAT_SUCCESS)) {
        ia = DAT_HANDLE_NULL;
        goto out;
    }
    DAT_RETURN rc = DAT_SUCCESS;
    for (int k = 0; k < 4; k++) {
        rc = dat_psp_create(ia, dx_port(k), crq, DAT_PSP_PROVIDER_FLAG, &psp);
        if (rc == DAT_SUCCESS) {
            port = dx_port(k);
            break;
        }
    }
    if (!EXPECT_RC(rc, DAT_SUCCESS))
        goto out;
    /* The first requests make what any flood makes once (the listener's buffers, its thread's
     * malloc arena): memory is measured from the end of a warm-up round on. */
    long start = resident_bytes();
    uint32_t p32 = (uint32_t)port;
    if (!EXPECT(write(down[1], &p32, sizeof p32) == (ssize_t)sizeof p32, "cannot start the peer"))
        goto out;
    int32_t res[2];
    if (!EXPECT(read_full(up[0], res, sizeof res, (FLOOD_SECONDS + 15) * 1000), "the flooding peer did not start") ||
        !EXPECT(res[0] == FLOOD_WARM, "the warm-up round made %d requests, expected %d", res[0], FLOOD_WARM))
        goto out;
    long before = resident_bytes();
    harness_note("warm-up: %d requests, resident memory %ld -> %ld KiB", res[0], start / 1024, before / 1024);
    if (!EXPECT(write(down[1], "g", 1) == 1, "cannot restart the peer"))
        goto out;
    double t0 = dx_now();
    if (!EXPECT(read_full(up[0], res, sizeof res, (FLOOD_SECONDS + 15) * 1000), "the flooding peer did not finish"))
        goto out;
    double took = dx_now() - t0;
    long after = resident_bytes();
    harness_note("%d more requests in %.2f s, %d answered while the CR EVD was full; resident memory %ld -> %ld KiB "
                 "(%+ld bytes, %.0f per request)",
                 res[0], took, res[1], before / 1024, after / 1024, after - before,
                 res[0] > 0 ? (double)(after - before) / res[0] : 0.0);
    /* Enough requests that a leak shows above FLOOD_GROWTH: a soft request once left ~690
     * bytes, so half of FLOOD_N; a verbs one leaves a QP and its CQ (~170 KB), and siw under
     * the VM's emulation makes about 45 connections a second, so a fifth. */
    int least = dx_on_soft_device() ? FLOOD_N / 2 : FLOOD_N / 5;
    EXPECT(res[0] >= least, "the peer made only %d requests in %d s (at least %d)", res[0], FLOOD_SECONDS, least);
    EXPECT(res[1] == res[0], "%d of %d requests answered while the CR EVD was full", res[1], res[0]);
    EXPECT(before > 0 && after - before < FLOOD_GROWTH,
           "resident memory grew by %ld bytes over %d undeliverable requests (bound %d)", after - before, res[0],
           FLOOD_GROWTH);

    /* The consumer rejects what it was told of; then nothing of the flood may be left. */
    int delivered = 0;
    DAT_EVENT ev;
    DAT_EVENT_NUMBER want =
        flood_ud ? (DAT_EVENT_NUMBER)DAT_IB_UD_CONNECTION_REQUEST_EVENT : DAT_CONNECTION_REQUEST_EVENT;
    while (dat_evd_dequeue(crq, &ev) == DAT_SUCCESS) {
        if (!EXPECT(ev.event_number == want, "CR EVD event 0x%x, expected 0x%x", (unsigned)ev.event_number,
                    (unsigned)want))
            continue;
        delivered++;
        EXPECT_RC(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL), DAT_SUCCESS);
    }
    EXPECT(delivered == FLOOD_CR_QLEN, "%d requests delivered, expected %d (the CR EVD's qlen)", delivered,
           FLOOD_CR_QLEN);
    int overflows = 0;
    while (dat_evd_dequeue(async, &ev) == DAT_SUCCESS)
        overflows += ev.event_number == DAT_ASYNC_ERROR_EVD_OVERFLOW;
    harness_note("%d DAT_ASYNC_ERROR_EVD_OVERFLOW events on the async EVD (qlen 8)", overflows);
    EXPECT(overflows > 0, "no DAT_ASYNC_ERROR_EVD_OVERFLOW for the requests the CR EVD had no room for");
    if (EXPECT_RC(dat_psp_free(psp), DAT_SUCCESS))
        psp = DAT_HANDLE_NULL;
    if (EXPECT_RC(dat_evd_free(crq), DAT_SUCCESS))
        crq = DAT_HANDLE_NULL;
    if (EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS))
        ia = DAT_HANDLE_NULL;
out:
    if (pid > 0)
        dx_reap(pid, down[1], 10.0);
    close(up[0]);
    close(down[1]);
    if (ia != DAT_HANDLE_NULL)
        EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

void case_conn_psp_provider_flood(void)
{
    flood_ud = 0;
    psp_provider_flood();
}

void case_conn_psp_provider_flood_ud(void)
{
    if (dx_ia_lacks("DAT_IB_UD")) {
        harness_skip("the IA has no UD (DAT_IB_UD=FALSE)");
        return;
    }
    flood_ud = 1;
    psp_provider_flood();
}
