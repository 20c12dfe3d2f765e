/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: the main example. Two processes talk RDMA through the built-in software
 * device dat2-soft (no dat.conf, no RDMA hardware): each opens the IA and registers memory
 * (showing the three memory types on the way), they connect, exchange their buffers'
 * RMR triplets, then the client RDMA-writes a pattern into the server, RDMA-reads the
 * server's pattern back, verifies both, and prints the throughput.
 *
 * Build: cc rdma.c $(pkg-config --cflags --libs dat2)      Run: ./rdma [size_in_bytes] */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dat2/udat.h>

#define PORT 20811
#define ROUNDS 64

#define CHECK(call)                                                                        \
    do {                                                                                   \
        DAT_RETURN rc_ = (call);                                                           \
        if (rc_ != DAT_SUCCESS) {                                                          \
            const char *major_ = "", *minor_ = "";                                         \
            dat_strerror(rc_, &major_, &minor_);                                           \
            fprintf(stderr, "[%s] %s:%d: %s: %s %s (%#x)\n", who, __FILE__, __LINE__,      \
                    #call, major_, minor_, rc_);                                           \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static const char *who = "main";

struct node {
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async_evd, dto_evd, conn_evd, cr_evd;
    DAT_PZ_HANDLE pz;
    DAT_EP_HANDLE ep;
    char *buf, *msg;
    size_t len;
    DAT_LMR_HANDLE lmr, msg_lmr;
    DAT_LMR_CONTEXT lkey, msg_lkey;
    DAT_RMR_CONTEXT rkey;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static DAT_EVENT wait_for(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER expected)
{
    DAT_EVENT ev;
    DAT_COUNT nmore;
    CHECK(dat_evd_wait(evd, 10 * 1000 * 1000, 1, &ev, &nmore));
    if (ev.event_number != expected) {
        fprintf(stderr, "[%s] expected event %#x, got %#x\n", who, expected, ev.event_number);
        exit(1);
    }
    if (expected == DAT_DTO_COMPLETION_EVENT &&
        ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
        fprintf(stderr, "[%s] DTO failed with status %d\n", who,
                ev.event_data.dto_completion_event_data.status);
        exit(1);
    }
    return ev;
}

static void setup(struct node *n, size_t len, int show)
{
    char name[] = "dat2-soft";
    DAT_REGION_DESCRIPTION r;
    DAT_VLEN reg_len;
    DAT_VADDR reg_addr;
    DAT_RMR_CONTEXT unused;

    n->async_evd = DAT_HANDLE_NULL;
    CHECK(dat_ia_open(name, 8, &n->async_evd, &n->ia));
    CHECK(dat_pz_create(n->ia, &n->pz));
    CHECK(dat_evd_create(n->ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &n->dto_evd));
    CHECK(dat_evd_create(n->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &n->conn_evd));
    CHECK(dat_evd_create(n->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &n->cr_evd));
    CHECK(dat_ep_create(n->ia, n->pz, n->dto_evd, n->dto_evd, n->conn_evd, NULL, &n->ep));

    n->len = len;
    n->buf = aligned_alloc(4096, len);
    n->msg = aligned_alloc(4096, 4096);
    if (!n->buf || !n->msg)
        exit(1);
    memset(n->buf, 0, len);
    r.for_va = n->buf;
    CHECK(dat_lmr_create(n->ia, DAT_MEM_TYPE_VIRTUAL, r, len, n->pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
                         &n->lmr, &n->lkey, &n->rkey, &reg_len, &reg_addr));
    r.for_va = n->msg;
    CHECK(dat_lmr_create(n->ia, DAT_MEM_TYPE_VIRTUAL, r, 4096, n->pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                         DAT_VA_TYPE_VA, &n->msg_lmr, &n->msg_lkey, &unused, &reg_len, &reg_addr));
    if (show) {
        /* The other memory types, briefly: an LMR over an LMR in a second PZ, and two LMRs
         * sharing one registration through a shared-memory cookie. */
        DAT_PZ_HANDLE pz2;
        DAT_LMR_HANDLE over, s1, s2;
        DAT_LMR_CONTEXT k1, k2, k3;
        char cookie[DAT_LMR_COOKIE_SIZE] = "dat2 example cookie";
        CHECK(dat_pz_create(n->ia, &pz2));
        r.for_lmr_handle = n->lmr;
        CHECK(dat_lmr_create(n->ia, DAT_MEM_TYPE_LMR, r, 0, pz2, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA,
                             &over, &k1, &unused, &reg_len, &reg_addr));
        r.for_shared_memory.virtual_address = n->buf;
        r.for_shared_memory.shared_memory_id = &cookie;
        CHECK(dat_lmr_create(n->ia, DAT_MEM_TYPE_SHARED_VIRTUAL, r, len, n->pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                             DAT_VA_TYPE_VA, &s1, &k2, &unused, &reg_len, &reg_addr));
        CHECK(dat_lmr_create(n->ia, DAT_MEM_TYPE_SHARED_VIRTUAL, r, len, n->pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                             DAT_VA_TYPE_VA, &s2, &k3, &unused, &reg_len, &reg_addr));
        printf("[%s] registered %zu bytes: virtual lkey %#x rkey %#x; LMR-over-LMR lkey %#x; "
               "shared-virtual lkeys %#x %#x\n", who, len, n->lkey, n->rkey, k1, k2, k3);
        CHECK(dat_lmr_free(s2));
        CHECK(dat_lmr_free(s1));
        CHECK(dat_lmr_free(over));
        CHECK(dat_pz_free(pz2));
    }
}

static void post_recv_msg(struct node *n)
{
    DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)n->msg, 64, n->msg_lkey };
    DAT_DTO_COOKIE ck;
    ck.as_64 = 1;
    CHECK(dat_ep_post_recv(n->ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
}

/* Sends this side's RMR triplet and receives the peer's. */
static DAT_RMR_TRIPLET exchange(struct node *n)
{
    DAT_RMR_TRIPLET mine = { (DAT_VADDR)(uintptr_t)n->buf, (DAT_SEG_LENGTH)n->len, n->rkey };
    DAT_RMR_TRIPLET theirs = { 0, 0, 0 };
    DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)(n->msg + 2048), sizeof mine, n->msg_lkey };
    DAT_DTO_COOKIE ck;
    memcpy(n->msg + 2048, &mine, sizeof mine);
    ck.as_64 = 2;
    CHECK(dat_ep_post_send(n->ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
    for (int got = 0; got < 2; got++) {
        DAT_EVENT ev = wait_for(n->dto_evd, DAT_DTO_COMPLETION_EVENT);
        if (ev.event_data.dto_completion_event_data.operation == DAT_DTO_RECEIVE)
            memcpy(&theirs, n->msg, sizeof theirs);
    }
    return theirs;
}

static void fill(char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (char)(i * 31u + seed);
}

static int verify(const char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != (char)(i * 31u + seed))
            return 0;
    return 1;
}

static int server(size_t len)
{
    struct node n;
    DAT_PSP_HANDLE psp;
    who = "server";
    setup(&n, len, 0);
    fill(n.buf, len, 7);
    post_recv_msg(&n);
    CHECK(dat_psp_create(n.ia, PORT, n.cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
    DAT_EVENT ev = wait_for(n.cr_evd, DAT_CONNECTION_REQUEST_EVENT);
    CHECK(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, n.ep, 0, NULL));
    wait_for(n.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
    post_recv_msg(&n); /* for the client's "done" */
    exchange(&n);
    /* The client writes into our buffer and reads it back; it says "done" when finished. */
    wait_for(n.dto_evd, DAT_DTO_COMPLETION_EVENT);
    int ok = verify(n.buf, len, 3);
    printf("[server] data the client RDMA-wrote into our memory: %s\n", ok ? "verified" : "WRONG");
    wait_for(n.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
    CHECK(dat_psp_free(psp));
    CHECK(dat_ia_close(n.ia, DAT_CLOSE_ABRUPT_FLAG));
    return ok ? 0 : 1;
}

static int client(size_t len)
{
    struct node n;
    struct sockaddr_in sin;
    DAT_DTO_COOKIE ck;
    who = "client";
    setup(&n, len, 1);
    post_recv_msg(&n);
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(dat_ep_connect(n.ep, (DAT_IA_ADDRESS_PTR)&sin, PORT, 10 * 1000 * 1000, 0, NULL, DAT_QOS_BEST_EFFORT,
                         DAT_CONNECT_DEFAULT_FLAG));
    wait_for(n.conn_evd, DAT_CONNECTION_EVENT_ESTABLISHED);
    DAT_RMR_TRIPLET remote = exchange(&n);
    DAT_LMR_TRIPLET local = { (DAT_VADDR)(uintptr_t)n.buf, (DAT_SEG_LENGTH)len, n.lkey };

    /* RDMA write: our pattern into the server's buffer, ROUNDS times. */
    fill(n.buf, len, 3);
    double t0 = now();
    for (int i = 0; i < ROUNDS; i++) {
        ck.as_64 = 100 + (uint64_t)i;
        CHECK(dat_ep_post_rdma_write(n.ep, 1, &local, ck, &remote, DAT_COMPLETION_DEFAULT_FLAG));
        wait_for(n.dto_evd, DAT_DTO_COMPLETION_EVENT);
    }
    double write_s = now() - t0;

    /* RDMA read: the server's buffer (now holding our pattern) back into ours, cleared. */
    memset(n.buf, 0, len);
    t0 = now();
    for (int i = 0; i < ROUNDS; i++) {
        ck.as_64 = 200 + (uint64_t)i;
        CHECK(dat_ep_post_rdma_read(n.ep, 1, &local, ck, &remote, DAT_COMPLETION_DEFAULT_FLAG));
        wait_for(n.dto_evd, DAT_DTO_COMPLETION_EVENT);
    }
    double read_s = now() - t0;
    int ok = verify(n.buf, len, 3);
    printf("[client] RDMA write %d x %zu bytes: %.1f MB/s\n", ROUNDS, len, ROUNDS * (double)len / write_s / 1e6);
    printf("[client] RDMA read  %d x %zu bytes: %.1f MB/s; data read back %s\n", ROUNDS, len,
           ROUNDS * (double)len / read_s / 1e6, ok ? "verified" : "WRONG");

    /* Tell the server we are done, then disconnect. */
    DAT_LMR_TRIPLET t = { (DAT_VADDR)(uintptr_t)n.msg, 4, n.msg_lkey };
    memcpy(n.msg, "done", 4);
    ck.as_64 = 3;
    CHECK(dat_ep_post_send(n.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
    wait_for(n.dto_evd, DAT_DTO_COMPLETION_EVENT);
    CHECK(dat_ep_disconnect(n.ep, DAT_CLOSE_GRACEFUL_FLAG));
    wait_for(n.conn_evd, DAT_CONNECTION_EVENT_DISCONNECTED);
    CHECK(dat_ia_close(n.ia, DAT_CLOSE_ABRUPT_FLAG));
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : (size_t)4 << 20;
    if (len < 4096)
        len = 4096;
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0)
        return server(len);
    usleep(200 * 1000); /* let the server create its service point */
    int crc = client(len);
    int status = 0;
    waitpid(pid, &status, 0);
    int src = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    printf("%s\n", crc == 0 && src == 0 ? "RDMA example: PASSED" : "RDMA example: FAILED");
    return crc || src;
}
