/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: the data path's DAT calls on dat2-soft, one at a time, for callgrind to count.
 *
 *   ops_native PHASE [-i IA] [-n ITERS] [-w WARMUP] [-s BYTES] [-p PORT]
 *
 * One process, one IA (dat2-soft unless -i names another), two RC EPs connected to each other
 * over the IA's own address (A the initiator, B the target, served by the device's own
 * threads), one LMR with every privilege. After WARMUP untimed iterations, ITERS iterations
 * of PHASE:
 *   write   post_op() posts an RDMA write of BYTES (8) from A into B's buffer; the thread
 *           waits (not measured) until the data is in B's buffer, then sleeps SETTLE_US
 *           (200) so that the completion is queued, then calls dequeue_op() until it
 *           returns the write's DAT_DTO_COMPLETION_EVENT: a polled RDMA write and its
 *           completion, with as few dequeues that find nothing as can be (under valgrind,
 *           which runs one thread at a time, the device's threads lag);
 *   event   the same, but the write is posted by post_other() (not measured): a dequeue
 *           that finds an event;
 *   empty   dequeue_op() on A's request EVD with nothing outstanding (DAT_QUEUE_EMPTY);
 *   wait    as event, but the completion is taken by wait_op(): dat_evd_wait with threshold 1
 *           (timeout WAIT_US) on an EVD that already holds it, which returns at once;
 *   block   wait_op() is called at once, and another thread posts the write (post_other())
 *           BLOCK_US (2000) later: a dat_evd_wait that blocks until the completion arrives,
 *           its wake-up included (BLOCKED below says how many did block: a wait that had
 *           not blocked by the time the write was posted would find it ready);
 *   churn   the empty dequeue, ITERS times by dequeue_before(), then PAIRS (-c, 70000) LMR
 *           create/free pairs on the same PZ (not measured), then ITERS times by
 *           dequeue_after(): the handle check of a long-lived EVD before and after the
 *           handle table has handed out, and taken back, that many handles (issue 20). Run
 *           with --toggle-collect=dequeue_before --toggle-collect=dequeue_after;
 *           bench/callgrind_layers.py --per-entry gives each one's count.
 * The warm-up (WARMUP writes, 1000) calls post_other() and dequeue_other() instead.
 * post_op() and dequeue_op() are functions of their own, so that
 *   valgrind --tool=callgrind --toggle-collect=post_op --toggle-collect=dequeue_op ...
 * counts those calls alone, in this (the posting) thread; bench/callgrind_layers.py divides
 * the counts and splits them by layer (the wait phases' call is wait_op(), counted the same
 * way with --toggle-collect=wait_op). It prints, on stdout:
 *   ops PHASE ITERS EMPTY BLOCKED
 * (the churn phase: "ops churn ITERS 0 PAIRS").
 * EMPTY is the number of dequeue_op() calls among the measured ones that found nothing
 * (they are counted by callgrind too; the script subtracts them at the empty phase's cost);
 * BLOCKED the number of measured dat_evd_wait calls that blocked (DCNT_EVD_WAIT_BLOCKED).
 * Every completion is checked (event number, status, EP, cookie, transferred length).
 * Build: cc -O2 -g -pthread ops_native.c -I$ROOT/include -L$ROOT/build -ldat2 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

static long settle_us = 200;
/* How long the block phase's poster lets the waiter block before it posts. */
#define BLOCK_US 2000
/* The wait phases' timeout: finite, as most consumers give (a lost wake-up fails the run). */
#define WAIT_US (20 * 1000 * 1000)

static DAT_IA_HANDLE ia;
static DAT_PZ_HANDLE pz;
static DAT_EVD_HANDLE req_a, rcv_a, req_b, rcv_b, conn_evd, cr_evd;
static DAT_EP_HANDLE ep_a, ep_b;
static DAT_LMR_TRIPLET local_a;
static DAT_RMR_TRIPLET remote_b;
static volatile uint64_t *src_word, *dst_word;
static size_t size = 8;

static void check(DAT_RETURN rc, const char *what)
{
    if (rc == DAT_SUCCESS)
        return;
    const char *major = "", *minor = "";
    dat_strerror(rc, &major, &minor);
    fprintf(stderr, "ops_native: %s: 0x%08x %s %s\n", what, (unsigned)rc, major, minor);
    exit(1);
}

static void pause_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static inline DAT_RETURN do_post(uint64_t cookie)
{
    DAT_DTO_COOKIE c = {.as_64 = cookie};
    return dat_ep_post_rdma_write(ep_a, 1, &local_a, c, &remote_b, DAT_COMPLETION_DEFAULT_FLAG);
}

/* The measured calls (callgrind's --toggle-collect names them), and the same calls for the
 * warm-up and for what a phase does not measure. */
__attribute__((noinline)) DAT_RETURN post_op(uint64_t cookie) { return do_post(cookie); }
__attribute__((noinline)) DAT_RETURN dequeue_op(DAT_EVENT *ev) { return dat_evd_dequeue(req_a, ev); }
static DAT_COUNT wait_more;
__attribute__((noinline)) DAT_RETURN wait_op(DAT_EVENT *ev) { return dat_evd_wait(req_a, WAIT_US, 1, ev, &wait_more); }
/* (other_calls keeps the compiler from folding them into the measured ones: -fipa-icf) */
static volatile unsigned long other_calls;
__attribute__((noinline)) DAT_RETURN post_other(uint64_t cookie)
{
    other_calls++;
    return do_post(cookie);
}
__attribute__((noinline)) DAT_RETURN dequeue_other(DAT_EVENT *ev)
{
    other_calls++;
    return dat_evd_dequeue(req_a, ev);
}

/* The churn phase's two measured dequeues: distinct bodies (other counters), so that the
 * compiler cannot make them one function. */
static volatile unsigned long before_calls, after_calls;
__attribute__((noinline)) DAT_RETURN dequeue_before(DAT_EVENT *ev)
{
    before_calls++;
    return dat_evd_dequeue(req_a, ev);
}
__attribute__((noinline)) DAT_RETURN dequeue_after(DAT_EVENT *ev)
{
    after_calls += 2;
    return dat_evd_dequeue(req_a, ev);
}

static DAT_RETURN (*post_fn)(uint64_t) = post_other;
static DAT_RETURN (*dequeue_fn)(DAT_EVENT *) = dequeue_other;

/* Checks that EV is the completion of write COOKIE. */
static void expect_write(const DAT_EVENT *ev, uint64_t cookie)
{
    const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
    if (ev->event_number != DAT_DTO_COMPLETION_EVENT || d->status != DAT_DTO_SUCCESS || d->ep_handle != ep_a ||
        d->user_cookie.as_64 != cookie || d->transfered_length != size) {
        fprintf(stderr, "ops_native: unexpected event 0x%x status %d cookie %llu (expected the write %llu)\n",
                (unsigned)ev->event_number, (int)d->status, (unsigned long long)d->user_cookie.as_64,
                (unsigned long long)cookie);
        exit(1);
    }
}

/* Calls dequeue_op() until it returns the completion of write COOKIE; the empty ones. */
static unsigned long reap(uint64_t cookie)
{
    unsigned long empty = 0;
    DAT_EVENT ev;
    for (;;) {
        DAT_RETURN rc = dequeue_fn(&ev);
        if (rc == DAT_SUCCESS)
            break;
        if (DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY)
            check(rc, "dat_evd_dequeue");
        /* (a short sleep, so that under valgrind, which runs one thread at a time, the
         * device's threads get to finish the write) */
        if (++empty % 4 == 0)
            pause_us(20);
    }
    expect_write(&ev, cookie);
    return empty;
}

/* Takes the completion of write COOKIE with one wait_op(), which must return it (and nothing
 * left behind it). */
static void reap_wait(uint64_t cookie)
{
    DAT_EVENT ev;
    wait_more = -1;
    check(wait_op(&ev), "dat_evd_wait");
    expect_write(&ev, cookie);
    if (wait_more != 0) {
        fprintf(stderr, "ops_native: dat_evd_wait left %d events behind the write's\n", (int)wait_more);
        exit(1);
    }
}

/* The block phase's poster: each time it is let go, it sleeps BLOCK_US and posts write
 * post_cookie (the waiter is blocked by then: under valgrind one thread runs at a time, and
 * the waiter runs until it blocks). */
static sem_t post_go;
static volatile uint64_t post_cookie;
static void *poster_main(void *arg)
{
    (void)arg;
    for (;;) {
        sem_wait(&post_go);
        uint64_t c = post_cookie;
        if (c == 0)
            return NULL;
        pause_us(BLOCK_US);
        check(post_other(c), "dat_ep_post_rdma_write");
    }
}

enum phase { PH_WRITE, PH_EVENT, PH_EMPTY, PH_CHURN, PH_WAIT, PH_BLOCK };

static unsigned long run(enum phase ph, long n, uint64_t *cookie)
{
    unsigned long empty = 0;
    for (long i = 0; i < n; i++) {
        uint64_t c = ++*cookie;
        if (ph == PH_EMPTY) {
            DAT_EVENT ev;
            DAT_RETURN rc = dequeue_fn(&ev);
            if (DAT_GET_TYPE(rc) != DAT_QUEUE_EMPTY) {
                fprintf(stderr, "ops_native: a dequeue of an idle EVD returned 0x%08x\n", (unsigned)rc);
                exit(1);
            }
            continue;
        }
        *src_word = c;
        if (ph == PH_BLOCK) {
            post_cookie = c;
            sem_post(&post_go);
            reap_wait(c);
            if (*dst_word != c) {
                fprintf(stderr, "ops_native: completed write %llu, but the target holds %llu\n", (unsigned long long)c,
                        (unsigned long long)*dst_word);
                exit(1);
            }
            continue;
        }
        check(post_fn(c), "dat_ep_post_rdma_write");
        for (long waits = 0; *dst_word != c; waits++) {
            if (waits > 1000000L) {
                fprintf(stderr, "ops_native: the write's data never arrived\n");
                exit(1);
            }
            pause_us(5);
        }
        pause_us(settle_us);
        if (ph == PH_WAIT)
            reap_wait(c);
        else
            empty += reap(c);
        if (*dst_word != c) {
            fprintf(stderr, "ops_native: completed write %llu, but the target holds %llu\n", (unsigned long long)c,
                    (unsigned long long)*dst_word);
            exit(1);
        }
    }
    return empty;
}

static DAT_EVENT wait_event(DAT_EVD_HANDLE evd, const char *what)
{
    DAT_EVENT ev;
    DAT_COUNT more;
    check(dat_evd_wait(evd, 20 * 1000 * 1000, 1, &ev, &more), what);
    return ev;
}

static void set_up(char *name, DAT_CONN_QUAL port)
{
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lctx;
    DAT_RMR_CONTEXT rctx;
    DAT_VLEN rsize;
    DAT_VADDR raddr;
    DAT_PSP_HANDLE psp;
    DAT_IA_ATTR attr;
    DAT_EP_ATTR ea;
    DAT_REGION_DESCRIPTION region;
    check(dat_ia_open(name, 8, &async, &ia), "dat_ia_open");
    check(dat_pz_create(ia, &pz), "dat_pz_create");
    DAT_EVD_HANDLE *dto[] = {&req_a, &rcv_a, &req_b, &rcv_b};
    for (size_t k = 0; k < 4; k++)
        check(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, dto[k]), "dat_evd_create");
    check(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn_evd), "dat_evd_create");
    check(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd), "dat_evd_create");
    memset(&ea, 0, sizeof ea);
    ea.service_type = DAT_SERVICE_TYPE_RC;
    ea.max_message_size = ea.max_rdma_size = (DAT_VLEN)size;
    ea.qos = DAT_QOS_BEST_EFFORT;
    ea.recv_completion_flags = ea.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    ea.max_recv_dtos = ea.max_request_dtos = 8;
    ea.max_recv_iov = ea.max_request_iov = ea.max_rdma_read_iov = ea.max_rdma_write_iov = 1;
    ea.max_rdma_read_in = ea.max_rdma_read_out = 1;
    check(dat_ep_create(ia, pz, rcv_a, req_a, conn_evd, &ea, &ep_a), "dat_ep_create");
    check(dat_ep_create(ia, pz, rcv_b, req_b, conn_evd, &ea, &ep_b), "dat_ep_create");
    size_t span = size < 4096 ? 4096 : size;
    char *buf = aligned_alloc(4096, 2 * span);
    if (!buf) {
        perror("ops_native: aligned_alloc");
        exit(1);
    }
    memset(buf, 0, 2 * span);
    src_word = (volatile uint64_t *)buf;
    dst_word = (volatile uint64_t *)(buf + span);
    region.for_va = buf;
    check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, 2 * span, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lctx,
                         &rctx, &rsize, &raddr),
          "dat_lmr_create");
    local_a = (DAT_LMR_TRIPLET){.lmr_context = lctx, .virtual_address = (DAT_VADDR)(uintptr_t)buf, .segment_length = (DAT_VLEN)size};
    remote_b = (DAT_RMR_TRIPLET){
        .rmr_context = rctx, .virtual_address = (DAT_VADDR)(uintptr_t)(buf + span), .segment_length = (DAT_VLEN)size};
    memset(&attr, 0, sizeof attr);
    check(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL), "dat_ia_query");
    check(dat_psp_create(ia, port, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp), "dat_psp_create");
    check(dat_ep_connect(ep_a, attr.ia_address_ptr, port, DAT_TIMEOUT_INFINITE, 0, NULL, DAT_QOS_BEST_EFFORT,
                         DAT_CONNECT_DEFAULT_FLAG),
          "dat_ep_connect");
    DAT_EVENT ev = wait_event(cr_evd, "connection request");
    if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT) {
        fprintf(stderr, "ops_native: expected a connection request, got 0x%x\n", (unsigned)ev.event_number);
        exit(1);
    }
    check(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep_b, 0, NULL), "dat_cr_accept");
    for (int k = 0; k < 2; k++) {
        ev = wait_event(conn_evd, "connection established");
        if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
            fprintf(stderr, "ops_native: expected ESTABLISHED, got 0x%x\n", (unsigned)ev.event_number);
            exit(1);
        }
    }
}

/* PAIRS LMR create/free pairs over one small buffer of the IA's PZ: handles handed out and
 * taken back, none kept. */
static void churn(long pairs)
{
    static char churn_buf[4096];
    DAT_REGION_DESCRIPTION region;
    region.for_va = churn_buf;
    for (long i = 0; i < pairs; i++) {
        DAT_LMR_HANDLE lmr;
        DAT_LMR_CONTEXT lctx;
        DAT_RMR_CONTEXT rctx;
        DAT_VLEN rsize;
        DAT_VADDR raddr;
        check(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, 64, pz, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_VA_TYPE_VA, &lmr,
                             &lctx, &rctx, &rsize, &raddr),
              "dat_lmr_create (churn)");
        check(dat_lmr_free(lmr), "dat_lmr_free (churn)");
    }
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "usage: ops_native write|event|empty|churn|wait|block [-i IA] [-n ITERS] [-w WARMUP] [-s BYTES] [-p PORT] [-S SETTLE_US] [-c PAIRS]\n";
    char default_ia[] = "dat2-soft";
    char *name = default_ia;
    long n = 2000, warmup = 1000;
    long port = 22321;
    long pairs = 70000;
    enum phase ph;
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (strcmp(argv[1], "write") == 0)
        ph = PH_WRITE;
    else if (strcmp(argv[1], "event") == 0)
        ph = PH_EVENT;
    else if (strcmp(argv[1], "empty") == 0)
        ph = PH_EMPTY;
    else if (strcmp(argv[1], "churn") == 0)
        ph = PH_CHURN;
    else if (strcmp(argv[1], "wait") == 0)
        ph = PH_WAIT;
    else if (strcmp(argv[1], "block") == 0)
        ph = PH_BLOCK;
    else {
        fputs(usage, stderr);
        return 2;
    }
    int c;
    optind = 2;
    while ((c = getopt(argc, argv, "i:n:w:s:p:S:c:")) != -1) {
        switch (c) {
        case 'i': name = optarg; break;
        case 'n': n = atol(optarg); break;
        case 'w': warmup = atol(optarg); break;
        case 's': size = strtoull(optarg, NULL, 0); break;
        case 'p': port = atol(optarg); break;
        case 'S': settle_us = atol(optarg); break;
        case 'c': pairs = atol(optarg); break;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (n < 1 || warmup < 0 || size < 8 || size > (1u << 26) || port <= 0 || settle_us < 0 || pairs < 0) {
        fprintf(stderr, "ops_native: bad arguments\n");
        return 2;
    }
    set_up(name, (DAT_CONN_QUAL)port);
    uint64_t cookie = 0;
    /* Warm-up: the write path, whatever the phase, so that every table and queue is grown. */
    run(PH_WRITE, warmup, &cookie);
    /* The measured iterations: post_op() in the write phase only, dequeue_op() in each. */
    if (ph == PH_CHURN) {
        dequeue_fn = dequeue_before;
        run(PH_EMPTY, n, &cookie);
        churn(pairs);
        dequeue_fn = dequeue_after;
        run(PH_EMPTY, n, &cookie);
        printf("ops churn %ld 0 %ld\n", n, pairs);
        fflush(stdout);
        dat_ep_disconnect(ep_a, DAT_CLOSE_ABRUPT_FLAG);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        return 0;
    }
    if (ph == PH_WRITE)
        post_fn = post_op;
    dequeue_fn = dequeue_op;
    pthread_t poster;
    if (ph == PH_BLOCK && (sem_init(&post_go, 0, 0) != 0 || pthread_create(&poster, NULL, poster_main, NULL) != 0)) {
        perror("ops_native: the poster thread");
        exit(1);
    }
    DAT_UINT64 blocked_before = 0, blocked_after = 0;
    check(dat_ib_query_counters(req_a, DCNT_EVD_WAIT_BLOCKED, &blocked_before, 0), "dat_ib_query_counters");
    unsigned long empty = run(ph, n, &cookie);
    check(dat_ib_query_counters(req_a, DCNT_EVD_WAIT_BLOCKED, &blocked_after, 0), "dat_ib_query_counters");
    if (ph == PH_BLOCK) {
        post_cookie = 0;
        sem_post(&post_go);
        pthread_join(poster, NULL);
    }
    printf("ops %s %ld %lu %llu\n", argv[1], n, empty, (unsigned long long)(blocked_after - blocked_before));
    fflush(stdout);
    dat_ep_disconnect(ep_a, DAT_CLOSE_ABRUPT_FLAG);
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return 0;
}
