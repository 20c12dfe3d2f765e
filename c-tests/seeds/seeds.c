/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: the seeds' data-path features on dat2-soft, in one process with two IAs
 * connected over loopback: the one-shot bind+send extension op, and send-with-invalidate
 * through the DAT_EP_POST_SEND_WITH_INVALIDATE redirection macro.
 * DAT2_TEST_IA names another IA to use (its own address then replaces loopback, and the
 * soft device's DAT2_SOFT_PATH report is not checked). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>
#include <dat2/udat_redirection.h>

#define BIND_AND_SEND_OP 0x100
#define PORT 33917

static int failures;
#define CHECK(name, cond)                                                                \
    do {                                                                                 \
        if (cond)                                                                        \
            printf("PASS seeds:%s\n", name);                                             \
        else {                                                                           \
            printf("FAIL seeds:%s (%s:%d)\n", name, __FILE__, __LINE__);                 \
            failures++;                                                                  \
        }                                                                                \
    } while (0)
#define MUST(call)                                                                       \
    do {                                                                                 \
        DAT_RETURN r_ = (call);                                                          \
        if (r_ != DAT_SUCCESS) {                                                         \
            printf("FAIL seeds:setup %s = %#x (%s:%d)\n", #call, r_, __FILE__, __LINE__); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

struct side {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE dto, conn, cr;
    DAT_EP_HANDLE ep;
    char *buf;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lkey;
    DAT_RMR_CONTEXT rkey;
};

/* The IA under test: DAT2_TEST_IA when set, else dat2-soft. */
static char *test_ia(void)
{
    static char soft[] = "dat2-soft";
    char *name = getenv("DAT2_TEST_IA");
    return name && *name ? name : soft;
}

/* Whether the soft IA says cross-memory attach is on (its DAT2_SOFT_CMA attribute; off for a
 * process of the overflow uid, nobody, whose peers are never believed to be the same user). */
static int cma_on(DAT_IA_HANDLE ia)
{
    DAT_PROVIDER_ATTR pa;
    memset(&pa, 0, sizeof pa);
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa) != DAT_SUCCESS)
        return 0;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++) {
        const DAT_NAMED_ATTR *at = &pa.provider_specific_attr[i];
        if (at->name && at->value && strcmp(at->name, "DAT2_SOFT_CMA") == 0)
            return strncmp(at->value, "on", 2) == 0;
    }
    return 0;
}

static int on_soft_device(void)
{
    return strcmp(test_ia(), "dat2-soft") == 0;
}

static void open_side(struct side *s)
{
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    MUST(dat_ia_open(test_ia(), 8, &async, &s->ia));
    MUST(dat_pz_create(s->ia, &s->pz));
    MUST(dat_evd_create(s->ia, 64, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, &s->dto));
    MUST(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn));
    MUST(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &s->cr));
    MUST(dat_ep_create(s->ia, s->pz, s->dto, s->dto, s->conn, NULL, &s->ep));
    s->buf = calloc(1, 8192);
    DAT_REGION_DESCRIPTION r;
    r.for_va = s->buf;
    DAT_VLEN len;
    DAT_VADDR addr;
    MUST(dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, r, 8192, s->pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &s->lmr,
                        &s->lkey, &s->rkey, &len, &addr));
}

static DAT_EVENT wait_event(DAT_EVD_HANDLE evd)
{
    DAT_EVENT ev;
    DAT_COUNT more;
    memset(&ev, 0, sizeof ev);
    DAT_RETURN r = dat_evd_wait(evd, 5000000, 1, &ev, &more);
    if (r != DAT_SUCCESS) {
        printf("FAIL seeds:wait evd_wait = %#x\n", r);
        exit(1);
    }
    return ev;
}

/* The next event on `evd` about `ep` (connection or DTO), skipping older EPs' late events. */
static DAT_EVENT wait_event_for(DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep)
{
    for (;;) {
        DAT_EVENT ev = wait_event(evd);
        DAT_EP_HANDLE who = ev.event_number == DAT_DTO_COMPLETION_EVENT
                                ? ev.event_data.dto_completion_event_data.ep_handle
                                : ev.event_data.connect_event_data.ep_handle;
        if (who == ep)
            return ev;
    }
}

static DAT_LMR_TRIPLET seg(struct side *s, size_t off, size_t len)
{
    DAT_LMR_TRIPLET t;
    t.virtual_address = (DAT_VADDR)(uintptr_t)(s->buf + off);
    t.segment_length = (DAT_SEG_LENGTH)len;
    t.lmr_context = s->lkey;
    return t;
}

int main(void)
{
    struct side a, b;
    open_side(&a);
    open_side(&b);

    /* a listens, b connects, a accepts. */
    DAT_PSP_HANDLE psp;
    MUST(dat_psp_create(a.ia, PORT, a.cr, DAT_PSP_CONSUMER_FLAG, &psp));
    /* loopback on the soft device; a's own address on any other IA */
    struct sockaddr_storage sin;
    memset(&sin, 0, sizeof sin);
    if (on_soft_device()) {
        struct sockaddr_in *v4 = (struct sockaddr_in *)&sin;
        v4->sin_family = AF_INET;
        v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
        DAT_IA_ATTR ia_attr;
        MUST(dat_ia_query(a.ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &ia_attr, 0, NULL));
        memcpy(&sin, ia_attr.ia_address_ptr,
               ia_attr.ia_address_ptr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    }
    MUST(dat_ep_connect(b.ep, (DAT_IA_ADDRESS_PTR)&sin, PORT, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                        DAT_CONNECT_DEFAULT_FLAG));
    DAT_EVENT ev = wait_event(a.cr);
    MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, a.ep, 0, NULL));
    ev = wait_event(a.conn);
    CHECK("established-a", ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED);
    ev = wait_event(b.conn);
    CHECK("established-b", ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED);

    /* The connection reports how it moves data. */
    const char *want = getenv("EXPECT_PATH") ? getenv("EXPECT_PATH") : cma_on(a.ia) ? "cma" : "tcp";
    DAT_EP_PARAM epp;
    MUST(dat_ep_query(b.ep, DAT_EP_FIELD_EP_ATTR_ALL, &epp)); /* the active side knows the path when ESTABLISHED */
    if (on_soft_device())
        CHECK("ep-query-path", epp.ep_attr.ep_provider_specific_count == 1 &&
                                   strcmp(epp.ep_attr.ep_provider_specific[0].name, "DAT2_SOFT_PATH") == 0 &&
                                   strcmp(epp.ep_attr.ep_provider_specific[0].value, want) == 0);
    else
        printf("SKIP seeds:ep-query-path DAT2_SOFT_PATH is the soft device's attribute (IA %s)\n", test_ia());

    /* Memory windows (bind+send, send-with-invalidate): not on an IA without them (Soft-iWARP:
     * max_rmrs 0, and no immediate data for the context either). */
    DAT_DTO_COOKIE ck;
    DAT_IA_ATTR ia_attr;
    memset(&ia_attr, 0, sizeof ia_attr);
    MUST(dat_ia_query(a.ia, NULL, DAT_IA_FIELD_IA_MAX_RMRS, &ia_attr, 0, NULL));
    if (ia_attr.max_rmrs == 0) {
        printf("SKIP seeds:bind-send the IA has no memory windows (max_rmrs 0; IA %s)\n", test_ia());
    } else {
        /* One-shot bind+send: a binds a window over buf[4096, +1024) and sends its context. */
        DAT_RMR_HANDLE rmr;
        MUST(dat_rmr_create(a.pz, &rmr));
        DAT_LMR_TRIPLET recv_b = seg(&b, 0, 64);
        ck.as_64 = 7;
        MUST(dat_ep_post_recv(b.ep, 1, &recv_b, ck, DAT_COMPLETION_DEFAULT_FLAG));
        DAT_LMR_TRIPLET window = seg(&a, 4096, 1024);
        strcpy(a.buf, "window at 4096");
        DAT_LMR_TRIPLET msg = seg(&a, 0, 16);
        DAT_RMR_CONTEXT ctx = 0;
        ck.as_64 = 9;
        DAT_RETURN r = dat_extension_op(a.ep, BIND_AND_SEND_OP, rmr, a.lmr, &window, DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
                                        DAT_VA_TYPE_VA, 1, &msg, ck, DAT_COMPLETION_DEFAULT_FLAG, &ctx);
        CHECK("bind-send-returns", r == DAT_SUCCESS && ctx != 0);
        ev = wait_event(b.dto);
        DAT_IB_EXTENSION_EVENT_DATA *ext = (DAT_IB_EXTENSION_EVENT_DATA *)ev.event_extension_data;
        CHECK("bind-send-receive-event", ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT &&
                                             ext->type == DAT_IB_RECV_IMMED_DATA && ext->val.immed.data == ctx &&
                                             ev.event_data.dto_completion_event_data.transfered_length == 16);
        CHECK("bind-send-payload", strcmp(b.buf, "window at 4096") == 0);
        ev = wait_event(a.dto);
        CHECK("bind-send-send-completion", ev.event_number == DAT_DTO_COMPLETION_EVENT &&
                                               ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS);

        /* b writes through the window it just learned. */
        strcpy(b.buf + 1024, "written by b");
        DAT_LMR_TRIPLET src = seg(&b, 1024, 13);
        DAT_RMR_TRIPLET dst;
        dst.virtual_address = window.virtual_address + 100;
        dst.segment_length = 13;
        dst.rmr_context = ctx;
        ck.as_64 = 11;
        MUST(dat_ep_post_rdma_write(b.ep, 1, &src, ck, &dst, DAT_COMPLETION_DEFAULT_FLAG));
        ev = wait_event(b.dto);
        CHECK("window-write", ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS &&
                                  strcmp(a.buf + 4096 + 100, "written by b") == 0);

        /* Send-with-invalidate: b revokes a's window with its send; a's receive reports it. */
        DAT_LMR_TRIPLET recv_a = seg(&a, 0, 64);
        ck.as_64 = 13;
        MUST(dat_ep_post_recv(a.ep, 1, &recv_a, ck, DAT_COMPLETION_DEFAULT_FLAG));
        DAT_LMR_TRIPLET small = seg(&b, 1024, 4);
        ck.as_64 = 15;
        r = DAT_EP_POST_SEND_WITH_INVALIDATE(b.ep, 1, &small, ck, DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, ctx);
        CHECK("send-inv-returns", r == DAT_SUCCESS);
        ev = wait_event(a.dto);
        CHECK("send-inv-receive-event", ev.event_number == DAT_DTO_COMPLETION_EVENT &&
                                            ev.event_data.dto_completion_event_data.operation == DAT_DTO_RECEIVE_WITH_INVALIDATE &&
                                            ev.event_data.dto_completion_event_data.rmr_context == ctx);
        DAT_RMR_PARAM rp;
        CHECK("send-inv-unbound", dat_rmr_query(rmr, DAT_RMR_FIELD_LMR_TRIPLET, &rp) == 0x80060026);
        ev = wait_event(b.dto); /* the send's completion */
        ck.as_64 = 17;
        MUST(dat_ep_post_rdma_write(b.ep, 1, &src, ck, &dst, DAT_COMPLETION_DEFAULT_FLAG));
        ev = wait_event(b.dto);
        CHECK("invalidated-window-refused", ev.event_data.dto_completion_event_data.status == DAT_DTO_ERR_REMOTE_ACCESS);

        /* A wild RMR handle in the extension op is refused, not dereferenced. */
        r = dat_extension_op(a.ep, BIND_AND_SEND_OP, (DAT_RMR_HANDLE)0x1234, a.lmr, &window,
                             DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, 1, &msg, ck, DAT_COMPLETION_DEFAULT_FLAG, &ctx);
        CHECK("bind-send-bad-rmr", r == 0x8005000e);
    }

    /* A graceful disconnect lets requests already posted complete: 16 RDMA writes posted
     * just before it all succeed, then the connection ends. (The connection above broke on
     * the refused write, so connect a fresh pair of EPs first.) */
    DAT_EP_HANDLE ea, eb;
    MUST(dat_ep_create(a.ia, a.pz, a.dto, a.dto, a.conn, NULL, &ea));
    MUST(dat_ep_create(b.ia, b.pz, b.dto, b.dto, b.conn, NULL, &eb));
    MUST(dat_ep_connect(eb, (DAT_IA_ADDRESS_PTR)&sin, PORT, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                        DAT_CONNECT_DEFAULT_FLAG));
    ev = wait_event(a.cr);
    MUST(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ea, 0, NULL));
    ev = wait_event_for(a.conn, ea);
    ev = wait_event_for(b.conn, eb);
    CHECK("graceful-connected", ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED);
    /* dat_ep_dup_connect copies an active connection's target; an accepted one has none. */
    DAT_EP_HANDLE ec;
    MUST(dat_ep_create(a.ia, a.pz, a.dto, a.dto, a.conn, NULL, &ec));
    CHECK("dup-connect-from-accepted-ep", dat_ep_dup_connect(ec, ea, 1000000, 0, NULL, DAT_QOS_BEST_EFFORT) == 0x80060026);
    MUST(dat_ep_free(ec));

    DAT_LMR_TRIPLET big = seg(&b, 0, 4096);
    DAT_RMR_TRIPLET whole;
    whole.virtual_address = (DAT_VADDR)(uintptr_t)a.buf;
    whole.segment_length = 4096;
    whole.rmr_context = a.rkey;
    for (int i = 0; i < 16; i++) {
        ck.as_64 = 100 + (uint64_t)i;
        MUST(dat_ep_post_rdma_write(eb, 1, &big, ck, &whole, DAT_COMPLETION_DEFAULT_FLAG));
    }
    MUST(dat_ep_disconnect(eb, DAT_CLOSE_GRACEFUL_FLAG));
    int ok_writes = 0;
    for (int i = 0; i < 16; i++) {
        ev = wait_event_for(b.dto, eb);
        if (ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS)
            ok_writes++;
    }
    CHECK("graceful-disconnect-completes-posted-writes", ok_writes == 16);
    ev = wait_event_for(b.conn, eb);
    CHECK("graceful-disconnect-event", ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED);

    dat_ia_close(a.ia, DAT_CLOSE_ABRUPT_FLAG);
    dat_ia_close(b.ia, DAT_CLOSE_ABRUPT_FLAG);
    free(a.buf);
    free(b.buf);
    return failures ? 1 : 0;
}
