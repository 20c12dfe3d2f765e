/* Data cases: sends and receives, RDMA, completion flags, local and remote protection,
 * queue and vector limits. */
#include "dx.h"

#include <stdlib.h>

#include "dx_cases.h"

/* Copies the bytes of `n` segments of m into out; returns the total. */
static size_t gather(const struct mr *m, const DAT_LMR_TRIPLET *t, int n, unsigned char *out)
{
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(out + k, (const void *)(uintptr_t)t[i].virtual_address, t[i].segment_length);
        k += t[i].segment_length;
    }
    (void)m;
    return k;
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* One send of `cn` client segments into one receive of `sn` server segments, verified. */
static void send_and_check(struct pair *p, struct mr *sm, struct mr *cm, const DAT_LMR_TRIPLET *cs, int cn,
                           const DAT_LMR_TRIPLET *ss, int sn, uint64_t tag)
{
    unsigned char *want = malloc(1 << 20);
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!want)
        return;
    size_t len = gather(cm, cs, cn, want);
    memset(sm->buf, 0, sm->alloc);
    if (!EXPECT_RC(dat_ep_post_recv(p->se, sn, (DAT_LMR_TRIPLET *)ss, ck(tag), DAT_COMPLETION_DEFAULT_FLAG),
                   DAT_SUCCESS) ||
        !EXPECT_RC(dat_ep_post_send(p->ce, cn, (DAT_LMR_TRIPLET *)cs, ck(tag + 1), DAT_COMPLETION_DEFAULT_FLAG),
                   DAT_SUCCESS))
        goto out;
    if (WAIT_DTO(p->s.rcv, &d)) {
        EXPECT(d.status == DAT_DTO_SUCCESS, "receive status %u", (unsigned)d.status);
        EXPECT(d.user_cookie.as_64 == tag, "receive cookie %llu", (unsigned long long)d.user_cookie.as_64);
        EXPECT(d.ep_handle == p->se, "receive for EP %p, expected %p", d.ep_handle, p->se);
        EXPECT(d.operation == DAT_DTO_RECEIVE, "receive operation %d", (int)d.operation);
        EXPECT(d.transfered_length == len, "received %u bytes, expected %zu", (unsigned)d.transfered_length, len);
    }
    if (WAIT_DTO(p->c.req, &d)) {
        EXPECT(d.status == DAT_DTO_SUCCESS, "send status %u", (unsigned)d.status);
        EXPECT(d.user_cookie.as_64 == tag + 1, "send cookie %llu", (unsigned long long)d.user_cookie.as_64);
        EXPECT(d.operation == DAT_DTO_SEND, "send operation %d", (int)d.operation);
    }
    /* the message lands in the receive segments in order; nothing else changes */
    size_t k = 0;
    for (int i = 0; i < sn; i++) {
        unsigned char *seg = (unsigned char *)(uintptr_t)ss[i].virtual_address;
        size_t n = len - k < ss[i].segment_length ? len - k : ss[i].segment_length;
        EXPECT(memcmp(seg, want + k, n) == 0, "receive segment %d differs from the message bytes %zu..%zu", i, k, k + n);
        EXPECT(all_zero(seg + n, ss[i].segment_length - n), "receive segment %d written past the message", i);
        k += n;
    }
    size_t outside = 0;
    for (size_t b = 0; b < sm->alloc; b++) {
        uintptr_t a = (uintptr_t)(sm->buf + b);
        int in = 0;
        for (int i = 0; i < sn && !in; i++)
            in = a >= ss[i].virtual_address && a < ss[i].virtual_address + ss[i].segment_length;
        if (!in && sm->buf[b])
            outside++;
    }
    EXPECT(outside == 0, "%zu bytes outside the receive segments changed", outside);
out:
    free(want);
}

void case_data_send_recv_3seg(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 131072, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 131072, PRIV_ALL, &cm))
        goto out;
    fill(cm.buf, cm.len, 3);
    /* large: 41100 bytes from three pieces into three pieces */
    DAT_LMR_TRIPLET cs[3] = {lt(&cm, 0, 100), lt(&cm, 1000, 1000), lt(&cm, 8192, 40000)};
    DAT_LMR_TRIPLET ss[3] = {lt(&sm, 0, 20000), lt(&sm, 32768, 20000), lt(&sm, 65536, 2000)};
    send_and_check(&p, &sm, &cm, cs, 3, ss, 3, 10);
    /* small: 60 bytes (sent inline) */
    DAT_LMR_TRIPLET cs2[3] = {lt(&cm, 50001, 10), lt(&cm, 60003, 20), lt(&cm, 70000, 30)};
    DAT_LMR_TRIPLET ss2[3] = {lt(&sm, 7, 16), lt(&sm, 100, 16), lt(&sm, 200, 64)};
    send_and_check(&p, &sm, &cm, cs2, 3, ss2, 3, 20);
    /* a zero-length segment among them is legal */
    DAT_LMR_TRIPLET cs3[3] = {lt(&cm, 300, 0), lt(&cm, 400, 500), lt(&cm, 900, 0)};
    DAT_LMR_TRIPLET ss3[3] = {lt(&sm, 4096, 100), lt(&sm, 5000, 0), lt(&sm, 6000, 400)};
    send_and_check(&p, &sm, &cm, cs3, 3, ss3, 3, 30);
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* Posts a send from an invalid lkey with `flags`; its failure must be reported. */
static void failed_send_reported(DAT_CONN_QUAL port, DAT_COMPLETION_FLAGS flags, const char *what)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pair_up(&p, port, NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm) || !post_recv1(p.se, &sm, 0, 4096, 1))
        goto out;
    DAT_LMR_TRIPLET t = lt(&cm, 0, 100);
    t.lmr_context ^= 0x5a5a5a5au;
    if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck(77), flags), DAT_SUCCESS))
        goto out;
    if (WAIT_DTO(p.c.req, &d)) {
        EXPECT(d.user_cookie.as_64 == 77, "%s: cookie %llu", what, (unsigned long long)d.user_cookie.as_64);
        EXPECT(dx_local_protection(p.c.ia, d.status), "%s: a failed send completed with status %u, expected 4", what,
               (unsigned)d.status);
    }
    /* the connection is gone now (its end event is asserted by the rdma_rkey_* cases, not
     * here); a later post with the same flag is flushed, and that failure is reported too */
    DAT_EVENT ev;
    if (wait_ev(p.c.conn, 1000, &ev) == DAT_SUCCESS)
        harness_note("%s: connection event 0x%x after the local error", what, (unsigned)ev.event_number);
    else
        harness_note("%s: no connection event within 1 s after the local error", what);
    t = lt(&cm, 0, 100);
    if (EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck(78), flags), DAT_SUCCESS) && WAIT_DTO(p.c.req, &d)) {
        EXPECT(d.user_cookie.as_64 == 78 && d.status == DAT_DTO_ERR_FLUSHED,
               "%s: send after the break: cookie %llu status %u, expected 78 FLUSHED", what,
               (unsigned long long)d.user_cookie.as_64, (unsigned)d.status);
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_data_suppress_unsignalled(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    for (int i = 0; i < 4; i++)
        post_recv1(p.se, &sm, (size_t)i * 512, 512, 1 + (uint64_t)i);
    static const DAT_COMPLETION_FLAGS flags[3] = {DAT_COMPLETION_SUPPRESS_FLAG, DAT_COMPLETION_UNSIGNALLED_FLAG,
                                                  DAT_COMPLETION_DEFAULT_FLAG};
    for (int i = 0; i < 3; i++) {
        DAT_LMR_TRIPLET t = lt(&cm, (size_t)i * 512, 300);
        EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck(11 + (uint64_t)i), flags[i]), DAT_SUCCESS);
    }
    /* an RDMA write with each flag as well */
    for (int i = 0; i < 2; i++) {
        DAT_LMR_TRIPLET t = lt(&cm, 2048, 64);
        DAT_RMR_TRIPLET r = rt(&sm, 3000, 64);
        EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &t, ck(21 + (uint64_t)i), &r, flags[i]), DAT_SUCCESS);
    }
    DAT_LMR_TRIPLET t = lt(&cm, 2048, 64);
    DAT_RMR_TRIPLET r = rt(&sm, 3000, 64);
    EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &t, ck(23), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    for (int i = 0; i < 3; i++)
        if (WAIT_DTO(p.s.rcv, &d))
            EXPECT(d.status == DAT_DTO_SUCCESS, "receive %d status %u", i, (unsigned)d.status);
    if (WAIT_DTO(p.c.req, &d))
        EXPECT(d.user_cookie.as_64 == 13, "first request completion has cookie %llu, expected 13 (the signalled send)",
               (unsigned long long)d.user_cookie.as_64);
    if (WAIT_DTO(p.c.req, &d))
        EXPECT(d.user_cookie.as_64 == 23, "second request completion has cookie %llu, expected 23 (the signalled write)",
               (unsigned long long)d.user_cookie.as_64);
    dx_sleep_ms(50);
    EXPECT_EMPTY(p.c.req, "request EVD after suppressed and unsignalled successes");
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
    failed_send_reported(dx_port(1), DAT_COMPLETION_SUPPRESS_FLAG, "SUPPRESS");
    failed_send_reported(dx_port(2), DAT_COMPLETION_UNSIGNALLED_FLAG, "UNSIGNALLED");
}

void case_data_rdma_write_read(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    unsigned char *want = malloc(65536);
    if (!want || !pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 65536, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 131072, PRIV_ALL, &cm))
        goto out;
    fill(cm.buf, 65536, 9);
    DAT_EP_PARAM ep_param;
    DAT_COUNT read_iov = 3;
    if (EXPECT_RC(dat_ep_query(p.ce, DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV, &ep_param), DAT_SUCCESS))
        read_iov = ep_param.ep_attr.max_rdma_read_iov;
    /* three sizes: inline, medium, large; each a 3-segment write */
    static const struct {
        size_t a, b, c, dst;
    } w[3] = {{10, 20, 30, 100}, {100, 1000, 3000, 1000}, {5000, 10000, 17000, 20000}};
    for (int k = 0; k < 3; k++) {
        DAT_LMR_TRIPLET ls[3] = {lt(&cm, 0, (DAT_SEG_LENGTH)w[k].a), lt(&cm, 7000, (DAT_SEG_LENGTH)w[k].b),
                                 lt(&cm, 30000, (DAT_SEG_LENGTH)w[k].c)};
        size_t len = gather(&cm, ls, 3, want);
        DAT_RMR_TRIPLET r = rt(&sm, w[k].dst, (DAT_SEG_LENGTH)len);
        memset(sm.buf, 0, sm.alloc);
        if (!EXPECT_RC(dat_ep_post_rdma_write(p.ce, 3, ls, ck(100 + (uint64_t)k), &r, DAT_COMPLETION_DEFAULT_FLAG),
                       DAT_SUCCESS))
            continue;
        if (WAIT_DTO(p.c.req, &d)) {
            EXPECT(d.status == DAT_DTO_SUCCESS, "write %d status %u", k, (unsigned)d.status);
            EXPECT(d.operation == DAT_DTO_RDMA_WRITE, "write %d operation %d", k, (int)d.operation);
            EXPECT(d.user_cookie.as_64 == 100 + (uint64_t)k, "write %d cookie", k);
        }
        EXPECT(memcmp(sm.buf + w[k].dst, want, len) == 0, "write %d: target bytes differ", k);
        EXPECT(all_zero(sm.buf, w[k].dst) && all_zero(sm.buf + w[k].dst + len, sm.alloc - w[k].dst - len),
               "write %d: bytes outside the target changed", k);
        /* and read it back into three other pieces (one, where the EP reads into one segment:
         * iWARP's max_iov_segments_per_rdma_read is 1) */
        memset(cm.buf + 65536, 0, 65536);
        DAT_LMR_TRIPLET rs[3] = {lt(&cm, 65536, (DAT_SEG_LENGTH)w[k].c), lt(&cm, 90000, (DAT_SEG_LENGTH)w[k].a),
                                 lt(&cm, 100000, (DAT_SEG_LENGTH)w[k].b)};
        DAT_COUNT nrs = 3;
        if (read_iov < 3) {
            rs[0] = lt(&cm, 65536, (DAT_SEG_LENGTH)len);
            nrs = 1;
        }
        if (!EXPECT_RC(dat_ep_post_rdma_read(p.ce, nrs, rs, ck(200 + (uint64_t)k), &r, DAT_COMPLETION_DEFAULT_FLAG),
                       DAT_SUCCESS))
            continue;
        if (WAIT_DTO(p.c.req, &d)) {
            EXPECT(d.status == DAT_DTO_SUCCESS, "read %d status %u", k, (unsigned)d.status);
            EXPECT(d.operation == DAT_DTO_RDMA_READ, "read %d operation %d", k, (int)d.operation);
        }
        unsigned char *got = malloc(len + 1);
        if (got) {
            gather(&cm, rs, (int)nrs, got);
            EXPECT(memcmp(got, want, len) == 0, "read %d: bytes read back differ", k);
            free(got);
        }
    }
out:
    free(want);
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* ---- zero-based addressing ------------------------------------------------------------ */

/* A zero-based LMR (DAT_VA_TYPE_ZB): the peer names its bytes by offset. An RDMA write to offset 64 lands at buf+64 and nowhere else, an RDMA read from offset
 * 256 returns buf+256, and the region's own virtual address (far outside [0, 4096)) is a remote
 * access error that leaves the buffer alone. An IA whose zb_supported is false (siw, which
 * ignores the iova it is given) refuses the LMR with DAT_MODEL_NOT_SUPPORTED. */
void case_rdma_zero_based(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    DAT_REGION_DESCRIPTION reg;
    DAT_VLEN rlen = 0;
    DAT_VADDR raddr = 1;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    sm.alloc = 8192;
    sm.len = 4096;
    sm.buf = aligned_alloc(4096, sm.alloc);
    if (!EXPECT(sm.buf != NULL, "out of memory"))
        goto out;
    memset(sm.buf, 0, sm.alloc);
    memset(&reg, 0, sizeof reg);
    reg.for_va = sm.buf;
    DAT_RETURN rc = dat_lmr_create(p.s.ia, DAT_MEM_TYPE_VIRTUAL, reg, 4096, p.s.pz, PRIV_ALL, DAT_VA_TYPE_ZB, &sm.h,
                                   &sm.lkey, &sm.rkey, &rlen, &raddr);
    DAT_IA_ATTR ia_attr;
    memset(&ia_attr, 0, sizeof ia_attr);
    if (EXPECT_RC(dat_ia_query(p.s.ia, NULL, DAT_IA_FIELD_IA_ZB_SUPPORTED, &ia_attr, 0, NULL), DAT_SUCCESS) &&
        ia_attr.zb_supported == DAT_FALSE) {
        harness_note("the IA reports zb_supported false: the LMR must be refused");
        EXPECT_RC(rc, DAT_CLASS_ERROR | DAT_MODEL_NOT_SUPPORTED);
        goto out;
    }
    if (!EXPECT_RC(rc, DAT_SUCCESS))
        goto out;
    /* registered_address is the region's local start, as for any LMR (dat_lmr_create(3)) */
    EXPECT(raddr == (DAT_VADDR)(uintptr_t)sm.buf, "registered address 0x%llx, expected the region's start %p",
           (unsigned long long)raddr, (void *)sm.buf);
    fill(cm.buf, 4096, 21);
    DAT_LMR_TRIPLET l = lt(&cm, 0, 100);
    DAT_RMR_TRIPLET r = {.rmr_context = sm.rkey, .virtual_address = 64, .segment_length = 100};
    if (EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.req, &d)) {
        EXPECT(d.status == DAT_DTO_SUCCESS, "write to offset 64: status %u", (unsigned)d.status);
        EXPECT(memcmp(sm.buf + 64, cm.buf, 100) == 0, "the write to offset 64 did not land at buf+64");
        EXPECT(all_zero(sm.buf, 64) && all_zero(sm.buf + 164, sm.alloc - 164), "the write touched bytes outside [64, 164)");
    }
    fill(sm.buf + 256, 200, 5);
    l = lt(&cm, 1024, 200);
    r.virtual_address = 256;
    r.segment_length = 200;
    if (EXPECT_RC(dat_ep_post_rdma_read(p.ce, 1, &l, ck(2), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.req, &d)) {
        EXPECT(d.status == DAT_DTO_SUCCESS, "read from offset 256: status %u", (unsigned)d.status);
        EXPECT(memcmp(cm.buf + 1024, sm.buf + 256, 200) == 0, "the read from offset 256 returned other bytes");
    }
    unsigned char snap[512];
    memcpy(snap, sm.buf, sizeof snap);
    l = lt(&cm, 0, 100);
    r.virtual_address = (DAT_VADDR)(uintptr_t)sm.buf;
    r.segment_length = 100;
    if (EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(3), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.req, &d))
        EXPECT(d.status == DAT_DTO_ERR_REMOTE_ACCESS, "a write to the region's virtual address: status %u, expected 6",
               (unsigned)d.status);
    EXPECT(memcmp(snap, sm.buf, sizeof snap) == 0, "the write to the region's virtual address changed it");
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* ---- remote access errors ------------------------------------------------------------ */

enum remote_kind { RK_INVALID, RK_BOUNDS, RK_NO_WRITE, RK_FREED };

static void remote_error(enum remote_kind kind)
{
    static const char *names[] = {"invalid rkey", "out of bounds", "no REMOTE_WRITE", "freed LMR"};
    const char *what = names[kind];
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    unsigned char *snap = NULL;
    DAT_MEM_PRIV_FLAGS priv = kind == RK_NO_WRITE ? 0x13u : PRIV_ALL; /* 0x13: local r/w, remote read */
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 4096, priv, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    fill(sm.buf, sm.alloc, 1);
    fill(cm.buf, cm.alloc, 2);
    snap = malloc(sm.alloc);
    if (!snap)
        goto out;
    memcpy(snap, sm.buf, sm.alloc);
    DAT_RMR_TRIPLET r = rt(&sm, 1000, 200);
    switch (kind) {
    case RK_INVALID:
        r.rmr_context ^= 0x13572468u;
        break;
    case RK_BOUNDS:
        r = rt(&sm, 4096 - 100, 200); /* the last 100 bytes and 100 beyond */
        break;
    case RK_NO_WRITE:
        break;
    case RK_FREED:
        if (EXPECT_RC(dat_lmr_free(sm.h), DAT_SUCCESS))
            sm.h = DAT_HANDLE_NULL;
        break;
    }
    DAT_LMR_TRIPLET l = lt(&cm, 0, 200);
    if (!EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(5), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
        goto out;
    if (WAIT_DTO(p.c.req, &d)) {
        EXPECT(dx_remote_error(p.c.ia, d.status), "%s: write completed with status %u, expected REMOTE_ACCESS (6)", what,
               (unsigned)d.status);
        EXPECT(d.user_cookie.as_64 == 5, "%s: cookie %llu", what, (unsigned long long)d.user_cookie.as_64);
    }
    EXPECT_CONN_END(p.c.conn, 2000, "initiator");
    EXPECT_CONN_END(p.s.conn, 2000, "target");
    EXPECT(memcmp(snap, sm.buf, sm.alloc) == 0, "%s: the target buffer changed", what);
    DAT_EP_STATE st;
    if (EXPECT_RC(dat_ep_get_status(p.ce, &st, NULL, NULL), DAT_SUCCESS))
        EXPECT(st == DAT_EP_STATE_DISCONNECTED, "%s: initiator EP state %d, expected DISCONNECTED", what, (int)st);
out:
    free(snap);
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_rdma_rkey_invalid(void) { remote_error(RK_INVALID); }
void case_rdma_rkey_bounds(void) { remote_error(RK_BOUNDS); }
void case_rdma_rkey_no_write(void) { remote_error(RK_NO_WRITE); }
void case_rdma_rkey_freed(void) { remote_error(RK_FREED); }

/* ---- the keys an RDMA read's sink shows ---------------------------------------------------
 * The client reads from the server into its LMR; then the server, which saw the sink's tag in
 * the read request (on iWARP the sink's lmr_context travels in it), writes to that LMR with
 * (SINK_RKEY) the sink's rmr_context, the LMR asking for local write and remote read only, or
 * (SINK_TAG) its lmr_context, the LMR asking for local rights only. Either write must be
 * refused and leave the sink as the read left it. On iWARP the sink of a read must be
 * remotely writable on RNICs; dat2 then registers twice, the rmr_context with exactly the
 * rights asked for, and the lmr_context stays writable by the peers it was shown to: the IA
 * says so (DAT2_VERBS_SINK_REMOTE_WRITE TRUE; siw needs no such registration, and
 * DAT2_VERBS_SINK_REMOTE_WRITE=1 asks for it there), and the SINK_TAG write then lands. */

enum sink_kind { SINK_RKEY, SINK_TAG };

static int sink_remote_write(DAT_IA_HANDLE ia)
{
    return dx_says_true(ia, "DAT2_VERBS_SINK_REMOTE_WRITE");
}

static void read_sink_keys(enum sink_kind kind)
{
    const char *what = kind == SINK_RKEY ? "the sink's rmr_context" : "the sink's lmr_context";
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    unsigned char *snap = NULL;
    DAT_MEM_PRIV_FLAGS priv = kind == SINK_RKEY ? 0x13u : 0x11u; /* local r/w (+ remote read) */
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, priv, &cm))
        goto out;
    if (kind == SINK_TAG)
        EXPECT(cm.rkey == 0, "an LMR without remote rights has rmr_context %#x", (unsigned)cm.rkey);
    fill(sm.buf, sm.alloc, 7);
    fill(cm.buf, cm.alloc, 8);
    DAT_LMR_TRIPLET l = lt(&cm, 512, 256);
    DAT_RMR_TRIPLET r = rt(&sm, 64, 256);
    if (!EXPECT_RC(dat_ep_post_rdma_read(p.ce, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
        !WAIT_DTO(p.c.req, &d))
        goto out;
    if (!EXPECT(d.status == DAT_DTO_SUCCESS, "the read into the sink: status %u", (unsigned)d.status) ||
        !EXPECT(memcmp(cm.buf + 512, sm.buf + 64, 256) == 0, "the read placed other bytes"))
        goto out;
    snap = malloc(cm.alloc);
    if (!snap)
        goto out;
    memcpy(snap, cm.buf, cm.alloc);
    int lands = kind == SINK_TAG && sink_remote_write(p.c.ia);
    r = rt(&cm, 1024, 200);
    if (kind == SINK_TAG)
        r.rmr_context = cm.lkey;
    l = lt(&sm, 0, 200);
    if (!EXPECT_RC(dat_ep_post_rdma_write(p.se, 1, &l, ck(2), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
        !WAIT_DTO(p.s.req, &d))
        goto out;
    if (lands) {
        harness_note("this IA's read sinks are remotely writable (DAT2_VERBS_SINK_REMOTE_WRITE): the write lands");
        EXPECT(d.status == DAT_DTO_SUCCESS && memcmp(cm.buf + 1024, sm.buf, 200) == 0,
               "%s on a remotely writable sink: status %u", what, (unsigned)d.status);
        goto out;
    }
    EXPECT(dx_remote_error(p.s.ia, d.status), "a write with %s completed with status %u, expected REMOTE_ACCESS (6)",
           what, (unsigned)d.status);
    EXPECT_CONN_END(p.s.conn, 2000, "writer");
    EXPECT_CONN_END(p.c.conn, 2000, "sink's side");
    EXPECT(memcmp(snap, cm.buf, cm.alloc) == 0, "a write with %s changed the sink", what);
out:
    free(snap);
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_rdma_read_sink_rkey(void) { read_sink_keys(SINK_RKEY); }
void case_rdma_read_sink_tag(void) { read_sink_keys(SINK_TAG); }

/* ---- local protection ---------------------------------------------------------------- */

enum local_kind { LK_INVALID, LK_OUTSIDE, LK_OTHER_PZ };

static void local_error(enum local_kind kind)
{
    static const char *names[] = {"invalid lkey", "segment outside its LMR", "LMR of another PZ"};
    const char *what = names[kind];
    struct pair p;
    struct mr sm = {0}, cm = {0}, om = {0};
    DAT_PZ_HANDLE pz2;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm) || !post_recv1(p.se, &sm, 0, 4096, 1))
        goto out;
    DAT_LMR_TRIPLET l = lt(&cm, 0, 100);
    switch (kind) {
    case LK_INVALID:
        l.lmr_context ^= 0x2468ace1u;
        break;
    case LK_OUTSIDE:
        l = lt(&cm, 4096 - 50, 100);
        break;
    case LK_OTHER_PZ:
        if (!EXPECT_RC(dat_pz_create(p.c.ia, &pz2), DAT_SUCCESS) || !mr_make(&p.c, pz2, 4096, PRIV_ALL, &om))
            goto out;
        l = lt(&om, 0, 100);
        break;
    }
    /* as a send and, on a second pair, as an RDMA write (whose target is valid) */
    if (EXPECT_RC(dat_ep_post_send(p.ce, 1, &l, ck(9), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.req, &d))
        EXPECT(dx_local_protection(p.c.ia, d.status), "%s: send completed with status %u, expected 4", what,
               (unsigned)d.status);
    pair_down(&p);
    mr_drop(&sm);
    mr_drop(&cm);
    mr_drop(&om);
    if (!pair_up(&p, dx_port(1), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    l = lt(&cm, 0, 100);
    switch (kind) {
    case LK_INVALID:
        l.lmr_context ^= 0x2468ace1u;
        break;
    case LK_OUTSIDE:
        l = lt(&cm, 4096 - 50, 100);
        break;
    case LK_OTHER_PZ:
        if (!EXPECT_RC(dat_pz_create(p.c.ia, &pz2), DAT_SUCCESS) || !mr_make(&p.c, pz2, 4096, PRIV_ALL, &om))
            goto out;
        l = lt(&om, 0, 100);
        break;
    }
    DAT_RMR_TRIPLET r = rt(&sm, 0, 100);
    if (EXPECT_RC(dat_ep_post_rdma_write(p.ce, 1, &l, ck(10), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.req, &d))
        EXPECT(dx_local_protection(p.c.ia, d.status), "%s: RDMA write completed with status %u, expected 4", what,
               (unsigned)d.status);
    EXPECT(all_zero(sm.buf, sm.alloc), "%s: the RDMA write's target changed", what);
out:
    mr_drop(&sm);
    mr_drop(&cm);
    mr_drop(&om);
    pair_down(&p);
}

void case_local_lkey_invalid(void) { local_error(LK_INVALID); }
void case_local_outside_lmr(void) { local_error(LK_OUTSIDE); }
void case_local_other_pz(void) { local_error(LK_OTHER_PZ); }

void case_recv_too_short(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm) || !post_recv1(p.se, &sm, 0, 100, 1))
        goto out;
    fill(cm.buf, 4096, 4);
    DAT_LMR_TRIPLET t = lt(&cm, 0, 200);
    if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck(2), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
        goto out;
    if (WAIT_DTO(p.s.rcv, &d)) {
        /* rxe completes a too-short receive with IBV_WC_LOC_QP_OP_ERR (DAT_DTO_ERR_LOCAL_EP) */
        unsigned rxe_len = dx_on_rxe(p.s.ia) ? DAT_DTO_ERR_LOCAL_EP : DAT_DTO_ERR_LOCAL_LENGTH;
        EXPECT(d.status == DAT_DTO_ERR_LOCAL_LENGTH || d.status == rxe_len,
               "receive completed with status %u, expected LOCAL_LENGTH (2)", (unsigned)d.status);
        EXPECT(d.user_cookie.as_64 == 1, "receive cookie %llu", (unsigned long long)d.user_cookie.as_64);
    }
    EXPECT(all_zero(sm.buf + 100, sm.alloc - 100), "bytes beyond the short receive buffer changed");
    if (WAIT_DTO(p.c.req, &d))
        harness_note("the sender's completion status: %u", (unsigned)d.status);
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_post_too_many(void)
{
    if (dx_ia_iwarp()) {
        /* the sends fill the queue by waiting for receives the peer never posts (receiver not
         * ready); iWARP has no such wait: the peer ends the connection at the first send */
        harness_skip("iWARP has no receiver-not-ready wait, which fills the send queue here");
        return;
    }
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_EP_ATTR a;
    attr_init(&a);
    a.max_request_dtos = 4;
    a.max_recv_dtos = 4;
    /* the server posts no receives: the client's sends stay outstanding */
    if (!pair_up(&p, dx_port(0), NULL, &a, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 65536, PRIV_ALL, &cm))
        goto out;
    DAT_EP_PARAM ep;
    if (EXPECT_RC(dat_ep_query(p.ce, DAT_EP_FIELD_EP_ATTR_ALL, &ep), DAT_SUCCESS))
        EXPECT(ep.ep_attr.max_request_dtos == 4 && ep.ep_attr.max_recv_dtos == 4, "EP limits %d/%d, asked for 4/4",
               (int)ep.ep_attr.max_request_dtos, (int)ep.ep_attr.max_recv_dtos);
    for (int i = 0; i < 4; i++) {
        DAT_LMR_TRIPLET t = lt(&cm, (size_t)i * 64, 64);
        EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck((uint64_t)i), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    }
    DAT_LMR_TRIPLET t = lt(&cm, 1024, 64);
    EXPECT_TYPE(dat_ep_post_send(p.ce, 1, &t, ck(4), DAT_COMPLETION_DEFAULT_FLAG), RC_RESOURCES);
    DAT_RMR_TRIPLET r = rt(&sm, 0, 64);
    EXPECT_TYPE(dat_ep_post_rdma_write(p.ce, 1, &t, ck(5), &r, DAT_COMPLETION_DEFAULT_FLAG), RC_RESOURCES);
    for (int i = 0; i < 4; i++)
        post_recv1(p.ce, &cm, 4096 + (size_t)i * 64, 64, 10 + (uint64_t)i);
    t = lt(&cm, 8192, 64);
    EXPECT_TYPE(dat_ep_post_recv(p.ce, 1, &t, ck(14), DAT_COMPLETION_DEFAULT_FLAG), RC_RESOURCES);
    /* once a receive completes, its slot is free again */
    DAT_LMR_TRIPLET st = lt(&sm, 0, 64);
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (EXPECT_RC(dat_ep_post_send(p.se, 1, &st, ck(99), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.rcv, &d)) {
        EXPECT(d.status == DAT_DTO_SUCCESS, "receive status %u", (unsigned)d.status);
        EXPECT_RC(dat_ep_post_recv(p.ce, 1, &t, ck(15), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_post_too_many_iov(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_EP_ATTR a;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    attr_init(&a);
    a.max_request_iov = 2;
    a.max_recv_iov = 2;
    a.max_rdma_read_iov = 2;
    a.max_rdma_write_iov = 2;
    if (!pair_up(&p, dx_port(0), &a, &a, 16) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    DAT_LMR_TRIPLET t3[3] = {lt(&cm, 0, 10), lt(&cm, 100, 10), lt(&cm, 200, 10)};
    DAT_RMR_TRIPLET r = rt(&sm, 0, 30);
    /* the segment count is the 2nd argument of every post call */
    EXPECT_RC(dat_ep_post_send(p.ce, 3, t3, ck(1), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG2);
    EXPECT_RC(dat_ep_post_recv(p.ce, 3, t3, ck(2), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG2);
    EXPECT_RC(dat_ep_post_rdma_write(p.ce, 3, t3, ck(3), &r, DAT_COMPLETION_DEFAULT_FLAG), RC_ARG2);
    EXPECT_RC(dat_ep_post_rdma_read(p.ce, 3, t3, ck(4), &r, DAT_COMPLETION_DEFAULT_FLAG), RC_ARG2);
    EXPECT_RC(dat_ep_post_send(p.ce, 100000, t3, ck(1), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG2);
    EXPECT_RC(dat_ep_post_send(p.ce, -1, t3, ck(1), DAT_COMPLETION_DEFAULT_FLAG), RC_ARG2);
    /* none of them was posted: two segments work, and the first completion is theirs */
    DAT_LMR_TRIPLET s2[2] = {lt(&sm, 0, 10), lt(&sm, 100, 10)};
    if (EXPECT_RC(dat_ep_post_recv(p.se, 2, s2, ck(7), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        EXPECT_RC(dat_ep_post_send(p.ce, 2, t3, ck(8), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
        WAIT_DTO(p.c.req, &d))
        EXPECT(d.user_cookie.as_64 == 8 && d.status == DAT_DTO_SUCCESS, "completion cookie %llu status %u",
               (unsigned long long)d.user_cookie.as_64, (unsigned)d.status);
    dx_sleep_ms(20);
    EXPECT_EMPTY(p.c.req, "request EVD");
    EXPECT_EMPTY(p.c.rcv, "receive EVD");
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* ---- RMR ---------------------------------------------------------------------------- */

int bind_at(int line, DAT_RMR_HANDLE rmr, const struct mr *m, size_t off, DAT_SEG_LENGTH len, DAT_EP_HANDLE ep,
                   DAT_EVD_HANDLE evd, uint64_t cookie, DAT_RMR_CONTEXT *ctx)
{
    DAT_LMR_TRIPLET t = lt(m, off, len);
    DAT_RMR_COOKIE c;
    DAT_EVENT ev;
    c.as_64 = cookie;
    if (!harness_expect_code(line, "dat_rmr_bind", dat_rmr_bind(rmr, m->h, &t, DAT_MEM_PRIV_REMOTE_WRITE_FLAG |
                                                                         DAT_MEM_PRIV_REMOTE_READ_FLAG,
                                                         DAT_VA_TYPE_VA, ep, c, DAT_COMPLETION_DEFAULT_FLAG, ctx),
                      DAT_SUCCESS))
        return 0;
    if (!harness_expect_code(line, "waiting for the bind completion", wait_ev(evd, WAIT_MS, &ev), DAT_SUCCESS))
        return 0;
    DAT_RMR_BIND_COMPLETION_EVENT_DATA *b = &ev.event_data.rmr_completion_event_data;
    int ok = 1;
    if (ev.event_number != DAT_RMR_BIND_COMPLETION_EVENT) {
        harness_fail(line, "bind completion event 0x%x, expected 0x1001", (unsigned)ev.event_number);
        return 0;
    }
    if (b->status != DAT_RMR_BIND_SUCCESS || b->user_cookie.as_64 != cookie || b->rmr_handle != rmr) {
        harness_fail(line, "bind completion status %u cookie %llu rmr %p, expected 0, %llu, %p", (unsigned)b->status,
                (unsigned long long)b->user_cookie.as_64, b->rmr_handle, (unsigned long long)cookie, rmr);
        ok = 0;
    }
    return ok;
}

unsigned write_via(int line, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd, struct mr *src, DAT_VADDR addr,
                          DAT_RMR_CONTEXT key, DAT_SEG_LENGTH len)
{
    DAT_LMR_TRIPLET l = lt(src, 0, len);
    DAT_RMR_TRIPLET r;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    r.rmr_context = key;
    r.virtual_address = addr;
    r.segment_length = len;
    if (!harness_expect_code(line, "dat_ep_post_rdma_write", dat_ep_post_rdma_write(ep, 1, &l, ck(1), &r, 0), DAT_SUCCESS))
        return 99;
    if (!wait_dto_at(line, evd, WAIT_MS, &d))
        return 99;
    return d.status;
}

static int rmr_setup(struct pair *p, struct mr *sm, struct mr *cm, DAT_RMR_HANDLE *rmr)
{
    if (dx_ia_lacks_windows()) {
        memset(p, 0, sizeof *p);
        harness_skip("the IA has no memory windows (max_rmrs 0; memory:rmr_without_windows checks the refusal)");
        return 0;
    }
    return pair_up(p, dx_port(0), NULL, NULL, 16) && mr_make(&p->s, p->s.pz, 16384, PRIV_ALL, sm) &&
           mr_make(&p->c, p->c.pz, 4096, PRIV_ALL, cm) && EXPECT_RC(dat_rmr_create(p->s.pz, rmr), DAT_SUCCESS);
}

void case_rmr_bind_write(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_RMR_HANDLE rmr;
    DAT_RMR_CONTEXT ctx = 0;
    DAT_RMR_PARAM rp;
    if (!rmr_setup(&p, &sm, &cm, &rmr) || !BIND(rmr, &sm, 4096, 4096, p.se, p.s.req, 0xC0FFEE, &ctx))
        goto out;
    memset(&rp, 0, sizeof rp);
    if (EXPECT_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_LMR_TRIPLET | DAT_RMR_FIELD_RMR_CONTEXT, &rp), DAT_SUCCESS)) {
        DAT_LMR_TRIPLET t = lt(&sm, 4096, 4096);
        EXPECT(rp.lmr_triplet.virtual_address == t.virtual_address && rp.lmr_triplet.segment_length == 4096 &&
                   rp.lmr_triplet.lmr_context == sm.lkey,
               "rmr_query triplet {0x%llx, %u, 0x%x}, expected {0x%llx, 4096, 0x%x}",
               (unsigned long long)rp.lmr_triplet.virtual_address, (unsigned)rp.lmr_triplet.segment_length,
               (unsigned)rp.lmr_triplet.lmr_context, (unsigned long long)t.virtual_address, (unsigned)sm.lkey);
        EXPECT(rp.rmr_context == ctx, "rmr_query context 0x%x, bind returned 0x%x", (unsigned)rp.rmr_context,
               (unsigned)ctx);
    }
    fill(cm.buf, 4096, 6);
    /* inside the window, at its start and reaching its end */
    EXPECT(WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 4096 + 100), ctx, 512) == DAT_DTO_SUCCESS,
           "write inside the window failed");
    EXPECT(memcmp(sm.buf + 4096 + 100, cm.buf, 512) == 0, "the write through the window did not land");
    EXPECT(WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 8192 - 300), ctx, 300) == DAT_DTO_SUCCESS,
           "write at the window's end failed");
    EXPECT(all_zero(sm.buf, 4096) && all_zero(sm.buf + 8192, sm.alloc - 8192), "bytes outside the window changed");
    /* reads need REMOTE_READ, which the window grants */
    DAT_LMR_TRIPLET l = lt(&cm, 2048, 512);
    DAT_RMR_TRIPLET r = {ADDR(&sm, 4096 + 100), 512, ctx};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (EXPECT_RC(dat_ep_post_rdma_read(p.ce, 1, &l, ck(3), &r, 0), DAT_SUCCESS) && WAIT_DTO(p.c.req, &d)) {
        EXPECT(d.status == DAT_DTO_SUCCESS, "read through the window: status %u", (unsigned)d.status);
        EXPECT(memcmp(cm.buf + 2048, cm.buf, 512) == 0, "read through the window returned other bytes");
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_rmr_outside_window(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_RMR_HANDLE rmr;
    DAT_RMR_CONTEXT ctx = 0;
    unsigned char *snap = NULL;
    if (!rmr_setup(&p, &sm, &cm, &rmr))
        goto out;
    if (dx_on_rxe(p.s.ia)) {
        /* rxe checks an access through a window against the bounds of the window's MR only */
        harness_skip("rxe checks window accesses against the underlying MR's bounds, not the window's");
        goto out;
    }
    if (!BIND(rmr, &sm, 4096, 4096, p.se, p.s.req, 1, &ctx))
        goto out;
    fill(cm.buf, 4096, 7);
    snap = malloc(sm.alloc);
    if (!snap)
        goto out;
    memcpy(snap, sm.buf, sm.alloc);
    /* inside the LMR, but crossing the window's end */
    unsigned st = WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 8192 - 100), ctx, 200);
    EXPECT(st == DAT_DTO_ERR_REMOTE_ACCESS, "write crossing the window's end: status %u, expected 6", st);
    EXPECT_CONN_END(p.c.conn, 2000, "initiator");
    EXPECT_CONN_END(p.s.conn, 2000, "target");
    EXPECT(memcmp(snap, sm.buf, sm.alloc) == 0, "the target buffer changed");
out:
    free(snap);
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_rmr_rebind(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_RMR_HANDLE rmr;
    DAT_RMR_CONTEXT c1 = 0, c2 = 0;
    unsigned char *snap = NULL;
    if (!rmr_setup(&p, &sm, &cm, &rmr) || !BIND(rmr, &sm, 4096, 4096, p.se, p.s.req, 1, &c1))
        goto out;
    fill(cm.buf, 4096, 8);
    EXPECT(WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 4096), c1, 64) == DAT_DTO_SUCCESS, "write via the first context failed");
    if (!BIND(rmr, &sm, 8192, 4096, p.se, p.s.req, 2, &c2))
        goto out;
    EXPECT(c2 != c1, "the rebind returned the old context 0x%x", (unsigned)c1);
    EXPECT(WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 8192), c2, 64) == DAT_DTO_SUCCESS, "write via the new context failed");
    snap = malloc(sm.alloc);
    if (!snap)
        goto out;
    memcpy(snap, sm.buf, sm.alloc);
    cm.buf[0] ^= 0xff;
    unsigned st = WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 4096), c1, 64);
    EXPECT(st == DAT_DTO_ERR_REMOTE_ACCESS, "write via the replaced context: status %u, expected 6", st);
    EXPECT(memcmp(snap, sm.buf, sm.alloc) == 0, "the write via the replaced context changed the target");
out:
    free(snap);
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_rmr_other_ep(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_RMR_HANDLE rmr;
    DAT_EP_HANDLE se_b, ce_b;
    DAT_RMR_CONTEXT ctx = 0;
    if (!rmr_setup(&p, &sm, &cm, &rmr) || !ep_make(&p.s, NULL, &se_b) || !ep_make(&p.c, NULL, &ce_b) ||
        !connect_eps(&p.s, se_b, &p.c, ce_b, 0) || !BIND(rmr, &sm, 4096, 4096, p.se, p.s.req, 1, &ctx))
        goto out;
    fill(cm.buf, 4096, 9);
    EXPECT(WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 4096), ctx, 64) == DAT_DTO_SUCCESS,
           "write through the window's own EP failed");
    memset(sm.buf + 4096, 0, 4096);
    unsigned st = WRITE_VIA(ce_b, p.c.req, &cm, ADDR(&sm, 4096), ctx, 64);
    EXPECT(st == DAT_DTO_ERR_REMOTE_ACCESS, "write through another connection: status %u, expected 6", st);
    EXPECT(all_zero(sm.buf + 4096, 4096), "the write through another connection changed the target");
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_rmr_lmr_free_bound(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_RMR_HANDLE rmr;
    DAT_RMR_CONTEXT ctx = 0;
    if (!rmr_setup(&p, &sm, &cm, &rmr) || !BIND(rmr, &sm, 4096, 4096, p.se, p.s.req, 1, &ctx))
        goto out;
    EXPECT_RC(dat_lmr_free(sm.h), RC_STATE_LMR_IN_USE);
    /* still registered: the window works */
    EXPECT(WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 4096), ctx, 64) == DAT_DTO_SUCCESS, "write after the refused free");
    if (BIND(rmr, &sm, 4096, 0, p.se, p.s.req, 2, NULL) && EXPECT_RC(dat_lmr_free(sm.h), DAT_SUCCESS))
        sm.h = DAT_HANDLE_NULL;
    EXPECT_RC(dat_rmr_free(rmr), DAT_SUCCESS);
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_rmr_unbind(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_RMR_HANDLE rmr;
    DAT_RMR_CONTEXT ctx = 0, after = 0x5a5a;
    if (!rmr_setup(&p, &sm, &cm, &rmr) || !BIND(rmr, &sm, 4096, 4096, p.se, p.s.req, 1, &ctx))
        goto out;
    fill(cm.buf, 4096, 10);
    EXPECT(WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 4096), ctx, 64) == DAT_DTO_SUCCESS, "write while bound failed");
    memset(sm.buf, 0, sm.alloc);
    if (!BIND(rmr, &sm, 4096, 0, p.se, p.s.req, 2, &after))
        goto out;
    unsigned st = WRITE_VIA(p.ce, p.c.req, &cm, ADDR(&sm, 4096), ctx, 64);
    EXPECT(st == DAT_DTO_ERR_REMOTE_ACCESS, "write after the unbind: status %u, expected 6", st);
    EXPECT(all_zero(sm.buf, sm.alloc), "the write after the unbind changed the target");
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

/* Reads the EP's idle flags and receive counts; records a failure when they differ. */
static void expect_queues_at(int line, DAT_EP_HANDLE ep, int recv_idle, int request_idle, DAT_COUNT recvs, DAT_COUNT span)
{
    DAT_EP_STATE st;
    DAT_BOOLEAN ri = 2, qi = 2;
    DAT_COUNT n = -1, bytes = -1;
    if (!EXPECT_RC(dat_ep_get_status(ep, &st, &ri, &qi), DAT_SUCCESS) || !EXPECT_RC(dat_ep_recv_query(ep, &n, &bytes), DAT_SUCCESS))
        return;
    EXPECT((ri != 0) == recv_idle && (qi != 0) == request_idle, "line %d: recv_idle %u request_idle %u, expected %d %d", line,
           (unsigned)ri, (unsigned)qi, recv_idle, request_idle);
    EXPECT(n == recvs && bytes == span, "line %d: dat_ep_recv_query says %d receives of %d bytes, expected %d of %d", line, n,
           bytes, recvs, span);
}

/* dat_ep_get_status's idle flags and dat_ep_recv_query's counts follow what is posted: receives
 * posted before the connection (kept until the QP takes them), after it, and as completions come. */
void case_data_idle_and_recv_query(void)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    memset(&p, 0, sizeof p);
    if (!node_open(&p.s, PROVIDER, 16, 16) || !node_open(&p.c, PROVIDER, 16, 16) || !ep_make(&p.s, NULL, &p.se) ||
        !ep_make(&p.c, NULL, &p.ce) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sm) || !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &cm))
        goto out;
    expect_queues_at(__LINE__, p.se, 1, 1, 0, 0);
    DAT_LMR_TRIPLET two[2] = {lt(&sm, 0, 100), lt(&sm, 512, 200)};
    if (!EXPECT_RC(dat_ep_post_recv(p.se, 2, two, ck(1), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) ||
        !post_recv1(p.se, &sm, 1024, 300, 2))
        goto out;
    expect_queues_at(__LINE__, p.se, 0, 1, 2, 600);
    if (!node_listen(&p.s, dx_port(0)) || !connect_eps(&p.s, p.se, &p.c, p.ce, 0))
        goto out;
    expect_queues_at(__LINE__, p.se, 0, 1, 2, 600);
    fill(cm.buf, 4096, 5);
    DAT_LMR_TRIPLET t = lt(&cm, 0, 150);
    if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck(9), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) || !WAIT_DTO(p.c.req, &d))
        goto out;
    EXPECT(d.user_cookie.as_64 == 9 && d.status == DAT_DTO_SUCCESS, "send: cookie %llu status %u",
           (unsigned long long)d.user_cookie.as_64, (unsigned)d.status);
    expect_queues_at(__LINE__, p.ce, 1, 1, 0, 0);
    if (!WAIT_DTO(p.s.rcv, &d))
        goto out;
    EXPECT(d.user_cookie.as_64 == 1 && d.transfered_length == 150 && memcmp(sm.buf, cm.buf, 100) == 0 &&
               memcmp(sm.buf + 512, cm.buf + 100, 50) == 0,
           "first receive: cookie %llu length %llu, or its bytes differ", (unsigned long long)d.user_cookie.as_64,
           (unsigned long long)d.transfered_length);
    expect_queues_at(__LINE__, p.se, 0, 1, 1, 300);
    t = lt(&cm, 0, 10);
    if (!EXPECT_RC(dat_ep_post_send(p.ce, 1, &t, ck(10), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) || !WAIT_DTO(p.c.req, &d) ||
        !WAIT_DTO(p.s.rcv, &d))
        goto out;
    EXPECT(d.user_cookie.as_64 == 2 && d.transfered_length == 10, "second receive: cookie %llu length %llu",
           (unsigned long long)d.user_cookie.as_64, (unsigned long long)d.transfered_length);
    expect_queues_at(__LINE__, p.se, 1, 1, 0, 0);
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}
