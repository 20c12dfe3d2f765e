/* The dat2 process that hostile.py attacks: an ordinary consumer of dat2-soft.
 *
 *   target server PORT   accepts every connection request on PORT (a fresh EP each, with
 *                        receives posted), frees each EP when its connection ends; a
 *                        request whose private data starts with "reject" is rejected
 *   target client QUAL [ADDR [PORT]]  connects one EP to ADDR (127.0.0.1), port PORT (0: the
 *                        host alone, the qualifier is the port), qualifier QUAL (any strtoull
 *                        form, all 64 bits), with TARGET_PDATA as private data if set, and
 *                        reports its events
 *   target ud PORT       one UD EP (IB extensions), no receive posted; its PSP on PORT accepts
 *                        every UD resolution on it with private data "ud-ok" (one whose private
 *                        data starts with "reject" is rejected) and rejects RC requests
 *   target udclient PORT [ADDR]  one UD EP that resolves ADDR (127.0.0.1):PORT and reports its
 *                        events
 *   target victim        no DAT at all: a third process whose memory must stay untouched
 *
 * It prints "ready pid=P secret=ADDR win=ADDR rkey=K ia_port=N" once set up (N: the port of
 * the IA's address, dat_ia_query): `secret` is 4 KiB of
 * unregistered memory filled with 'S', `win` 64 KiB registered with every privilege (rkey K).
 * Then it answers lines on standard input:
 *   check    "check secret=ok|CHANGED win=<hex of its first 16 bytes> uniform=0|1 eps=N threads=T
 *            rss_kb=R" (uniform: every byte of win is the same)
 *   free     dat_lmr_free of win's LMR: "freed rc=<DAT_RETURN> ms=<how long it took>"
 *   fill C   sets every byte of win to the character C
 *   epfree   dat_ep_free of every RC EP: "epfreed rc=<the last DAT_RETURN> ms=<how long>"
 *   close    frees every DAT object and closes the IA gracefully: "closed rc=<DAT_RETURN of
 *            dat_ia_close> eps=<EPs it freed>" (a DAT call that fails first: "closed rc=<it>
 *            at=<which>")
 *   quit     exits with status 0
 * and, for the client (a peer that stops reading, hostile.py's stalled_peer cases):
 *   post send|write LEN  "posting", then from a thread of its own (so that a post held in the
 *            call shows) dat_ep_post_send or dat_ep_post_rdma_write of LEN bytes (at most 64
 *            MiB, byte i = i % 251) from a buffer registered once, cookie 100 + k for the
 *            k-th post: "posted rc=<DAT_RETURN> ms=<how long the call took>"
 *   big      registers that buffer (if not yet): "big addr=A rkey=K"
 *   disconnect  dat_ep_disconnect(ABRUPT): "disconnected rc=R ms=M"
 *   bigfree  dat_lmr_free of that buffer's LMR, then every byte of it set to 'Z':
 *            "bigfreed rc=R ms=M"
 *   closeabrupt  dat_ia_close(ABRUPT): "closed rc=R ms=M"
 * with "dto cookie=C status=S len=L" for each of the client's completions;
 * and, for the UD target:
 *   recv N LEN  posts N receives of LEN (at most 8192) bytes on the UD EP: receive k (counted
 *            from 0 over the run, also its cookie) at win + 8192 * (1 + k % 7); "posted N"
 *   rpost    posts one more receive (win + 20480, 4096 bytes) on the newest RC EP:
 *            "rposted rc=R ms=<how long the call took>"
 *   peek OFF N  "peek <hex of win[OFF..OFF+N]>" (N at most 256)
 *   reply TEXT  sends TEXT in one datagram to the peer the last UD_ESTABLISHED named, as a
 *            consumer answers a peer: "replied qpn=Q" (no completion line), or "reply none"
 * It prints "event NAME" for each connection event (client mode, the server's ends, every
 * UD one) and, for the UD target, "dto cookie=C status=S len=L" for each completion.
 * TARGET_IA names the IA to open (default dat2-soft). */
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

#define WIN (64 << 10)
#define MAX_EPS 256

static char secret[4096] __attribute__((aligned(4096)));
static char *win;
static DAT_IA_HANDLE ia;
static DAT_PZ_HANDLE pz;
static DAT_EVD_HANDLE dto, conn, cr;
static DAT_LMR_HANDLE lmr;
static DAT_LMR_CONTEXT lkey;
static DAT_RMR_CONTEXT rkey;
static DAT_EP_HANDLE eps[MAX_EPS];
static int neps;
static DAT_EP_HANDLE ud_ep;
static DAT_PSP_HANDLE psp;
static unsigned long ud_posted;
static DAT_IB_ADDR_HANDLE last_ah;
static int have_ah;
static DAT_EP_HANDLE client_ep;
static char *big;
static DAT_LMR_HANDLE big_lmr;
static DAT_LMR_CONTEXT big_lkey;
#define BIG_MAX (64UL << 20)

static void die(const char *what, DAT_RETURN rc)
{
    const char *major = "", *minor = "";
    dat_strerror(rc, &major, &minor);
    printf("error %s: %s %s\n", what, major, minor);
    fflush(stdout);
    exit(2);
}

#define CHECK(call)                                                                            \
    do {                                                                                       \
        DAT_RETURN rc_ = (call);                                                               \
        if (rc_ != DAT_SUCCESS)                                                                \
            die(#call, rc_);                                                                   \
    } while (0)

static long status_field(const char *name)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, strlen(name)) == 0)
            v = strtol(line + strlen(name), NULL, 10);
    fclose(f);
    return v;
}

static long ms_since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (long)((b.tv_sec - a->tv_sec) * 1000 + (b.tv_nsec - a->tv_nsec) / 1000000);
}

struct post {
    int write;
    DAT_VLEN len;
    DAT_UINT64 cookie;
};

static void *post_thread(void *arg)
{
    struct post *p = arg;
    DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)big, p->len, big_lkey };
    DAT_RMR_TRIPLET r = { 0, p->len, 0 };
    DAT_DTO_COOKIE ck;
    struct timespec a;
    DAT_RETURN rc;
    ck.as_64 = p->cookie;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (p->write)
        rc = dat_ep_post_rdma_write(client_ep, 1, &t, ck, &r, DAT_COMPLETION_DEFAULT_FLAG);
    else
        rc = dat_ep_post_send(client_ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG);
    printf("posted rc=%#x ms=%ld\n", (unsigned)rc, ms_since(&a));
    fflush(stdout);
    free(p);
    return NULL;
}

/* The big buffer, registered once with every privilege; its rmr_context. */
static DAT_RMR_CONTEXT make_big(void)
{
    static DAT_RMR_CONTEXT rk;
    if (!big) {
        DAT_REGION_DESCRIPTION r;
        DAT_VLEN rl;
        DAT_VADDR ra;
        big = aligned_alloc(4096, BIG_MAX);
        if (!big)
            die("aligned_alloc", DAT_INSUFFICIENT_RESOURCES);
        for (unsigned long i = 0; i < BIG_MAX; i++)
            big[i] = (char)(i % 251);
        r.for_va = big;
        CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, BIG_MAX, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &big_lmr, &big_lkey,
                             &rk, &rl, &ra));
    }
    return rk;
}

/* The client's post: from a thread of its own, so that a post held in the call shows. */
static void post(const char *line)
{
    static DAT_UINT64 posts;
    char what[16] = "";
    unsigned long len = 0;
    if (sscanf(line, "post %15s %lu", what, &len) != 2 || len > BIG_MAX || !client_ep) {
        printf("posted bad\n");
        return;
    }
    make_big();
    struct post *p = malloc(sizeof *p);
    pthread_t th;
    if (!p)
        die("malloc", DAT_INSUFFICIENT_RESOURCES);
    p->write = strcmp(what, "write") == 0;
    p->len = len;
    p->cookie = 100 + posts++;
    printf("posting\n");
    fflush(stdout);
    if (pthread_create(&th, NULL, post_thread, p) != 0)
        die("pthread_create", DAT_INSUFFICIENT_RESOURCES);
    pthread_detach(th);
}

static void command(const char *line)
{
    struct timespec a;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (strncmp(line, "check", 5) == 0) {
        int ok = 1;
        for (size_t i = 0; i < sizeof secret; i++)
            ok &= secret[i] == 'S';
        printf("check secret=%s win=", ok ? "ok" : "CHANGED");
        for (int i = 0; win && i < 16; i++)
            printf("%02x", (unsigned char)win[i]);
        int uniform = 1;
        for (size_t i = 1; win && i < WIN; i++)
            uniform &= win[i] == win[0];
        printf(" uniform=%d eps=%d threads=%ld rss_kb=%ld\n", uniform, neps, status_field("Threads:"), status_field("VmRSS:"));
    } else if (strncmp(line, "free", 4) == 0 && lmr) {
        /* dat_lmr_free of the window's LMR: how long it took, and what it returned */
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        DAT_RETURN rc = dat_lmr_free(lmr);
        clock_gettime(CLOCK_MONOTONIC, &b);
        lmr = DAT_HANDLE_NULL;
        printf("freed rc=%#x ms=%ld\n", (unsigned)rc, (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000));
    } else if (strncmp(line, "fill ", 5) == 0 && win) {
        memset(win, line[5], WIN);
        printf("filled\n");
    } else if (strncmp(line, "recv ", 5) == 0 && ud_ep) {
        unsigned n = 0, len = 0;
        if (sscanf(line + 5, "%u %u", &n, &len) != 2 || len > 8192)
            n = 0;
        for (unsigned i = 0; i < n; i++, ud_posted++) {
            DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)(win + 8192 * (1 + ud_posted % 7)), len, lkey };
            DAT_DTO_COOKIE ck;
            ck.as_64 = (DAT_UINT64)ud_posted;
            CHECK(dat_ep_post_recv(ud_ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
        }
        printf("posted %u\n", n);
    } else if (strncmp(line, "rpost", 5) == 0 && neps > 0) {
        DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)(win + 4096 * 5), 4096, lkey };
        DAT_DTO_COOKIE ck;
        ck.as_64 = 5;
        DAT_RETURN rc = dat_ep_post_recv(eps[neps - 1], 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG);
        printf("rposted rc=%#x ms=%ld\n", (unsigned)rc, ms_since(&a));
    } else if (strncmp(line, "peek ", 5) == 0 && win) {
        unsigned off = 0, n = 0;
        if (sscanf(line + 5, "%u %u", &off, &n) != 2 || n > 256 || off > WIN || n > WIN - off)
            n = 0;
        printf("peek ");
        for (unsigned i = 0; i < n; i++)
            printf("%02x", (unsigned char)win[off + i]);
        printf("\n");
    } else if (strncmp(line, "reply ", 6) == 0 && ud_ep) {
        if (!have_ah) {
            printf("reply none\n");
        } else {
            /* The text from win's last 4 KiB, which no receive uses. */
            size_t n = strcspn(line + 6, "\n");
            char *at = win + WIN - 4096;
            memcpy(at, line + 6, n);
            DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)at, (DAT_VLEN)n, lkey };
            DAT_DTO_COOKIE ck;
            ck.as_64 = ~0ULL;
            CHECK(dat_ib_post_send_ud(ud_ep, 1, &t, &last_ah, ck, DAT_COMPLETION_SUPPRESS_FLAG));
            printf("replied qpn=%u\n", (unsigned)last_ah.qpn);
        }
    } else if (strncmp(line, "post ", 5) == 0) {
        post(line);
    } else if (strncmp(line, "big", 3) == 0 && (line[3] == '\n' || !line[3]) && client_ep) {
        DAT_RMR_CONTEXT rk = make_big();
        printf("big addr=%#lx rkey=%u\n", (unsigned long)(uintptr_t)big, (unsigned)rk);
    } else if (strncmp(line, "disconnect", 10) == 0 && client_ep) {
        DAT_RETURN rc = dat_ep_disconnect(client_ep, DAT_CLOSE_ABRUPT_FLAG);
        printf("disconnected rc=%#x ms=%ld\n", (unsigned)rc, ms_since(&a));
    } else if (strncmp(line, "bigfree", 7) == 0 && big_lmr) {
        DAT_RETURN rc = dat_lmr_free(big_lmr);
        long ms = ms_since(&a);
        big_lmr = DAT_HANDLE_NULL;
        memset(big, 'Z', BIG_MAX);
        printf("bigfreed rc=%#x ms=%ld\n", (unsigned)rc, ms);
    } else if (strncmp(line, "closeabrupt", 11) == 0 && ia) {
        DAT_RETURN rc = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        printf("closed rc=%#x ms=%ld\n", (unsigned)rc, ms_since(&a));
        ia = DAT_HANDLE_NULL;
        client_ep = DAT_HANDLE_NULL;
        neps = 0;
    } else if (strncmp(line, "epfree", 6) == 0) {
        DAT_RETURN rc = DAT_SUCCESS;
        while (neps > 0)
            rc = dat_ep_free(eps[--neps]);
        client_ep = DAT_HANDLE_NULL;
        printf("epfreed rc=%#x ms=%ld\n", (unsigned)rc, ms_since(&a));
    } else if (strncmp(line, "close", 5) == 0 && ia) {
        int freed = neps;
        DAT_RETURN rc = DAT_SUCCESS;
        const char *at = NULL;
#define STEP(call)                                                                             \
    do {                                                                                       \
        if (rc == DAT_SUCCESS && (rc = (call)) != DAT_SUCCESS)                                 \
            at = #call;                                                                        \
    } while (0)
        while (neps > 0 && rc == DAT_SUCCESS)
            STEP(dat_ep_free(eps[--neps]));
        if (ud_ep)
            STEP(dat_ep_free(ud_ep));
        if (psp)
            STEP(dat_psp_free(psp));
        if (lmr)
            STEP(dat_lmr_free(lmr));
        STEP(dat_evd_free(dto));
        STEP(dat_evd_free(conn));
        STEP(dat_evd_free(cr));
        STEP(dat_pz_free(pz));
        if (at) {
            printf("closed rc=%#x at=%s\n", (unsigned)rc, at);
        } else {
            rc = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
            printf("closed rc=%#x eps=%d\n", (unsigned)rc, freed);
        }
#undef STEP
        ia = DAT_HANDLE_NULL;
        ud_ep = DAT_HANDLE_NULL;
        lmr = DAT_HANDLE_NULL;
        psp = DAT_HANDLE_NULL;
        client_ep = DAT_HANDLE_NULL;
    } else if (strncmp(line, "quit", 4) == 0) {
        fflush(stdout);
        _exit(0);
    }
    fflush(stdout);
}

static const char *conn_name(DAT_EVENT_NUMBER n)
{
    switch (n) {
    case DAT_CONNECTION_EVENT_ESTABLISHED: return "ESTABLISHED";
    case DAT_CONNECTION_EVENT_DISCONNECTED: return "DISCONNECTED";
    case DAT_CONNECTION_EVENT_BROKEN: return "BROKEN";
    case DAT_CONNECTION_EVENT_PEER_REJECTED: return "PEER_REJECTED";
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "NON_PEER_REJECTED";
    case DAT_CONNECTION_EVENT_UNREACHABLE: return "UNREACHABLE";
    case DAT_CONNECTION_EVENT_TIMED_OUT: return "TIMED_OUT";
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "ACCEPT_COMPLETION_ERROR";
    default: break;
    }
    /* The IB extension's UD events are another enum (ints here). */
    if ((int)n == (int)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED)
        return "UD_ESTABLISHED";
    if ((int)n == (int)DAT_IB_UD_CONNECTION_REJECT_EVENT)
        return "UD_REJECT";
    if ((int)n == (int)DAT_IB_UD_CONNECTION_ERROR_EVENT)
        return "UD_ERROR";
    return "OTHER";
}

static DAT_EP_HANDLE new_ep(void)
{
    DAT_EP_HANDLE ep;
    CHECK(dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep));
    for (int i = 0; i < 4; i++) {
        DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)(win + 4096 * (i + 1)), 4096, lkey };
        DAT_DTO_COOKIE ck;
        ck.as_64 = (DAT_UINT64)i;
        CHECK(dat_ep_post_recv(ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
    }
    if (neps < MAX_EPS)
        eps[neps++] = ep;
    return ep;
}

static void forget_ep(DAT_EP_HANDLE ep)
{
    for (int i = 0; i < neps; i++)
        if (eps[i] == ep) {
            eps[i] = eps[--neps];
            dat_ep_free(ep);
            return;
        }
}

/* The UD target's EP: UD service, datagrams of at most 4096 bytes, no receive posted. */
static void new_ud_ep(void)
{
    DAT_EP_ATTR attr;
    memset(&attr, 0, sizeof attr);
    attr.service_type = (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD;
    attr.max_message_size = 4096;
    attr.max_recv_dtos = 64;
    attr.max_request_dtos = 16;
    attr.max_recv_iov = 1;
    attr.max_request_iov = 1;
    attr.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
    CHECK(dat_ep_create(ia, pz, dto, dto, conn, &attr, &ud_ep));
}

/* A UD request: accepted on the UD EP unless its private data starts with "reject"; an RC
 * request to the UD target is rejected. */
static void ud_request(DAT_EVENT *ev)
{
    DAT_CR_HANDLE h = ev->event_data.cr_arrival_event_data.cr_handle;
    DAT_CR_PARAM param;
    memset(&param, 0, sizeof param);
    int reject = (int)ev->event_number != (int)DAT_IB_UD_CONNECTION_REQUEST_EVENT ||
                 (dat_cr_query(h, DAT_CR_FIELD_ALL, &param) == DAT_SUCCESS && param.private_data &&
                  param.private_data_size >= 6 && memcmp(param.private_data, "reject", 6) == 0);
    if (reject)
        dat_cr_reject(h, 0, NULL);
    else
        CHECK(dat_cr_accept(h, ud_ep, 5, "ud-ok"));
}

/* One round of the event loop: connection requests, connection and DTO events, stdin. */
static void pump(int server)
{
    DAT_EVENT ev;
    char line[256];
    struct pollfd p = { 0, POLLIN, 0 };
    while (ia && ud_ep && dat_evd_dequeue(cr, &ev) == DAT_SUCCESS)
        ud_request(&ev);
    while (ia && server && dat_evd_dequeue(cr, &ev) == DAT_SUCCESS) {
        DAT_CR_HANDLE h = ev.event_data.cr_arrival_event_data.cr_handle;
        DAT_CR_PARAM param;
        memset(&param, 0, sizeof param);
        if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
            continue;
        /* private data starting with "reject" asks to be turned away */
        if (dat_cr_query(h, DAT_CR_FIELD_ALL, &param) == DAT_SUCCESS && param.private_data &&
            param.private_data_size >= 6 && memcmp(param.private_data, "reject", 6) == 0)
            dat_cr_reject(h, 0, NULL);
        else
            dat_cr_accept(h, new_ep(), 0, NULL);
    }
    while (ia && dat_evd_dequeue(conn, &ev) == DAT_SUCCESS) {
        if ((int)ev.event_number == (int)DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED) {
            const DAT_IB_EXTENSION_EVENT_DATA *x = (const void *)ev.event_extension_data;
            last_ah = x->remote_ah;
            have_ah = 1;
        }
        printf("event %s\n", conn_name(ev.event_number));
        fflush(stdout);
        if (server && ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
            forget_ep(ev.event_data.connect_event_data.ep_handle);
    }
    while (ia && dat_evd_dequeue(dto, &ev) == DAT_SUCCESS) {
        DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        if (((ud_ep && d->user_cookie.as_64 != ~0ULL) || client_ep) &&
            (ev.event_number == DAT_DTO_COMPLETION_EVENT || (int)ev.event_number == (int)DAT_IB_DTO_EVENT))
            printf("dto cookie=%llu status=%d len=%llu\n", (unsigned long long)d->user_cookie.as_64, (int)d->status,
                   (unsigned long long)d->transfered_length);
    }
    if (poll(&p, 1, 5) > 0) {
        if (!fgets(line, sizeof line, stdin))
            _exit(0);
        command(line);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int port = argc > 2 ? atoi(argv[2]) : 0;
    DAT_CONN_QUAL qual = argc > 2 ? (DAT_CONN_QUAL)strtoull(argv[2], NULL, 0) : 0;
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN reg_len;
    DAT_VADDR reg_addr;
    memset(secret, 'S', sizeof secret);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "victim") == 0) {
        printf("ready pid=%d secret=%#lx win=0 rkey=0\n", (int)getpid(), (unsigned long)(uintptr_t)secret);
        for (;;)
            pump(0);
    }
    int udclient = strcmp(mode, "udclient") == 0;
    if (strcmp(mode, "server") != 0 && strcmp(mode, "client") != 0 && strcmp(mode, "ud") != 0 && !udclient) {
        fprintf(stderr, "usage: target server|client|ud|udclient PORT | target victim\n");
        return 2;
    }
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    CHECK(dat_ia_open(getenv("TARGET_IA") ? getenv("TARGET_IA") : "dat2-soft", 8, &async, &ia));
    CHECK(dat_pz_create(ia, &pz));
    CHECK(dat_evd_create(ia, 1024, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
    CHECK(dat_evd_create(ia, 1024, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
    CHECK(dat_evd_create(ia, 1024, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr));
    win = aligned_alloc(4096, WIN);
    if (!win)
        return 2;
    memset(win, 0, WIN);
    r.for_va = win;
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, WIN, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lkey,
                         &rkey, &reg_len, &reg_addr));
    if (strcmp(mode, "server") == 0 || strcmp(mode, "ud") == 0) {
        if (strcmp(mode, "ud") == 0)
            new_ud_ep();
        CHECK(dat_psp_create(ia, (DAT_CONN_QUAL)port, cr, DAT_PSP_CONSUMER_FLAG, &psp));
    } else {
        struct sockaddr_in sin;
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (argc > 3 && inet_pton(AF_INET, argv[3], &sin.sin_addr) != 1)
            die("inet_pton", DAT_INVALID_PARAMETER);
        if (argc > 4)
            sin.sin_port = htons((uint16_t)atoi(argv[4]));
        DAT_EP_HANDLE ep;
        if (udclient) {
            new_ud_ep();
            ep = ud_ep;
        } else {
            ep = client_ep = new_ep();
        }
        char *pdata = getenv("TARGET_PDATA");
        CHECK(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&sin, qual, 10 * 1000 * 1000, pdata ? (DAT_COUNT)strlen(pdata) : 0,
                             pdata, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
    }
    DAT_IA_ATTR ia_attr;
    memset(&ia_attr, 0, sizeof ia_attr);
    CHECK(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &ia_attr, 0, NULL));
    unsigned ia_port = ntohs(((struct sockaddr_in *)ia_attr.ia_address_ptr)->sin_port);
    printf("ready pid=%d secret=%#lx win=%#lx rkey=%u ia_port=%u\n", (int)getpid(), (unsigned long)(uintptr_t)secret,
           (unsigned long)(uintptr_t)win, (unsigned)rkey, ia_port);
    for (;;)
        pump(strcmp(mode, "server") == 0);
}
