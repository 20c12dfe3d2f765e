/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: user-space instructions per data-path operation (post + completion), counted
 * by callgrind, for whichever libdat2.so.2 the loader finds (Debian's or ours).
 *
 *   valgrind --tool=callgrind --callgrind-out-file=DIR/cg.%p ops IA ITERS SIZE
 *
 * One process, one IA, two RC EPs connected to each other over the IA's own address (A the
 * initiator, B the target), one LMR with every privilege. For each operation (RDMA write,
 * RDMA read, send/recv) and each way of completing it, after a few untimed rounds, the stats
 * are zeroed, ITERS operations run, and callgrind dumps the counts of every thread of the
 * process (so a progress thread's work counts too) under the name OP-MODE:
 *   write, read   A posts the RDMA operation; its completion comes on A's request EVD;
 *   send          B posts a receive, A a send: the completions of both count;
 *   poll          the poster sleeps (nanosleep, POLL_DELAY_US) so that the completion is
 *                 there, then calls dat_evd_dequeue until it returns it (sleeping again
 *                 after each call that finds nothing);
 *   wait          one thread per EVD involved is blocked in dat_evd_wait (the poster sleeps
 *                 BLOCK_DELAY_US after waking them) when the operation is posted: the
 *                 blocking path, wake-up included.
 * The same loops without any DAT call ("null-poll", "null-wait") give the harness's own
 * count, which the driver subtracts; "empty-poll" is one dat_evd_dequeue of an empty EVD and
 * a sleep per iteration. Output on stdout, one line per phase:
 *   phase NAME ITERS EMPTY
 * EMPTY counts dat_evd_dequeue calls that found nothing (each costs what an iteration of
 * "empty-poll" does, which the driver subtracts; 0 when the host is not too busy). Errors go to stderr and make the exit status
 * non-zero; exit status 3 ("noia") means the IA does not open.
 *
 * Build: cc -O2 ops.c -I$ROOT/include -L$ROOT/build -ldat2 -lpthread */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <valgrind/callgrind.h>
#include <dat2/udat.h>

#define EXIT_NOIA 3
#define POLL_DELAY_US 50000
#define BLOCK_DELAY_US 100000
#define WARM 3
#define PORT 47123

static DAT_IA_HANDLE ia;
static DAT_EVD_HANDLE req_a, rcv_a, req_b, rcv_b, conn_evd, cr_evd;
static DAT_EP_HANDLE ep_a, ep_b;
static DAT_LMR_TRIPLET local_a, local_b;
static DAT_RMR_TRIPLET remote_b;
static size_t size;
static unsigned long empty;

static void die(const char *what, DAT_RETURN rc)
{
    fprintf(stderr, "ops: %s: 0x%x\n", what, (unsigned)rc);
    exit(1);
}

static void check(const char *what, DAT_RETURN rc)
{
    if (rc != DAT_SUCCESS)
        die(what, rc);
}

static void pause_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void expect_dto(const DAT_EVENT *ev, DAT_EP_HANDLE ep, uint64_t cookie)
{
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
    if (ev->event_number != DAT_DTO_COMPLETION_EVENT)
        die("event number", ev->event_number);
    if (d->status != DAT_DTO_SUCCESS)
        die("completion status", d->status);
    if (d->ep_handle != ep || d->user_cookie.as_64 != cookie)
        die("completion of another operation", 0);
}

/* Dequeues until the EVD returns an event. */
static void reap_poll(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, uint64_t cookie)
{
    DAT_EVENT ev;
    for (;;) {
        DAT_RETURN rc = dat_evd_dequeue(evd, &ev);
        if (rc == DAT_SUCCESS)
            break;
        if (DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY)
            die("dat_evd_dequeue", rc);
        empty++;
        pause_us(POLL_DELAY_US);
    }
    expect_dto(&ev, ep, cookie);
}

enum op { OP_NULL, OP_EMPTY, OP_WRITE, OP_READ, OP_SEND };

static void post(enum op op, uint64_t cookie)
{
    DAT_DTO_COOKIE c = {.as_64 = cookie};
    DAT_COMPLETION_FLAGS f = DAT_COMPLETION_DEFAULT_FLAG;
    switch (op) {
    case OP_NULL:
    case OP_EMPTY:
        break;
    case OP_WRITE:
        check("dat_ep_post_rdma_write", dat_ep_post_rdma_write(ep_a, 1, &local_a, c, &remote_b, f));
        break;
    case OP_READ:
        check("dat_ep_post_rdma_read", dat_ep_post_rdma_read(ep_a, 1, &local_a, c, &remote_b, f));
        break;
    case OP_SEND:
        check("dat_ep_post_recv", dat_ep_post_recv(ep_b, 1, &local_b, c, f));
        check("dat_ep_post_send", dat_ep_post_send(ep_a, 1, &local_a, c, f));
        break;
    }
}

/* ---- blocking: waiter threads ------------------------------------------------------- */

struct waiter {
    pthread_t thread;
    DAT_EVD_HANDLE evd;
    DAT_EP_HANDLE ep;
    sem_t go, done;
    uint64_t cookie;
    int stop, null;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    DAT_EVENT ev;
    DAT_COUNT more;
    for (;;) {
        sem_wait(&w->go);
        if (w->stop)
            return NULL;
        if (!w->null) {
            check("dat_evd_wait", dat_evd_wait(w->evd, DAT_TIMEOUT_INFINITE, 1, &ev, &more));
            expect_dto(&ev, w->ep, w->cookie);
        }
        sem_post(&w->done);
    }
}

static void run(enum op op, int wait, unsigned n, uint64_t *cookie)
{
    struct waiter w[2];
    int nw = 0;
    if (wait) {
        memset(w, 0, sizeof w);
        w[nw].evd = req_a, w[nw++].ep = ep_a;
        if (op == OP_SEND)
            w[nw].evd = rcv_b, w[nw++].ep = ep_b;
        for (int k = 0; k < nw; k++) {
            w[k].null = op == OP_NULL;
            sem_init(&w[k].go, 0, 0);
            sem_init(&w[k].done, 0, 0);
            if (pthread_create(&w[k].thread, NULL, waiter_main, &w[k]) != 0)
                die("pthread_create", 0);
        }
    }
    for (unsigned i = 0; i < n; i++) {
        uint64_t c = ++*cookie;
        if (wait) {
            for (int k = 0; k < nw; k++) {
                w[k].cookie = c;
                sem_post(&w[k].go);
            }
            pause_us(BLOCK_DELAY_US);
            post(op, c);
            for (int k = 0; k < nw; k++)
                sem_wait(&w[k].done);
        } else {
            post(op, c);
            pause_us(POLL_DELAY_US);
            if (op == OP_EMPTY) {
                DAT_EVENT ev;
                DAT_RETURN rc = dat_evd_dequeue(req_a, &ev);
                if (DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY)
                    die("dat_evd_dequeue of an empty EVD", rc);
            }
            if (op > OP_EMPTY)
                reap_poll(req_a, ep_a, c);
            if (op == OP_SEND)
                reap_poll(rcv_b, ep_b, c);
        }
    }
    for (int k = 0; k < nw; k++) {
        w[k].stop = 1;
        sem_post(&w[k].go);
        pthread_join(w[k].thread, NULL);
    }
}

static void phase(const char *name, enum op op, int wait, unsigned iters, uint64_t *cookie)
{
    char dump[64];
    run(op, wait, WARM, cookie);
    empty = 0;
    CALLGRIND_ZERO_STATS;
    run(op, wait, iters, cookie);
    snprintf(dump, sizeof dump, "%s", name);
    CALLGRIND_DUMP_STATS_AT(dump);
    printf("phase %s %u %lu\n", name, iters, empty);
    fflush(stdout);
}

/* ---- set-up ----------------------------------------------------------------------- */

static DAT_EVENT wait_event(DAT_EVD_HANDLE evd, const char *what)
{
    DAT_EVENT ev;
    DAT_COUNT more;
    DAT_RETURN rc = dat_evd_wait(evd, 20 * 1000 * 1000, 1, &ev, &more);
    if (rc != DAT_SUCCESS)
        die(what, rc);
    return ev;
}

static void set_up(char *name)
{
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN rsize;
    DAT_VADDR raddr;
    DAT_PSP_HANDLE psp;
    DAT_IA_ATTR attr;
    DAT_EP_ATTR ea;
    DAT_REGION_DESCRIPTION region;
    DAT_RETURN rc = dat_ia_open(name, 8, &async, &ia);
    if (rc != DAT_SUCCESS) {
        fprintf(stderr, "ops: noia: dat_ia_open %s: 0x%x\n", name, (unsigned)rc);
        exit(EXIT_NOIA);
    }
    check("dat_pz_create", dat_pz_create(ia, &pz));
    DAT_EVD_HANDLE *dto[] = {&req_a, &rcv_a, &req_b, &rcv_b};
    for (size_t k = 0; k < 4; k++)
        check("dat_evd_create", dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, dto[k]));
    check("dat_evd_create", dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd));
    check("dat_evd_create", dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
    memset(&ea, 0, sizeof ea);
    ea.service_type = DAT_SERVICE_TYPE_RC;
    ea.max_message_size = ea.max_rdma_size = (DAT_VLEN)size;
    ea.qos = DAT_QOS_BEST_EFFORT;
    ea.recv_completion_flags = ea.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    ea.max_recv_dtos = ea.max_request_dtos = 8;
    ea.max_recv_iov = ea.max_request_iov = ea.max_rdma_read_iov = ea.max_rdma_write_iov = 1;
    ea.max_rdma_read_in = ea.max_rdma_read_out = 1;
    check("dat_ep_create", dat_ep_create(ia, pz, rcv_a, req_a, conn_evd, &ea, &ep_a));
    check("dat_ep_create", dat_ep_create(ia, pz, rcv_b, req_b, conn_evd, &ea, &ep_b));
    char *buf = aligned_alloc(4096, 2 * size);
    if (!buf)
        die("aligned_alloc", 0);
    memset(buf, 1, 2 * size);
    region.for_va = buf;
    check("dat_lmr_create", dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, 2 * size, pz, DAT_MEM_PRIV_ALL_FLAG,
                                           DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, &rsize, &raddr));
    local_a = (DAT_LMR_TRIPLET){.lmr_context = lctx, .virtual_address = (DAT_VADDR)(uintptr_t)buf,
                                .segment_length = (DAT_VLEN)size};
    local_b = (DAT_LMR_TRIPLET){.lmr_context = lctx, .virtual_address = (DAT_VADDR)(uintptr_t)(buf + size),
                                .segment_length = (DAT_VLEN)size};
    remote_b = (DAT_RMR_TRIPLET){.rmr_context = rctx, .virtual_address = (DAT_VADDR)(uintptr_t)(buf + size),
                                 .segment_length = (DAT_VLEN)size};
    memset(&attr, 0, sizeof attr);
    check("dat_ia_query", dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL));
    check("dat_psp_create", dat_psp_create(ia, PORT, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
    /* No timeout: a connect timer would be a thread of its own, waking in some later phase. */
    check("dat_ep_connect", dat_ep_connect(ep_a, attr.ia_address_ptr, PORT, DAT_TIMEOUT_INFINITE, 0, NULL,
                                           DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev = wait_event(cr_evd, "connection request");
    if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
        die("expected a connection request, got", ev.event_number);
    check("dat_cr_accept", dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep_b, 0, NULL));
    for (int k = 0; k < 2; k++) {
        ev = wait_event(conn_evd, "connection established");
        if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
            die("expected ESTABLISHED, got", ev.event_number);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ops IA ITERS SIZE\n");
        return 2;
    }
    unsigned iters = (unsigned)strtoul(argv[2], NULL, 0);
    size = strtoul(argv[3], NULL, 0);
    if (iters == 0 || size == 0 || size > (1u << 30)) {
        fprintf(stderr, "ops: bad ITERS or SIZE\n");
        return 2;
    }
    set_up(argv[1]);
    uint64_t cookie = 0;
    static const struct {
        const char *name;
        enum op op;
        int wait;
    } phases[] = {
        {"null-poll", OP_NULL, 0}, {"empty-poll", OP_EMPTY, 0}, {"write-poll", OP_WRITE, 0}, {"read-poll", OP_READ, 0}, {"send-poll", OP_SEND, 0},
        {"null-wait", OP_NULL, 1}, {"write-wait", OP_WRITE, 1}, {"read-wait", OP_READ, 1}, {"send-wait", OP_SEND, 1},
    };
    for (size_t k = 0; k < sizeof phases / sizeof phases[0]; k++)
        phase(phases[k].name, phases[k].op, phases[k].wait, iters, &cookie);
    dat_ep_disconnect(ep_a, DAT_CLOSE_ABRUPT_FLAG);
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return 0;
}
