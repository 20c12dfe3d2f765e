/* Connection qualifiers on dat2-soft: each IA listens on a TCP port of its own (the port of
 * its dat_ia_query address), where a qualifier is any 64-bit value; a peer that names the
 * host alone (port 0, as rdma_cm programs do) reaches a qualifier of 1..65535 as that port,
 * and cannot name a larger one. Soft device only: the verbs device's qualifiers are rdma_cm's
 * 16-bit ports. */
#include "dx.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dx_cases.h"

#define CONN_QUAL_IN_USE 0x80020000u

/* The IA's address as dat_ia_query reports it (IPv4 on dat2-soft). */
static int ia_address(struct node *n, struct sockaddr_in *out)
{
    DAT_IA_ATTR a;
    memset(&a, 0, sizeof a);
    if (!EXPECT_RC(dat_ia_query(n->ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &a, 0, NULL), DAT_SUCCESS) ||
        !EXPECT(a.ia_address_ptr && a.ia_address_ptr->sa_family == AF_INET, "the IA's address is not IPv4"))
        return 0;
    memcpy(out, a.ia_address_ptr, sizeof *out);
    return EXPECT(out->sin_port != 0, "dat_ia_query reports port 0");
}

static int soft_only(void)
{
    if (!dx_on_soft_device()) {
        harness_skip("qualifiers beyond 16 bits are the soft device's (IA %s)", dx_ia_name());
        return 0;
    }
    return 1;
}

/* Connects `ce` to `to`, qualifier `q`: the request must arrive at `psp` naming `q`, and is
 * accepted on `se`. */
static int connect_to(struct node *s, DAT_PSP_HANDLE psp, DAT_EP_HANDLE se, struct node *c, DAT_EP_HANDLE ce,
                      struct sockaddr_in *to, DAT_CONN_QUAL q)
{
    DAT_EVENT ev;
    if (!EXPECT_RC(dat_ep_connect(ce, (DAT_IA_ADDRESS_PTR)to, q, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS) ||
        !EXPECT_RC(wait_ev(s->cr, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "qualifier %#llx: server got event 0x%x",
                (unsigned long long)q, (unsigned)ev.event_number))
        return 0;
    DAT_CR_ARRIVAL_EVENT_DATA *a = &ev.event_data.cr_arrival_event_data;
    if (!EXPECT(a->sp_handle.psp_handle == psp && a->conn_qual == q,
                "the request for %#llx arrived at PSP %p naming %#llx, expected PSP %p",
                (unsigned long long)q, (void *)a->sp_handle.psp_handle, (unsigned long long)a->conn_qual, (void *)psp))
        return 0;
    if (!EXPECT_RC(dat_cr_accept(a->cr_handle, se, 0, NULL), DAT_SUCCESS))
        return 0;
    return wait_established(__LINE__, s->conn, se, "server") && wait_established(__LINE__, c->conn, ce, "client");
}

/* A connect to `to`, qualifier `q`, that nobody serves: NON_PEER_REJECTED, and the server's
 * consumer hears nothing. */
static void refused(struct node *s, struct node *c, DAT_EP_HANDLE ce, struct sockaddr_in *to, DAT_CONN_QUAL q)
{
    DAT_EVENT ev;
    if (!EXPECT_RC(dat_ep_connect(ce, (DAT_IA_ADDRESS_PTR)to, q, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS))
        return;
    DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, c->conn, WAIT_MS, &ev);
    EXPECT(num == DAT_CONNECTION_EVENT_NON_PEER_REJECTED, "qualifier %#llx: connection event 0x%x, expected NON_PEER_REJECTED",
           (unsigned long long)q, (unsigned)num);
    EXPECT(dat_evd_dequeue(s->cr, &ev) == DAT_QUEUE_EMPTY, "the server heard of a request for %#llx (event 0x%x)",
           (unsigned long long)q, (unsigned)ev.event_number);
}

/* Two PSPs of one IA whose qualifiers differ only above bit 15 both exist, and each accepts
 * its own connects through the IA's address (before, both wanted the TCP port of their low 16
 * bits: the second was DAT_CONN_QUAL_IN_USE). A third PSP on either qualifier is
 * DAT_CONN_QUAL_IN_USE, and the qualifier is free again once its PSP is. */
void case_qual_high_bits_two_psps(void)
{
    struct node s, c;
    DAT_EP_HANDLE se[2], ce[2];
    DAT_PSP_HANDLE psp[2] = {DAT_HANDLE_NULL, DAT_HANDLE_NULL}, again = DAT_HANDLE_NULL;
    struct sockaddr_in to;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!soft_only())
        return;
    DAT_CONN_QUAL q[2] = {(1ull << 32) | dx_port(0), (2ull << 32) | dx_port(0)};
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16))
        goto out;
    for (int i = 0; i < 2; i++)
        if (!EXPECT_RC(dat_psp_create(s.ia, q[i], s.cr, DAT_PSP_CONSUMER_FLAG, &psp[i]), DAT_SUCCESS) ||
            !ep_make(&s, NULL, &se[i]) || !ep_make(&c, NULL, &ce[i]))
            goto out;
    EXPECT_RC(dat_psp_create(s.ia, q[1], s.cr, DAT_PSP_CONSUMER_FLAG, &again), CONN_QUAL_IN_USE);
    if (!ia_address(&s, &to))
        goto out;
    /* Each to its own, the second qualifier first. */
    if (!connect_to(&s, psp[1], se[0], &c, ce[0], &to, q[1]) || !connect_to(&s, psp[0], se[1], &c, ce[1], &to, q[0]))
        goto out;
    if (EXPECT_RC(dat_psp_free(psp[0]), DAT_SUCCESS)) {
        psp[0] = DAT_HANDLE_NULL;
        EXPECT_RC(dat_psp_create(s.ia, q[0], s.cr, DAT_PSP_CONSUMER_FLAG, &psp[0]), DAT_SUCCESS);
    }
out:
    node_close(&c);
    node_close(&s);
}

/* Qualifiers above 16 bits (one whose low 16 bits are 0, one of all 64 bits) and one of 16
 * bits each accept a connect through the IA's address (before, the first was refused as
 * DAT_INVALID_PARAMETER, and the others went to the port of their low 16 bits). */
void case_qual_above_16_bits(void)
{
    struct node s, c;
    struct sockaddr_in to;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!soft_only())
        return;
    const DAT_CONN_QUAL q[] = {0xfeed000000000000ull, 0x123456789abcdef0ull, dx_port(1)};
    DAT_PSP_HANDLE psp[3];
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16))
        goto out;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        if (!EXPECT_RC(dat_psp_create(s.ia, q[i], s.cr, DAT_PSP_CONSUMER_FLAG, &psp[i]), DAT_SUCCESS))
            goto out;
    if (!ia_address(&s, &to))
        goto out;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        DAT_EP_HANDLE se, ce;
        if (!ep_make(&s, NULL, &se) || !ep_make(&c, NULL, &ce) || !connect_to(&s, psp[i], se, &c, ce, &to, q[i]))
            break;
    }
out:
    node_close(&c);
    node_close(&s);
}

/* A connect through the IA's address to a qualifier no PSP has, above 16 bits (low bits 0,
 * and those of a PSP that exists) and of 16 bits: NON_PEER_REJECTED each, unseen by the
 * server's consumer (before, the first was DAT_INVALID_PARAMETER). */
void case_qual_no_service_point(void)
{
    struct node s, c;
    struct sockaddr_in to;
    DAT_PSP_HANDLE psp;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!soft_only())
        return;
    const DAT_CONN_QUAL have = (3ull << 32) | dx_port(2);
    const DAT_CONN_QUAL none[] = {7ull << 32, (4ull << 32) | dx_port(2), dx_port(3)};
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) || !ia_address(&s, &to) ||
        !EXPECT_RC(dat_psp_create(s.ia, have, s.cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS))
        goto out;
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        DAT_EP_HANDLE ce;
        if (!ep_make(&c, NULL, &ce))
            break;
        refused(&s, &c, ce, &to, none[i]);
    }
out:
    node_close(&c);
    node_close(&s);
}

/* A peer that names the host alone (port 0) reaches a qualifier of 1..65535 as that port, and
 * cannot name a larger one: its connect fails at once with DAT_INVALID_PARAMETER (argument 3),
 * the EP still unconnected, and nothing is sent (before, the qualifier was folded to its low
 * 16 bits, and the request went to whatever listened on that port: here, another PSP). */
void case_qual_host_only(void)
{
    struct node s, c;
    DAT_EP_HANDLE se, ce;
    DAT_EP_PARAM param;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!soft_only())
        return;
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) || !node_listen(&s, dx_port(4)) ||
        !ep_make(&s, NULL, &se) || !ep_make(&c, NULL, &ce))
        goto out;
    const DAT_CONN_QUAL bad[] = {(1ull << 32) | s.port, 1ull << 32, 0x10000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_RC(dat_ep_connect(ce, dx_loopback(0), bad[i], 5000000, 0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
                  DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
    if (EXPECT_RC(dat_ep_query(ce, DAT_EP_FIELD_EP_STATE, &param), DAT_SUCCESS))
        EXPECT(param.ep_state == DAT_EP_STATE_UNCONNECTED, "EP state %d after the refused connects", (int)param.ep_state);
    DAT_EVENT ev;
    EXPECT(dat_evd_dequeue(s.cr, &ev) == DAT_QUEUE_EMPTY, "the server heard of a request (event 0x%x)", (unsigned)ev.event_number);
    /* The same EP, host alone, to the PSP's qualifier: its port. */
    connect_eps(&s, se, &c, ce, 0);
out:
    node_close(&c);
    node_close(&s);
}

/* dat_ia_query's address has a port, where a raw TCP connect finds a dat2-soft listener (its
 * answer to our greeting); two IAs of one process have two (before, the port was 0). */
void case_qual_ia_port_greets(void)
{
    struct node a, b;
    struct sockaddr_in at, bt;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (!soft_only())
        return;
    if (!node_open(&a, PROVIDER, 16, 16) || !node_open(&b, PROVIDER, 16, 16) || !ia_address(&a, &at) ||
        !ia_address(&b, &bt))
        goto out;
    EXPECT(at.sin_port != bt.sin_port, "two IAs report one port, %u", (unsigned)ntohs(at.sin_port));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (!EXPECT(fd >= 0, "socket"))
        goto out;
    unsigned char ask[48], got[48];
    memset(ask, 0, sizeof ask);
    memcpy(ask, "DAT2SOFT", 8);
    ask[8] = 8;  /* wire version 8, little endian */
    ask[12] = 1; /* role: ask */
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t n = 0;
    if (EXPECT(connect(fd, (struct sockaddr *)&at, sizeof at) == 0, "no listener at the IA's port %u",
               (unsigned)ntohs(at.sin_port)) &&
        EXPECT(write(fd, ask, sizeof ask) == (ssize_t)sizeof ask, "greeting not sent")) {
        while (n < sizeof got) {
            ssize_t r = read(fd, got + n, sizeof got - n);
            if (r <= 0)
                break;
            n += (size_t)r;
        }
        EXPECT(n == sizeof got && memcmp(got, "DAT2SOFT", 8) == 0 && got[12] == 2,
               "the IA's port answered %zu bytes, not a dat2-soft greeting", n);
    }
    close(fd);
out:
    node_close(&b);
    node_close(&a);
}

/* The lowest descriptor number free now: the process's descriptors in use, near enough. */
static int lowest_free_fd(void)
{
    int fd = dup(0);
    if (fd >= 0)
        close(fd);
    return fd;
}

/* A dat_ia_open that finds the process out of descriptors (its first: the soft device's
 * progress engine and the IA's port both need one) fails with DAT_INSUFFICIENT_RESOURCES;
 * once descriptors are free again the next open succeeds, listens and connects. Before, the
 * engine that could not start was remembered as none for the life of the process: every
 * later dat_ia_open of the soft device failed. */
void case_qual_ia_open_out_of_descriptors(void)
{
    struct node a, b;
    struct rlimit was, low;
    struct sockaddr_in at;
    DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;
    DAT_EP_HANDLE se, ce;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (!soft_only() || !EXPECT(getrlimit(RLIMIT_NOFILE, &was) == 0, "getrlimit"))
        return;
    /* No descriptor above those open now. */
    int top = lowest_free_fd();
    low = was;
    low.rlim_cur = (rlim_t)top;
    if (!EXPECT(top > 0 && setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit"))
        return;
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_RETURN rc = dat_ia_open((char *)PROVIDER, 16, &async, &ia);
    setrlimit(RLIMIT_NOFILE, &was);
    if (rc == DAT_SUCCESS)
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    if (!EXPECT(DAT_GET_TYPE(rc) == DAT_INSUFFICIENT_RESOURCES, "dat_ia_open without descriptors: 0x%x", (unsigned)rc))
        return;
    /* Descriptors again: an IA opens, and two connect. */
    if (!EXPECT(node_open(&a, PROVIDER, 16, 16), "dat_ia_open once descriptors are free again fails") ||
        !node_open(&b, PROVIDER, 16, 16))
        goto out;
    if (!ia_address(&a, &at) ||
        !EXPECT_RC(dat_psp_create(a.ia, (7ull << 40) | dx_port(0), a.cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS) ||
        !ep_make(&a, NULL, &se) || !ep_make(&b, NULL, &ce))
        goto out;
    connect_to(&a, psp, se, &b, ce, &at, (7ull << 40) | dx_port(0));
out:
    node_close(&b);
    node_close(&a);
}

/* Two IAs of one process each have a PSP on the same 64-bit qualifier (each IA's table is
 * its own): a connect to either IA's address reaches that IA's PSP, never the other's; once
 * one PSP is freed, a connect to its IA is refused while the other IA's still accepts. */
void case_qual_two_ias_one_qualifier(void)
{
    struct node a, b, c;
    struct sockaddr_in at, bt;
    DAT_PSP_HANDLE pa = DAT_HANDLE_NULL, pb = DAT_HANDLE_NULL;
    DAT_EP_HANDLE sa, sb, sb2, c1, c2, c3, c4;
    DAT_EVENT ev;
    const DAT_CONN_QUAL q = (0x5eedull << 32) | dx_port(0);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    if (!soft_only())
        return;
    if (!node_open(&a, PROVIDER, 16, 16) || !node_open(&b, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) ||
        !ia_address(&a, &at) || !ia_address(&b, &bt) ||
        !EXPECT_RC(dat_psp_create(a.ia, q, a.cr, DAT_PSP_CONSUMER_FLAG, &pa), DAT_SUCCESS) ||
        !EXPECT_RC(dat_psp_create(b.ia, q, b.cr, DAT_PSP_CONSUMER_FLAG, &pb), DAT_SUCCESS) ||
        !ep_make(&a, NULL, &sa) || !ep_make(&b, NULL, &sb) || !ep_make(&b, NULL, &sb2) || !ep_make(&c, NULL, &c1) ||
        !ep_make(&c, NULL, &c2) || !ep_make(&c, NULL, &c3) || !ep_make(&c, NULL, &c4))
        goto out;
    /* B first, then A: each request at its own IA's PSP, and the other IA hears nothing. */
    if (!connect_to(&b, pb, sb, &c, c1, &bt, q) ||
        !EXPECT(dat_evd_dequeue(a.cr, &ev) == DAT_QUEUE_EMPTY, "IA A heard of a connect to IA B") ||
        !connect_to(&a, pa, sa, &c, c2, &at, q) ||
        !EXPECT(dat_evd_dequeue(b.cr, &ev) == DAT_QUEUE_EMPTY, "IA B heard of a connect to IA A"))
        goto out;
    if (!EXPECT_RC(dat_psp_free(pa), DAT_SUCCESS))
        goto out;
    pa = DAT_HANDLE_NULL;
    refused(&a, &c, c3, &at, q);
    EXPECT(dat_evd_dequeue(b.cr, &ev) == DAT_QUEUE_EMPTY, "IA B heard of a connect to IA A's freed PSP");
    connect_to(&b, pb, sb2, &c, c4, &bt, q);
out:
    if (pa)
        dat_psp_free(pa);
    if (pb)
        dat_psp_free(pb);
    node_close(&c);
    node_close(&b);
    node_close(&a);
}
