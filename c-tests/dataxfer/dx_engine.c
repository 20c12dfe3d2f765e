/* The soft device's progress engine (src/device/soft/engine.rs, qp/reader.rs): wake-ups that
 * a consumer call leaves for the engine must not be lost. */
#include "dx.h"

#include <stdlib.h>
#include <string.h>

/* A send that came before any receive is held (stalled); the consumer then posts a large RDMA
 * READ and, while its response lands piece by piece (each piece under the QP's `exec`), posts
 * one receive. The receive's post finds `exec` taken and leaves the drain to its holder: the
 * held send must then complete into that receive, with nothing more from the peer. Over TCP
 * (the _tcp rerun) the response lands in pieces; the receive is posted at a different moment
 * of the landing each round. */
void case_engine_drain_after_read(void)
{
    enum { ROUNDS = 24, BIG = 8 << 20 };
    struct pair p;
    struct mr sm = {0}, cm = {0}, sb = {0}, rb = {0};
    DAT_DTO_COMPLETION_EVENT_DATA d;
    if (!pair_up(&p, dx_port(0), NULL, NULL, 16) || !mr_make(&p.s, p.s.pz, BIG, PRIV_ALL, &sm) ||
        !mr_make(&p.c, p.c.pz, BIG, PRIV_ALL, &cm) || !mr_make(&p.s, p.s.pz, 4096, PRIV_ALL, &sb) ||
        !mr_make(&p.c, p.c.pz, 4096, PRIV_ALL, &rb))
        goto out;
    fill(sm.buf, BIG, 5);
    for (int k = 0; k < ROUNDS; k++) {
        DAT_LMR_TRIPLET st = lt(&sb, 0, 8);
        /* The send travels ahead of the read's response on the same stream: it is held. */
        if (!EXPECT_RC(dat_ep_post_send(p.se, 1, &st, ck(10 + (uint64_t)k), DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS))
            break;
        DAT_LMR_TRIPLET rd = lt(&cm, 0, BIG);
        DAT_RMR_TRIPLET r = rt(&sm, 0, BIG);
        if (!EXPECT_RC(dat_ep_post_rdma_read(p.ce, 1, &rd, ck(100 + (uint64_t)k), &r, DAT_COMPLETION_DEFAULT_FLAG),
                       DAT_SUCCESS))
            break;
        double until = dx_now() + (k % 8) * 0.0005;
        while (dx_now() < until)
            ;
        if (!post_recv1(p.ce, &rb, 0, 64, 200 + (uint64_t)k))
            break;
        if (!WAIT_DTO(p.c.req, &d) || !EXPECT(d.status == DAT_DTO_SUCCESS, "round %d: read status %u", k, (unsigned)d.status))
            break;
        DAT_EVENT ev;
        DAT_RETURN rc = wait_ev(p.c.rcv, 3000, &ev);
        if (!EXPECT(rc == DAT_SUCCESS, "round %d: the held send never completed into the receive posted meanwhile "
                                       "(dat_evd_wait 0x%08x)", k, (unsigned)rc))
            break;
        if (!WAIT_DTO(p.s.req, &d))
            break;
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    mr_drop(&sb);
    mr_drop(&rb);
    pair_down(&p);
}
