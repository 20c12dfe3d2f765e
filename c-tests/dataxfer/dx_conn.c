/* Connection cases: refusals, private data, timeouts, disconnects, a killed peer, EP free. */
#include "dx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dx_cases.h"

/* Binds a TCP socket to 127.0.0.1 on one of this case's ports without listening, so that
 * nobody listens there while it is held; returns the socket and sets *port. */
static int hold_port(DAT_CONN_QUAL *port)
{
    for (int k = 5; k < 8; k++) {
        struct sockaddr_in a;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return -1;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)dx_port(k));
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            *port = dx_port(k);
            return fd;
        }
        close(fd);
    }
    return -1;
}

void case_conn_no_listener(void)
{
    struct node c;
    DAT_EP_HANDLE ep;
    DAT_EVENT ev;
    DAT_CONN_QUAL port = 0;
    int held = hold_port(&port);
    memset(&c, 0, sizeof c);
    if (EXPECT(held >= 0, "no free port to connect to") && node_open(&c, PROVIDER, 16, 16) && ep_make(&c, NULL, &ep)) {
        /* a port bound by a socket that does not listen: the connection is refused */
        if (EXPECT_RC(dat_ep_connect(ep, dx_loopback(0), port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                     DAT_CONNECT_DEFAULT_FLAG),
                      DAT_SUCCESS)) {
            DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, c.conn, WAIT_MS, &ev);
            EXPECT(num == DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
                   "connection event 0x%x, expected NON_PEER_REJECTED 0x4003", (unsigned)num);
            EXPECT(num == 0 || ev.event_data.connect_event_data.ep_handle == ep, "event for EP %p, expected %p",
                   ev.event_data.connect_event_data.ep_handle, ep);
        }
    }
    if (held >= 0)
        close(held);
    node_close(&c);
}

/* Client connects with `req` as private data; returns the CR the server sees. */
static int request(struct node *s, struct node *c, DAT_EP_HANDLE ce, const void *req, DAT_COUNT req_len,
                   DAT_CR_HANDLE *cr)
{
    DAT_EVENT ev;
    if (!EXPECT_RC(dat_ep_connect(ce, dx_loopback(0), s->port, 5000000, req_len, (DAT_PVOID)req, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS))
        return 0;
    (void)c;
    if (!EXPECT_RC(wait_ev(s->cr, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "server got event 0x%x", (unsigned)ev.event_number))
        return 0;
    *cr = ev.event_data.cr_arrival_event_data.cr_handle;
    return 1;
}

void case_conn_reject_pdata(void)
{
    struct pair p;
    DAT_CR_HANDLE cr;
    DAT_CR_PARAM param;
    DAT_EVENT ev;
    static const char req[] = "may I connect?";
    static const char answer[] = "no thanks: try again later";
    memset(&p, 0, sizeof p);
    if (!node_open(&p.s, PROVIDER, 16, 16) || !node_open(&p.c, PROVIDER, 16, 16) || !ep_make(&p.c, NULL, &p.ce) ||
        !node_listen(&p.s, dx_port(0)) || !request(&p.s, &p.c, p.ce, req, sizeof req, &cr))
        goto out;
    memset(&param, 0, sizeof param);
    if (EXPECT_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &param), DAT_SUCCESS))
        EXPECT(param.private_data_size == (DAT_COUNT)sizeof req && param.private_data &&
                   memcmp(param.private_data, req, sizeof req) == 0,
               "the CR carries %d bytes of private data, expected the request's %zu", (int)param.private_data_size,
               sizeof req);
    if (!EXPECT_RC(dat_cr_reject(cr, sizeof answer, (DAT_PVOID)answer), DAT_SUCCESS))
        goto out;
    DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, p.c.conn, WAIT_MS, &ev);
    if (EXPECT(num == DAT_CONNECTION_EVENT_PEER_REJECTED, "connection event 0x%x, expected PEER_REJECTED 0x4002",
               (unsigned)num)) {
        DAT_CONNECTION_EVENT_DATA *cd = &ev.event_data.connect_event_data;
        EXPECT(cd->private_data_size == (DAT_COUNT)sizeof answer, "reject carries %d bytes, expected %zu",
               (int)cd->private_data_size, sizeof answer);
        EXPECT(cd->private_data && cd->private_data_size == (DAT_COUNT)sizeof answer &&
                   memcmp(cd->private_data, answer, sizeof answer) == 0,
               "the reject's private data differs");
    }
out:
    pair_down(&p);
}

void case_conn_accept_pdata_256(void)
{
    struct pair p;
    DAT_CR_HANDLE cr;
    DAT_EVENT ev;
    /* The IA's whole max_private_data_size (256 on the soft device). */
    unsigned char data[256];
    DAT_COUNT max = 0;
    fill(data, sizeof data, 256);
    memset(&p, 0, sizeof p);
    if (!node_open(&p.s, PROVIDER, 16, 16) || !node_open(&p.c, PROVIDER, 16, 16) || !ep_make(&p.s, NULL, &p.se) ||
        !ep_make(&p.c, NULL, &p.ce) || !node_listen(&p.s, dx_port(0)))
        goto out;
    max = dx_max_pdata(p.s.ia);
    if (!EXPECT(max >= 1 && max <= 256, "max_private_data_size %d", (int)max))
        goto out;
    if (dx_on_soft_device() && !EXPECT(max == 256, "max_private_data_size %d on the soft device", (int)max))
        goto out;
    if (!request(&p.s, &p.c, p.ce, NULL, 0, &cr))
        goto out;
    if (!EXPECT_RC(dat_cr_accept(cr, p.se, max, data), DAT_SUCCESS))
        goto out;
    DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, p.c.conn, WAIT_MS, &ev);
    if (EXPECT(num == DAT_CONNECTION_EVENT_ESTABLISHED, "client event 0x%x, expected ESTABLISHED", (unsigned)num)) {
        DAT_CONNECTION_EVENT_DATA *cd = &ev.event_data.connect_event_data;
        EXPECT(cd->private_data_size == max, "ESTABLISHED carries %d bytes of private data, expected %d",
               (int)cd->private_data_size, (int)max);
        EXPECT(cd->private_data && cd->private_data_size == max && memcmp(cd->private_data, data, (size_t)max) == 0,
               "ESTABLISHED private data differs from the accept's");
    }
    num = wait_conn_at(__LINE__, p.s.conn, WAIT_MS, &ev);
    EXPECT(num == DAT_CONNECTION_EVENT_ESTABLISHED, "server event 0x%x, expected ESTABLISHED", (unsigned)num);
out:
    pair_down(&p);
}

void case_conn_pdata_257(void)
{
    struct pair p;
    DAT_CR_HANDLE cr;
    DAT_EVENT ev;
    /* One byte more than the IA's max_private_data_size (257 on the soft device). */
    unsigned char data[257];
    DAT_COUNT max = 0;
    fill(data, sizeof data, 257);
    memset(&p, 0, sizeof p);
    if (!node_open(&p.s, PROVIDER, 16, 16) || !node_open(&p.c, PROVIDER, 16, 16) || !ep_make(&p.s, NULL, &p.se) ||
        !ep_make(&p.c, NULL, &p.ce) || !node_listen(&p.s, dx_port(0)))
        goto out;
    max = dx_max_pdata(p.s.ia);
    if (!EXPECT(max >= 1 && max <= 256, "max_private_data_size %d", (int)max))
        goto out;
    /* private_data_size is the 5th argument of dat_ep_connect */
    EXPECT_RC(dat_ep_connect(p.ce, dx_loopback(0), p.s.port, 5000000, max + 1, data, DAT_QOS_BEST_EFFORT,
                             DAT_CONNECT_DEFAULT_FLAG),
              RC_ARG5);
    EXPECT_RC(wait_ev(p.s.cr, 200, &ev), RC_TIMEOUT);
    if (!request(&p.s, &p.c, p.ce, data, max, &cr))
        goto out;
    /* ... the 3rd of dat_cr_accept, the 2nd of dat_cr_reject */
    EXPECT_RC(dat_cr_accept(cr, p.se, max + 1, data), RC_ARG3);
    EXPECT_RC(dat_cr_reject(cr, max + 1, data), RC_ARG2);
    /* the request is still there and can be accepted */
    if (EXPECT_RC(dat_cr_accept(cr, p.se, 0, NULL), DAT_SUCCESS)) {
        DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, p.c.conn, WAIT_MS, &ev);
        EXPECT(num == DAT_CONNECTION_EVENT_ESTABLISHED, "client event 0x%x after the refused accept", (unsigned)num);
        EXPECT(num != DAT_CONNECTION_EVENT_ESTABLISHED || ev.event_data.connect_event_data.private_data_size == 0,
               "ESTABLISHED carries %d bytes after an accept with none",
               (int)ev.event_data.connect_event_data.private_data_size);
    }
out:
    pair_down(&p);
}

void case_conn_timeout(void)
{
    struct node s, c;
    DAT_EP_HANDLE ep;
    DAT_EVENT ev;
    memset(&s, 0, sizeof s);
    if (node_open(&s, PROVIDER, 16, 16) && node_listen(&s, dx_port(0)) && node_open(&c, PROVIDER, 16, 16) &&
        ep_make(&c, NULL, &ep)) {
        /* the PSP's CR is never accepted: the connect must time out after 200 ms */
        double t0 = dx_now();
        if (EXPECT_RC(dat_ep_connect(ep, dx_loopback(0), s.port, 200000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                     DAT_CONNECT_DEFAULT_FLAG),
                      DAT_SUCCESS)) {
            DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, c.conn, 3000, &ev);
            double took = dx_now() - t0;
            EXPECT(num == DAT_CONNECTION_EVENT_TIMED_OUT, "connection event 0x%x after %.3f s, expected TIMED_OUT 0x4007",
                   (unsigned)num, took);
            EXPECT(num == 0 || (took >= 0.15 && took <= 1.0), "TIMED_OUT after %.3f s, expected about 0.2 s", took);
            DAT_EP_STATE st;
            if (EXPECT_RC(dat_ep_get_status(ep, &st, NULL, NULL), DAT_SUCCESS))
                EXPECT(st == DAT_EP_STATE_DISCONNECTED, "EP state %d after the timeout, expected DISCONNECTED",
                       (int)st);
        }
        /* the server did see the request */
        EXPECT_RC(wait_ev(s.cr, 1000, &ev), DAT_SUCCESS);
        EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "server event 0x%x", (unsigned)ev.event_number);
    }
    node_close(&c);
    node_close(&s);
}

void case_conn_disconnect_graceful(void)
{
    struct pair p;
    DAT_EVENT ev;
    DAT_EP_STATE st;
    if (pair_up(&p, dx_port(0), NULL, NULL, 16) &&
        EXPECT_RC(dat_ep_disconnect(p.ce, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS)) {
        DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, p.c.conn, WAIT_MS, &ev);
        EXPECT(num == DAT_CONNECTION_EVENT_DISCONNECTED, "active side: event 0x%x, expected DISCONNECTED 0x4005",
               (unsigned)num);
        num = wait_conn_at(__LINE__, p.s.conn, WAIT_MS, &ev);
        EXPECT(num == DAT_CONNECTION_EVENT_DISCONNECTED, "passive side: event 0x%x, expected DISCONNECTED 0x4005",
               (unsigned)num);
        EXPECT(num == 0 || ev.event_data.connect_event_data.ep_handle == p.se, "passive event for EP %p, expected %p",
               ev.event_data.connect_event_data.ep_handle, p.se);
        if (EXPECT_RC(dat_ep_get_status(p.ce, &st, NULL, NULL), DAT_SUCCESS))
            EXPECT(st == DAT_EP_STATE_DISCONNECTED, "active EP state %d", (int)st);
        if (EXPECT_RC(dat_ep_get_status(p.se, &st, NULL, NULL), DAT_SUCCESS))
            EXPECT(st == DAT_EP_STATE_DISCONNECTED, "passive EP state %d", (int)st);
        EXPECT_EMPTY(p.c.conn, "active connection EVD");
        EXPECT_EMPTY(p.s.conn, "passive connection EVD");
    }
    pair_down(&p);
}

/* The passive side's ESTABLISHED of a connection is queued before anything the active side
 * does after its own ESTABLISHED, on any connection: Debian's dtestcm counts the server's
 * first N connection events as the N ESTABLISHED and then frees each EP on its
 * DISCONNECTED, so a DISCONNECTED of an early connection overtaking the ESTABLISHED of a
 * late one makes it free an EP whose DISCONNECTED is still to come. Several rounds of K
 * connections on one PSP and one connection EVD; the client disconnects all of them as soon
 * as its last ESTABLISHED arrives. */
static volatile int spin_stop;

static void *spinner(void *arg)
{
    (void)arg;
    while (!spin_stop)
        ;
    return NULL;
}

/* The passive side sends the moment its ESTABLISHED arrives, before the active side has sent
 * anything (or even seen its own ESTABLISHED): on each of ROUNDS connections that message
 * arrives whole and both sides stay connected. iWARP's MPA lets only the active side speak
 * first; a message that reaches the active side before it has read the accept fails the
 * connection there, unless the provider holds the send back. */
void case_conn_passive_sends_first(void)
{
    enum { ROUNDS = 10 };
    struct node s, c;
    struct mr sm = {0}, cm = {0};
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) || !node_listen(&s, dx_port(0)) ||
        !mr_make(&s, s.pz, 4096, PRIV_ALL, &sm) || !mr_make(&c, c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    for (int round = 0; round < ROUNDS && harness_failures() == 0; round++) {
        DAT_EP_HANDLE se, ce;
        DAT_CR_HANDLE cr;
        DAT_DTO_COMPLETION_EVENT_DATA d;
        if (!ep_make(&s, NULL, &se) || !ep_make(&c, NULL, &ce))
            break;
        fill(sm.buf, 64, (unsigned)round + 1);
        memset(cm.buf, 0, 64);
        DAT_LMR_TRIPLET t = lt(&sm, 0, 64);
        if (post_recv1(ce, &cm, 0, 64, 100 + (uint64_t)round) && request(&s, &c, ce, NULL, 0, &cr) &&
            EXPECT_RC(dat_cr_accept(cr, se, 0, NULL), DAT_SUCCESS) &&
            wait_established(__LINE__, s.conn, se, "server") &&
            EXPECT_RC(dat_ep_post_send(se, 1, &t, ck((uint64_t)round), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
            wait_established(__LINE__, c.conn, ce, "client")) {
            if (WAIT_DTO(c.rcv, &d)) {
                EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == 64, "round %d: receive status %u, %u bytes",
                       round, (unsigned)d.status, (unsigned)d.transfered_length);
                EXPECT(memcmp(cm.buf, sm.buf, 64) == 0, "round %d: the passive side's message arrived changed", round);
            }
            if (WAIT_DTO(s.req, &d))
                EXPECT(d.status == DAT_DTO_SUCCESS, "round %d: send status %u", round, (unsigned)d.status);
            EXPECT_RC(dat_ep_disconnect(ce, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
            EXPECT_CONN_END(c.conn, WAIT_MS, "client");
            EXPECT_CONN_END(s.conn, WAIT_MS, "server");
        }
        EXPECT_RC(dat_ep_free(ce), DAT_SUCCESS);
        EXPECT_RC(dat_ep_free(se), DAT_SUCCESS);
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    node_close(&c);
    node_close(&s);
}

void case_conn_established_order(void)
{
    enum { K = 24, ROUNDS = 6, SPINNERS = 3 };
    struct node s, c;
    /* Threads that keep every core busy: the progress threads then run late and in any
     * order, which is when an ordering mistake shows (without them it rarely does). */
    pthread_t spin[SPINNERS];
    int spinning = 0;
    spin_stop = 0;
    for (; spinning < SPINNERS; spinning++)
        if (pthread_create(&spin[spinning], NULL, spinner, NULL) != 0)
            break;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (node_open(&s, PROVIDER, 16, 16) && node_open(&c, PROVIDER, 16, 16) && node_listen(&s, dx_port(0))) {
        for (int round = 0; round < ROUNDS && harness_failures() == 0; round++) {
            DAT_EP_HANDLE se[K], ce[K];
            int made = 0;
            DAT_EVENT ev;
            for (; made < K; made++)
                if (!ep_make(&s, NULL, &se[made]) || !ep_make(&c, NULL, &ce[made]))
                    break;
            for (int i = 0; i < made && harness_failures() == 0; i++) {
                DAT_CR_HANDLE cr;
                if (request(&s, &c, ce[i], NULL, 0, &cr))
                    EXPECT_RC(dat_cr_accept(cr, se[i], 0, NULL), DAT_SUCCESS);
            }
            for (int i = 0; i < made && harness_failures() == 0; i++) {
                DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, c.conn, WAIT_MS, &ev);
                EXPECT(num == DAT_CONNECTION_EVENT_ESTABLISHED, "client: event 0x%x, expected ESTABLISHED", (unsigned)num);
            }
            for (int i = 0; i < made && harness_failures() == 0; i++)
                EXPECT_RC(dat_ep_disconnect(ce[i], DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
            /* The server's queue: every ESTABLISHED, then every end. */
            int established = 0, ended = 0;
            for (int n = 0; n < 2 * made && harness_failures() == 0; n++) {
                DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, s.conn, WAIT_MS, &ev);
                if (num == DAT_CONNECTION_EVENT_ESTABLISHED) {
                    EXPECT(ended == 0, "round %d: server ESTABLISHED number %d came after %d connection ends", round,
                           established + 1, ended);
                    established++;
                } else {
                    EXPECT(num == DAT_CONNECTION_EVENT_DISCONNECTED || num == DAT_CONNECTION_EVENT_BROKEN,
                           "round %d: server event 0x%x", round, (unsigned)num);
                    ended++;
                }
            }
            for (int i = 0; i < made && harness_failures() == 0; i++)
                EXPECT_CONN_END(c.conn, WAIT_MS, "client");
            EXPECT_EMPTY(s.conn, "server connection EVD");
            EXPECT_EMPTY(c.conn, "client connection EVD");
            for (int i = 0; i < made; i++) {
                EXPECT_RC(dat_ep_free(se[i]), DAT_SUCCESS);
                EXPECT_RC(dat_ep_free(ce[i]), DAT_SUCCESS);
            }
        }
    }
    spin_stop = 1;
    for (int i = 0; i < spinning; i++)
        pthread_join(spin[i], NULL);
    node_close(&c);
    node_close(&s);
}

void case_conn_connect_connected(void)
{
    struct pair p;
    if (pair_up(&p, dx_port(0), NULL, NULL, 16)) {
        EXPECT_RC(dat_ep_connect(p.ce, dx_loopback(0), p.s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                 DAT_CONNECT_DEFAULT_FLAG),
                  RC_STATE_EP_CONNECTED);
        EXPECT_RC(dat_ep_connect(p.se, dx_loopback(0), p.s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                 DAT_CONNECT_DEFAULT_FLAG),
                  RC_STATE_EP_CONNECTED);
        DAT_EP_STATE st;
        if (EXPECT_RC(dat_ep_get_status(p.ce, &st, NULL, NULL), DAT_SUCCESS))
            EXPECT(st == DAT_EP_STATE_CONNECTED, "EP state %d after the refused connect", (int)st);
    }
    pair_down(&p);
}

void case_conn_ep_free_flushes(void)
{
    struct pair p;
    struct mr m = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (pair_up(&p, dx_port(0), NULL, NULL, 16) && mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &m)) {
        for (int i = 0; i < 5; i++)
            post_recv1(p.se, &m, (size_t)i * 256, 256, 1000 + (uint64_t)i);
        if (EXPECT_RC(dat_ep_free(p.se), DAT_SUCCESS)) {
            unsigned seen = 0;
            for (int i = 0; i < 5; i++) {
                if (!WAIT_DTO(p.s.rcv, &d))
                    break;
                EXPECT(d.status == DAT_DTO_ERR_FLUSHED, "receive %llu completed with status %u, expected FLUSHED (1)",
                       (unsigned long long)d.user_cookie.as_64, (unsigned)d.status);
                EXPECT(d.operation == DAT_DTO_RECEIVE, "flushed completion has operation %d", (int)d.operation);
                uint64_t k = d.user_cookie.as_64 - 1000;
                if (EXPECT(k < 5 && !(seen & (1u << k)), "unexpected or repeated cookie %llu",
                           (unsigned long long)d.user_cookie.as_64))
                    seen |= 1u << k;
            }
            EXPECT(seen == 0x1f, "flushed receives 0x%x, expected all five (0x1f)", seen);
            EXPECT_EMPTY(p.s.rcv, "receive EVD after the flush");
            EXPECT_CONN_END(p.c.conn, 1000, "the peer of the freed EP");
        }
    }
    mr_drop(&m);
    pair_down(&p);
}

/* ---- a peer killed in the middle of a transfer ------------------------------------ */

struct target {
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
};

static int read_byte(int fd, int ms, char want)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    char c = 0;
    if (poll(&pfd, 1, ms) != 1 || read(fd, &c, 1) != 1)
        return 0;
    return c == want;
}

/* The server: accepts, then RDMA-writes into the client's buffer until it is killed. It
 * posts no receives, so the client's sends wait at it. */
static int writer_child(int up, DAT_CONN_QUAL port)
{
    struct node s;
    struct mr m;
    DAT_EP_HANDLE ep;
    DAT_EVENT ev;
    DAT_CR_PARAM cp;
    struct target tg;
    if (!node_open(&s, PROVIDER, 64, 16) || !ep_make(&s, NULL, &ep) || !node_listen(&s, port) ||
        !mr_make(&s, s.pz, 65536, PRIV_ALL, &m))
        return 1;
    uint32_t listening = (uint32_t)s.port;
    if (write(up, "R", 1) != 1 || write(up, &listening, sizeof listening) != (ssize_t)sizeof listening)
        return 1;
    if (wait_ev(s.cr, 10000, &ev) != DAT_SUCCESS || ev.event_number != DAT_CONNECTION_REQUEST_EVENT)
        return 1;
    DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
    if (dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp) != DAT_SUCCESS || cp.private_data_size != (DAT_COUNT)sizeof tg)
        return 1;
    memcpy(&tg, cp.private_data, sizeof tg);
    if (dat_cr_accept(cr, ep, 0, NULL) != DAT_SUCCESS || wait_ev(s.conn, 5000, &ev) != DAT_SUCCESS ||
        ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED)
        return 1;
    int outstanding = 0, told = 0;
    uint64_t n = 0;
    double t0 = dx_now();
    while (dx_now() - t0 < 30.0) {
        while (outstanding < 4) {
            DAT_LMR_TRIPLET l = lt(&m, 0, 65536);
            DAT_RMR_TRIPLET r;
            r.rmr_context = tg.rkey;
            r.virtual_address = tg.addr + (n % (tg.len / 65536)) * 65536;
            r.segment_length = 65536;
            if (dat_ep_post_rdma_write(ep, 1, &l, ck(n++), &r, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
                return 1;
            outstanding++;
        }
        if (wait_ev(s.req, 5000, &ev) != DAT_SUCCESS)
            return 1;
        outstanding--;
        if (!told && write(up, "E", 1) == 1)
            told = 1;
    }
    return 0;
}

void case_conn_peer_killed(void)
{
    int up[2];
    struct node c;
    struct mr m = {0};
    DAT_EP_HANDLE ep;
    DAT_EVENT ev;
    memset(&c, 0, sizeof c);
    pid_t pid = dx_fork_peer(up, NULL);
    if (pid == 0)
        _exit(writer_child(up[1], dx_port(0)));
    if (pid < 0)
        return;
    uint32_t port = 0;
    if (!EXPECT(read_byte(up[0], 10000, 'R') && read(up[0], &port, sizeof port) == (ssize_t)sizeof port,
                "the peer process did not start listening"))
        goto out;
    if (!node_open(&c, PROVIDER, 64, 64) || !ep_make(&c, NULL, &ep) || !mr_make(&c, c.pz, 1 << 20, PRIV_ALL, &m))
        goto out;
    struct target tg = {(uint64_t)(uintptr_t)m.buf, m.rkey, 1u << 20};
    if (!EXPECT_RC(dat_ep_connect(ep, dx_loopback(0), port, 5000000, sizeof tg, &tg, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS))
        goto out;
    DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, c.conn, WAIT_MS, &ev);
    if (!EXPECT(num == DAT_CONNECTION_EVENT_ESTABLISHED, "event 0x%x, expected ESTABLISHED", (unsigned)num))
        goto out;
    enum { NRECV = 8 };
    /* The peer posts no receive: on IB and RoCE the sends wait for one (receiver not ready)
     * until the kill flushes them; iWARP has no such wait (the peer would end the connection
     * at the first send), so there only the receives are checked. */
    const int NSEND = dx_iwarp(c.ia) ? 0 : 8;
    for (int i = 0; i < NRECV; i++)
        post_recv1(ep, &m, (size_t)i * 1024, 1024, 1 + (uint64_t)i);
    for (int i = 0; i < NSEND; i++) {
        DAT_LMR_TRIPLET t = lt(&m, 65536 + (size_t)i * 4096, 4096);
        EXPECT_RC(dat_ep_post_send(ep, 1, &t, ck(101 + (uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    }
    if (!EXPECT(read_byte(up[0], 10000, 'E'), "the peer's RDMA writes did not start"))
        goto out;
    dx_sleep_ms(50);
    kill(pid, SIGKILL);
    double t0 = dx_now();
    int ended = EXPECT_CONN_END(c.conn, 1000, "the survivor");
    double took = dx_now() - t0;
    EXPECT(!ended || took <= 1.0, "the connection event came %.3f s after the kill", took);
    harness_note("connection end seen %.3f s after SIGKILL", took);
    /* On iWARP a send completes once the local adapter has handed it to TCP (there is no
     * receiver-not-ready wait), so sends the peer never received may have completed before the
     * kill: those count as delivered. */
    int iwarp = dx_iwarp(c.ia), sent = 0;
    int flushed_recv = 0, flushed_send = 0, other = 0;
    while (wait_ev(c.rcv, 500, &ev) == DAT_SUCCESS) {
        DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        if (ev.event_number == DAT_DTO_COMPLETION_EVENT && d->status == DAT_DTO_ERR_FLUSHED)
            flushed_recv++;
        else
            other++;
    }
    while (wait_ev(c.req, 500, &ev) == DAT_SUCCESS) {
        DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        if (ev.event_number == DAT_DTO_COMPLETION_EVENT && d->status == DAT_DTO_ERR_FLUSHED)
            flushed_send++;
        else if (iwarp && ev.event_number == DAT_DTO_COMPLETION_EVENT && d->status == DAT_DTO_SUCCESS)
            sent++;
        else
            other++;
    }
    if (iwarp)
        harness_note("iWARP: %d sends completed before the kill, %d flushed", sent, flushed_send);
    EXPECT(flushed_recv == NRECV, "%d receives completed FLUSHED, expected %d", flushed_recv, NRECV);
    EXPECT(flushed_send + sent == NSEND, "%d sends completed FLUSHED, expected %d", flushed_send, NSEND - sent);
    EXPECT(other == 0, "%d completions were not FLUSHED", other);
out:
    if (pid > 0) {
        int status;
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    close(up[0]);
    node_close(&c);
    mr_drop(&m);
}

/* Sends outstanding when a connection ends are each reported once, done or flushed, also when
 * the consumer resets the EP before it collects them: on verbs their flushed completions are
 * only in the QP's CQ, which the reset takes away. The end is polled for (a wait would have
 * the device collect the completions first). */
void case_conn_reset_reports_sends(void)
{
    enum { N = 8 };
    struct pair p;
    struct mr cm = {0}, sm = {0};
    DAT_EVENT ev;
    int seen[N] = {0}, ended = 0;
    if (!pair_up_mrs(&p, dx_port(0), &cm, &sm))
        goto out;
    DAT_RMR_TRIPLET r = rt(&sm, 0, 64);
    for (int k = 0; k < N; k++) {
        DAT_LMR_TRIPLET t = lt(&cm, 0, 64);
        if (!EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &t, ck(100 + k), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
    }
    if (!EXPECT_RC(dat_ep_disconnect(p.ce, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS))
        goto out;
    for (double until = dx_now() + 5; !ended && dx_now() < until;) {
        if (dat_evd_dequeue(p.c.conn, &ev) == DAT_SUCCESS)
            ended = ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED || ev.event_number == DAT_CONNECTION_EVENT_BROKEN;
        else
            dx_sleep_ms(1);
    }
    if (!EXPECT(ended, "no end of the connection within 5 s") || !EXPECT_RC(dat_ep_reset(p.ce), DAT_SUCCESS))
        goto out;
    while (wait_ev(p.c.req, 500, &ev) == DAT_SUCCESS) {
        DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
        uint64_t c = d->user_cookie.as_64;
        if (EXPECT(ev.event_number == DAT_DTO_COMPLETION_EVENT && c >= 100 && c < 100 + N,
                   "event 0x%x cookie %llu on the request EVD", (unsigned)ev.event_number, (unsigned long long)c))
            seen[c - 100]++;
    }
    for (int k = 0; k < N; k++)
        EXPECT(seen[k] == 1, "write %d reported %d times, expected once", k, seen[k]);
    DAT_EP_STATE st;
    DAT_BOOLEAN ri, qi;
    if (EXPECT_RC(dat_ep_get_status(p.ce, &st, &ri, &qi), DAT_SUCCESS))
        EXPECT(qi, "request_idle false after the reset");
out:
    mr_drop(&cm);
    mr_drop(&sm);
    pair_down(&p);
}
