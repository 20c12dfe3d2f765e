/* A request whose data the peer moves itself (cross-memory attach: an RDMA read's data is
 * written into our sink by the target's process) must not touch our memory once its LMR is
 * freed, even when an abrupt disconnect comes while the peer is copying. Measured before the
 * disconnect waited for such copies: 10 to 33 MiB of the 64 MiB sink written after
 * dat_lmr_free returned, in each of 5 runs. */
#include "dx.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "dx_cases.h"

#define LINGER_LEN ((size_t)64 << 20)

/* A 64 MiB RDMA read on the cma path, an abrupt disconnect while the target copies (by the
 * reader itself, or by the target after 2 ms), then dat_lmr_free of the sink: nothing may
 * write the sink once the free returned. */
static void read_then_disconnect(int target_ends)
{
    struct pair p;
    struct mr sm = {0}, cm = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, LINGER_LEN, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, LINGER_LEN, PRIV_ALL, &cm))
        goto out;
    if (!dx_on_soft_device() || strcmp(path_of(p.ce), "cma") != 0) {
        harness_skip("the peer moves the data itself only on the soft device's cma path");
        goto out;
    }
    memset(sm.buf, 0x5a, LINGER_LEN);
    memset(cm.buf, 0, LINGER_LEN);
    DAT_LMR_TRIPLET l = lt(&cm, 0, (DAT_SEG_LENGTH)LINGER_LEN);
    DAT_RMR_TRIPLET r = rt(&sm, 0, (DAT_SEG_LENGTH)LINGER_LEN);
    if (!EXPECT_RC(dat_ep_post_rdma_read(p.ce, 1, &l, ck(1), &r, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
        goto out;
    if (target_ends)
        dx_sleep_ms(2);
    EXPECT_RC(dat_ep_disconnect(target_ends ? p.se : p.ce, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
    if (!WAIT_DTO(p.c.req, &d))
        goto out;
    /* Completed by the peer's answer (the disconnect waited for it) or flushed: either way the
     * peer's copy must be over once the LMR's free returns. */
    EXPECT(d.status == DAT_DTO_SUCCESS || d.status == DAT_DTO_ERR_FLUSHED, "read status %u", (unsigned)d.status);
    if (!EXPECT_RC(dat_lmr_free(cm.h), DAT_SUCCESS))
        goto out;
    cm.h = DAT_HANDLE_NULL;
    /* From here on nothing may write the buffer: overwrite it, last page first (against the
     * direction a copy runs), then look for the peer's bytes. */
    for (size_t off = LINGER_LEN; off > 0; off -= 4096)
        memset(cm.buf + off - 4096, 0x11, 4096);
    dx_sleep_ms(300);
    size_t stray = 0;
    for (size_t k = 0; k < LINGER_LEN; k++)
        stray += cm.buf[k] != 0x11;
    EXPECT(stray == 0, "%zu bytes written into the sink after dat_lmr_free returned (status %u)", stray, (unsigned)d.status);
out:
    mr_drop(&sm);
    mr_drop(&cm);
    pair_down(&p);
}

void case_rdma_read_abrupt_free(void)
{
    read_then_disconnect(0);
}

/* The same with the target ending the connection while it copies: its DISCONNECT reached us
 * before its copy was over (12 to 15 MiB written after dat_lmr_free returned, 4 of 4 runs)
 * until a disconnect waited for the copy it was making. */
void case_rdma_read_target_disconnects(void)
{
    read_then_disconnect(1);
}

/* ---- a service point freed from inside its own delivery ---------------------------------- */

static DAT_IA_HANDLE agent_ia;
static atomic_int agent_closed; /* 1 + the dat_ia_close return code's top bit, once it returned */

static void close_in_agent(DAT_PVOID instance, DAT_EVD_HANDLE evd)
{
    (void)instance;
    (void)evd;
    DAT_IA_HANDLE ia = agent_ia;
    agent_ia = DAT_HANDLE_NULL;
    if (ia != DAT_HANDLE_NULL)
        atomic_store(&agent_closed, dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) == DAT_SUCCESS ? 1 : 2);
}

/* The consumer closes the listening IA from the proxy agent of the CR EVD's CNO, which runs in
 * the thread delivering the connection request to the PSP: the close frees the PSP inside its
 * own delivery, and must neither wait for itself nor leave the request unanswered. */
void case_conn_ia_close_in_agent(void)
{
    struct node s, c;
    DAT_EP_HANDLE ce;
    DAT_CNO_HANDLE cno;
    DAT_EVENT ev;
    memset(&c, 0, sizeof c);
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) || !ep_make(&c, NULL, &ce) ||
        !node_listen(&s, dx_port(0)))
        goto out;
    DAT_OS_WAIT_PROXY_AGENT a = {NULL, close_in_agent};
    if (!EXPECT_RC(dat_cno_create(s.ia, a, &cno), DAT_SUCCESS) || !EXPECT_RC(dat_evd_modify_cno(s.cr, cno), DAT_SUCCESS))
        goto out;
    agent_ia = s.ia;
    if (!EXPECT_RC(dat_ep_connect(ce, dx_loopback(0), s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS))
        goto out;
    double t0 = dx_now();
    while (atomic_load(&agent_closed) == 0 && dx_now() - t0 < 5.0)
        dx_sleep_ms(2);
    if (EXPECT(atomic_load(&agent_closed) != 0, "dat_ia_close in the proxy agent did not return within 5 s"))
        EXPECT(atomic_load(&agent_closed) == 1, "dat_ia_close in the proxy agent failed");
    else
        goto hang;
    s.ia = DAT_HANDLE_NULL;
    /* The request is answered (refused), not left to the connect's timeout. */
    if (EXPECT_RC(wait_ev(c.conn, 4000, &ev), DAT_SUCCESS))
        EXPECT(ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED, "connected to a closed IA");
out:
    node_close(&c);
    node_close(&s);
    return;
hang:
    /* The IA is stuck in its close: leave it (the case's process ends). */
    node_close(&c);
}
