/* The IB counters extension (dat_ib_query_counters, dat_ib_print_counters,
 * dat_ib_start_counter, dat_ib_stop_counter) on the IA, EP and EVD sets, checked against
 * known traffic, and the DAT2_STATS summary at dat_ia_close. */
#include "dx.h"

#include <stdlib.h>
#include <unistd.h>

#include "dx_cases.h"

/* One counter of `h` (IA, EP or EVD), or UINT64_MAX when the query fails. */
static uint64_t counter_at(int line, DAT_HANDLE h, int counter)
{
    DAT_UINT64 v = 0;
    DAT_RETURN rc = dat_ib_query_counters(h, counter, &v, 0);
    if (rc != DAT_SUCCESS) {
        harness_fail(line, "dat_ib_query_counters(%d) 0x%08x", counter, (unsigned)rc);
        return UINT64_MAX;
    }
    return v;
}
#define COUNTER(h, c) counter_at(__LINE__, (DAT_HANDLE)(h), (int)(c))
#define EXPECT_COUNT(h, c, want)                                                                                       \
    do {                                                                                                               \
        uint64_t got_ = COUNTER(h, c);                                                                                 \
        EXPECT(got_ == (uint64_t)(want), "%s: %llu, expected %llu", #c, (unsigned long long)got_,                       \
               (unsigned long long)(want));                                                                            \
    } while (0)

/* The sizes of the sends, and of the RDMA writes. */
static const unsigned send_len[] = {1, 100, 1000, 4000, 65536};
#define NSENDS (int)(sizeof send_len / sizeof send_len[0])
#define NWRITES 3
#define WRITE_LEN 3000u
#define RECV_LEN 65536u

/* Dequeues one event from `evd` by polling, counting the empty dequeues in *empty. */
static int poll_one(DAT_EVD_HANDLE evd, DAT_EVENT *ev, uint64_t *empty)
{
    double end = dx_now() + WAIT_MS / 1000.0;
    for (;;) {
        DAT_RETURN rc = dat_evd_dequeue(evd, ev);
        if (rc == DAT_SUCCESS)
            return 1;
        if (rc != RC_QUEUE_EMPTY || dx_now() > end)
            return 0;
        (*empty)++;
    }
}

/* The value of the line "<set> <name> <value>" of a DAT2_STATS summary, from `text` on;
 * UINT64_MAX when there is none. */
static uint64_t stat_of(const char *text, const char *set, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\n%s %s ", set, name);
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : UINT64_MAX;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[65536];
    size_t n = fread(buf + 1, 1, sizeof buf - 2, f);
    fclose(f);
    buf[0] = '\n'; /* so that the first line matches "\n<set> ..." too */
    buf[n + 1] = 0;
    return buf;
}

/* Sends of known sizes and RDMA writes between two IAs of this process: the EP, EVD and IA
 * counters on both sides are exactly what the traffic makes them; a query of a whole set
 * agrees with the single ones; a reset zeroes; the IA advertises DAT_COUNTERS; and the
 * DAT2_STATS summary at dat_ia_close carries the totals, dat2's bytes by path among them. */
void case_counters_traffic(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_EVENT ev;
    uint64_t sent = 0, empty = 0;
    char stats[512];
    snprintf(stats, sizeof stats, "%s/counters-%d.stats", getenv("DAT2_OUT") ? getenv("DAT2_OUT") : "/tmp", (int)getpid());
    unlink(stats);
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, RECV_LEN * NSENDS + 65536, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 65536, PRIV_ALL, &cm))
        goto out;

    DAT_PROVIDER_ATTR pa;
    int advertised = 0;
    if (EXPECT_RC(dat_ia_query(p.c.ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pa), DAT_SUCCESS))
        for (int i = 0; i < pa.num_provider_specific_attr; i++)
            if (!strcmp(pa.provider_specific_attr[i].name, DAT_IB_ATTR_COUNTERS))
                advertised = !strcmp(pa.provider_specific_attr[i].value, "TRUE");
    EXPECT(advertised, "no provider attribute %s=TRUE", DAT_IB_ATTR_COUNTERS);

    /* Counting starts here: what the connection set-up counted on the EVDs goes. */
    DAT_UINT64 all_evd[DCNT_EVD_ALL_COUNTERS];
    EXPECT_RC(dat_ib_query_counters(p.c.req, DCNT_EVD_ALL_COUNTERS, all_evd, 1), DAT_SUCCESS);
    EXPECT_COUNT(p.c.req, DCNT_EVD_DEQUEUE, 0);

    for (int i = 0; i < NSENDS; i++)
        if (!post_recv1(p.se, &sm, (size_t)i * RECV_LEN, RECV_LEN, 100 + (uint64_t)i))
            goto out;
    fill(cm.buf, 65536, 5);
    for (int i = 0; i < NSENDS; i++) {
        DAT_LMR_TRIPLET l = lt(&cm, 0, send_len[i]);
        if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &l, ck((uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            goto out;
        sent += send_len[i];
    }
    for (int i = 0; i < NWRITES; i++) {
        DAT_LMR_TRIPLET l = lt(&cm, 0, WRITE_LEN);
        DAT_RMR_TRIPLET r = rt(&sm, RECV_LEN * NSENDS, WRITE_LEN);
        if (!EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(50 + (uint64_t)i), &r, DAT_COMPLETION_DEFAULT_FLAG),
                       DAT_SUCCESS))
            goto out;
    }
    for (int i = 0; i < NSENDS + NWRITES; i++)
        if (!EXPECT(poll_one(p.c.req, &ev, &empty), "request completion %d did not come", i))
            goto out;
    for (int i = 0; i < NSENDS; i++) {
        DAT_DTO_COMPLETION_EVENT_DATA d;
        if (!WAIT_DTO(p.s.rcv, &d))
            goto out;
    }

    /* The client's EP: what it posted. */
    EXPECT_COUNT(p.ce, DCNT_EP_POST_SEND, NSENDS);
    EXPECT_COUNT(p.ce, DCNT_EP_POST_SEND_DATA, sent);
    EXPECT_COUNT(p.ce, DCNT_EP_POST_WRITE, NWRITES);
    EXPECT_COUNT(p.ce, DCNT_EP_POST_WRITE_DATA, NWRITES * WRITE_LEN);
    EXPECT_COUNT(p.ce, DCNT_EP_POST_RECV, 0);
    EXPECT_COUNT(p.ce, DCNT_EP_RECV, 0);
    EXPECT_COUNT(p.ce, DCNT_EP_CONNECT, 1);
    /* The server's: what it received. */
    EXPECT_COUNT(p.se, DCNT_EP_POST_RECV, NSENDS);
    EXPECT_COUNT(p.se, DCNT_EP_POST_RECV_DATA, (uint64_t)NSENDS * RECV_LEN);
    EXPECT_COUNT(p.se, DCNT_EP_RECV, NSENDS);
    EXPECT_COUNT(p.se, DCNT_EP_RECV_DATA, sent);
    EXPECT_COUNT(p.se, DCNT_EP_POST_SEND, 0);
    EXPECT_COUNT(p.se, DCNT_EP_CONNECT, 0);

    /* The client's request EVD: every completion was dequeued; on the soft device every
     * empty dequeue is counted too. The server's receive EVD: taken by waits. */
    EXPECT_COUNT(p.c.req, DCNT_EVD_DEQUEUE_FOUND, NSENDS + NWRITES);
    EXPECT_COUNT(p.c.req, DCNT_EVD_DTO_CALLBACK, NSENDS + NWRITES);
    EXPECT_COUNT(p.c.req, DCNT_EVD_WAIT, 0);
    if (dx_on_soft_device()) {
        EXPECT_COUNT(p.c.req, DCNT_EVD_DEQUEUE_NOT_FOUND, empty);
        EXPECT_COUNT(p.c.req, DCNT_EVD_DEQUEUE, NSENDS + NWRITES + empty);
    }
    EXPECT_COUNT(p.s.rcv, DCNT_EVD_WAIT, NSENDS);
    EXPECT_COUNT(p.s.rcv, DCNT_EVD_DTO_CALLBACK, NSENDS);
    EXPECT_COUNT(p.s.rcv, DCNT_EVD_DEQUEUE_FOUND, 0);
    EXPECT_COUNT(p.c.conn, DCNT_EVD_CONN_CALLBACK, 1);

    /* The IAs: objects, and the connection from both ends. */
    EXPECT_COUNT(p.c.ia, DCNT_IA_PZ_CREATE, 1);
    EXPECT_COUNT(p.c.ia, DCNT_IA_EVD_CREATE, 5); /* the async EVD and node_open's four */
    EXPECT_COUNT(p.c.ia, DCNT_IA_EP_CREATE, 1);
    EXPECT_COUNT(p.c.ia, DCNT_IA_LMR_CREATE, 1);
    EXPECT_COUNT(p.c.ia, DCNT_IA_LMR_FREE, 0);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_REQ_TX, 1);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_ACTIVE_EST, 1);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_PASSIVE_EST, 0);
    EXPECT_COUNT(p.s.ia, DCNT_IA_PSP_CREATE, 1);
    EXPECT_COUNT(p.s.ia, DCNT_IA_SP_CR, 1);
    EXPECT_COUNT(p.s.ia, DCNT_IA_SP_CR_ACCEPTED, 1);
    EXPECT_COUNT(p.s.ia, DCNT_IA_CM_PASSIVE_EST, 1);
    EXPECT_COUNT(p.s.ia, DCNT_IA_CM_REQ_TX, 0);
    EXPECT_COUNT(p.s.ia, DCNT_IA_LNK_ERR_RCV, 0);

    /* A whole set agrees with its single counters. */
    DAT_UINT64 all_ep[DCNT_EP_ALL_COUNTERS + 1];
    all_ep[DCNT_EP_ALL_COUNTERS] = 0x5a5a;
    if (EXPECT_RC(dat_ib_query_counters(p.ce, DCNT_EP_ALL_COUNTERS, all_ep, 0), DAT_SUCCESS)) {
        EXPECT(all_ep[DCNT_EP_POST_SEND_DATA] == sent, "the whole set's POST_SEND_DATA %llu",
               (unsigned long long)all_ep[DCNT_EP_POST_SEND_DATA]);
        EXPECT(all_ep[DCNT_EP_POST_WRITE] == NWRITES, "the whole set's POST_WRITE %llu",
               (unsigned long long)all_ep[DCNT_EP_POST_WRITE]);
        EXPECT(all_ep[DCNT_EP_ALL_COUNTERS] == 0x5a5a, "the query wrote past the set");
    }
    DAT_UINT64 all_ia[DCNT_IA_ALL_COUNTERS];
    if (EXPECT_RC(dat_ib_query_counters(p.s.ia, DCNT_IA_ALL_COUNTERS, all_ia, 0), DAT_SUCCESS))
        EXPECT(all_ia[DCNT_IA_SP_CR_ACCEPTED] == 1, "the whole IA set's SP_CR_ACCEPTED %llu",
               (unsigned long long)all_ia[DCNT_IA_SP_CR_ACCEPTED]);

    /* A reset of one counter zeroes it alone; of the set, all. */
    DAT_UINT64 v = 0;
    EXPECT_RC(dat_ib_query_counters(p.ce, DCNT_EP_POST_SEND, &v, 1), DAT_SUCCESS);
    EXPECT(v == NSENDS, "the resetting query read %llu", (unsigned long long)v);
    EXPECT_COUNT(p.ce, DCNT_EP_POST_SEND, 0);
    EXPECT_COUNT(p.ce, DCNT_EP_POST_SEND_DATA, sent);
    EXPECT_RC(dat_ib_query_counters(p.c.ia, DCNT_IA_ALL_COUNTERS, all_ia, 1), DAT_SUCCESS);
    EXPECT_COUNT(p.c.ia, DCNT_IA_EP_CREATE, 0);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_ACTIVE_EST, 0);

    /* Wrong arguments. */
    EXPECT_RC(dat_ib_query_counters(p.ce, DCNT_EP_ALL_COUNTERS + 1, &v, 0), RC_ARG3);
    EXPECT_RC(dat_ib_query_counters(p.ce, -1, &v, 0), RC_ARG3);
    EXPECT_RC(dat_ib_query_counters(p.ce, DCNT_EP_POST_SEND, NULL, 0), RC_ARG4);
    EXPECT_RC(dat_ib_query_counters(p.c.pz, 0, &v, 0), DAT_INVALID_HANDLE | DAT_CLASS_ERROR | DAT_INVALID_HANDLE1);
    EXPECT_RC(dat_ib_print_counters(p.ce, DCNT_EP_ALL_COUNTERS + 1, 0), RC_ARG3);

    /* The print op and the summary go where DAT2_STATS says. */
    if (!EXPECT(setenv("DAT2_STATS", stats, 1) == 0, "setenv"))
        goto out;
    EXPECT_RC(dat_ib_print_counters(p.ce, DCNT_EP_POST_WRITE, 0), DAT_SUCCESS);
    char *text = slurp(stats);
    if (EXPECT(text != NULL, "the print op wrote no %s", stats))
        EXPECT(strstr(text, "\nDCNT_EP_POST_WRITE 3\n") != NULL, "the print op wrote: %s", text + 1);
    unlink(stats);
    mr_drop(&cm);
    node_close(&p.c);
    text = slurp(stats);
    if (EXPECT(text != NULL, "no DAT2_STATS summary in %s", stats)) {
        EXPECT(strstr(text, "\n# dat2 stats: IA ") != NULL, "the summary has no heading: %s", text + 1);
        /* The EP's counters joined the IA's totals when the close freed it. */
        EXPECT(stat_of(text, "ep", "DCNT_EP_POST_WRITE_DATA") == NWRITES * WRITE_LEN, "ep POST_WRITE_DATA %llu",
               (unsigned long long)stat_of(text, "ep", "DCNT_EP_POST_WRITE_DATA"));
        EXPECT(stat_of(text, "ep", "DCNT_EP_POST_SEND_DATA") == sent, "ep POST_SEND_DATA %llu",
               (unsigned long long)stat_of(text, "ep", "DCNT_EP_POST_SEND_DATA"));
        EXPECT(stat_of(text, "ia", "DCNT_IA_EP_FREE") == 1, "ia EP_FREE %llu",
               (unsigned long long)stat_of(text, "ia", "DCNT_IA_EP_FREE"));
        EXPECT(stat_of(text, "evd", "DCNT_EVD_DEQUEUE_FOUND") == NSENDS + NWRITES, "evd DEQUEUE_FOUND %llu",
               (unsigned long long)stat_of(text, "evd", "DCNT_EVD_DEQUEUE_FOUND"));
        uint64_t tcp = stat_of(text, "dat2", "DAT2_BYTES_TCP"), cma = stat_of(text, "dat2", "DAT2_BYTES_CMA"),
                 shm = stat_of(text, "dat2", "DAT2_BYTES_SHM");
        EXPECT(stat_of(text, "dat2", "DAT2_CONN_BROKEN") == 0, "connections broken");
        if (dx_on_soft_device())
            EXPECT(tcp + cma + shm == sent + NWRITES * WRITE_LEN, "bytes by path: tcp %llu cma %llu shm %llu, expected %llu in all",
                   (unsigned long long)tcp, (unsigned long long)cma, (unsigned long long)shm,
                   (unsigned long long)(sent + NWRITES * WRITE_LEN));
        /* The _tcp rerun keeps every byte on the socket; otherwise (both IAs in one process
         * reach each other's memory) the writes at least go by cross-memory attach or shared
         * memory. */
        const char *cma_env = getenv("DAT2_SOFT_CMA");
        if (dx_on_soft_device() && cma_env && !strcmp(cma_env, "0"))
            EXPECT(cma == 0 && shm == 0, "bytes by path without CMA: cma %llu shm %llu", (unsigned long long)cma,
                   (unsigned long long)shm);
        else if (dx_on_soft_device())
            EXPECT(cma + shm >= NWRITES * WRITE_LEN, "bytes by path with CMA: tcp %llu cma %llu shm %llu",
                   (unsigned long long)tcp, (unsigned long long)cma, (unsigned long long)shm);
    }
    unsetenv("DAT2_STATS");
out:
    unsetenv("DAT2_STATS");
    unlink(stats);
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* A group of IA counters counts again from 0 after dat_ib_start_counter and holds its values
 * after dat_ib_stop_counter; the EP's counters go on. Then a rejected connection counts on
 * both sides, and as refused in dat2's own counters. */
void case_counters_start_stop(void)
{
    struct pair p;
    DAT_EVENT ev;
    DAT_EP_HANDLE ce2 = DAT_HANDLE_NULL;
    char stats[512];
    snprintf(stats, sizeof stats, "%s/counters-%d.stats", getenv("DAT2_OUT") ? getenv("DAT2_OUT") : "/tmp", (int)getpid());
    unlink(stats);
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16))
        goto out;
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_ACTIVE_EST, 1);
    EXPECT_RC(dat_ib_start_counter(p.c.ia, DCNT_IA_CM), DAT_SUCCESS);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_ACTIVE_EST, 0);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_REQ_TX, 0);
    EXPECT_COUNT(p.c.ia, DCNT_IA_EP_CREATE, 1); /* not in the group */
    EXPECT_RC(dat_ib_stop_counter(p.c.ia, DCNT_IA_CM), DAT_SUCCESS);
    if (!EXPECT_RC(dat_ep_disconnect(p.ce, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS) ||
        !EXPECT(wait_conn_at(__LINE__, p.c.conn, WAIT_MS, &ev) == DAT_CONNECTION_EVENT_DISCONNECTED, "no disconnection") ||
        !EXPECT(wait_conn_at(__LINE__, p.s.conn, WAIT_MS, &ev) == DAT_CONNECTION_EVENT_DISCONNECTED,
                "the server saw no disconnection"))
        goto out;
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_DREQ_TX, 0); /* stopped */
    EXPECT_COUNT(p.ce, DCNT_EP_DISCONNECT, 1);
    EXPECT_COUNT(p.s.ia, DCNT_IA_CM_DREQ_RX, 1); /* the server's IA counts on */
    EXPECT_RC(dat_ib_start_counter(p.c.ia, DCNT_IA_CM), DAT_SUCCESS);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_DREQ_TX, 0);
    EXPECT_RC(dat_ib_start_counter(p.c.ia, DCNT_IA_LNK), DAT_SUCCESS);
    EXPECT_RC(dat_ib_stop_counter(p.c.ia, DCNT_IA_DIAG), DAT_SUCCESS);
    EXPECT_RC(dat_ib_start_counter(p.c.ia, 3), RC_ARG3);
    EXPECT_RC(dat_ib_start_counter(p.ce, DCNT_IA_CM), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_IA);

    /* A second connect, which the server rejects. */
    if (!ep_make(&p.c, NULL, &ce2) ||
        !EXPECT_RC(dat_ep_connect(ce2, dx_loopback(0), p.s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS) ||
        !EXPECT_RC(wait_ev(p.s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "server event 0x%x", (unsigned)ev.event_number) ||
        !EXPECT_RC(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL), DAT_SUCCESS) ||
        !EXPECT(wait_conn_at(__LINE__, p.c.conn, WAIT_MS, &ev) == DAT_CONNECTION_EVENT_PEER_REJECTED, "not rejected"))
        goto out;
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_REQ_TX, 1);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_USER_REJ_RX, 1);
    EXPECT_COUNT(p.c.ia, DCNT_IA_CM_ACTIVE_EST, 0);
    EXPECT_COUNT(p.s.ia, DCNT_IA_SP_CR, 2);
    EXPECT_COUNT(p.s.ia, DCNT_IA_SP_CR_REJECTED, 1);
    EXPECT_COUNT(p.s.ia, DCNT_IA_CM_USER_REJ_TX, 1);
    EXPECT_COUNT(p.s.ia, DCNT_IA_CM_REQ_RX, 2);
    if (!EXPECT(setenv("DAT2_STATS", stats, 1) == 0, "setenv"))
        goto out;
    node_close(&p.c);
    unsetenv("DAT2_STATS");
    char *text = slurp(stats);
    if (EXPECT(text != NULL, "no DAT2_STATS summary in %s", stats)) {
        EXPECT(stat_of(text, "dat2", "DAT2_CONN_REFUSED") == 1, "DAT2_CONN_REFUSED %llu",
               (unsigned long long)stat_of(text, "dat2", "DAT2_CONN_REFUSED"));
        EXPECT(stat_of(text, "ep", "DCNT_EP_CONNECT") == 2, "ep CONNECT %llu",
               (unsigned long long)stat_of(text, "ep", "DCNT_EP_CONNECT"));
    }
out:
    unsetenv("DAT2_STATS");
    unlink(stats);
    pair_down(&p);
}
