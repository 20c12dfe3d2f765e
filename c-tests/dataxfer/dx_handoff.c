/* dat_cr_handoff on the IA under test: a request that arrived at one PSP is handed to
 * another PSP of the IA and accepted there (dat_cr_handoff(3)).
 *
 * - The handed request arrives on the target PSP's CR EVD, naming that PSP; the old CR
 *   handle is gone; the connection is accepted from there and carries data.
 * - A qualifier no PSP of the IA listens on (one whose PSP was freed), and the request's own
 *   PSP, are refused with DAT_INVALID_PARAMETER naming the qualifier, and the CR stays the
 *   consumer's. */
#include "dx.h"

#include "dx_cases.h"

/* The next event on `evd` is a connection request; its CR, or NULL. */
static DAT_CR_HANDLE next_cr(DAT_EVD_HANDLE evd, DAT_PSP_HANDLE from, const char *where)
{
    DAT_EVENT ev;
    if (!EXPECT_RC(wait_ev(evd, WAIT_MS, &ev), DAT_SUCCESS) ||
        !EXPECT(ev.event_number == DAT_CONNECTION_REQUEST_EVENT, "%s: event 0x%x, expected a request", where,
                (unsigned)ev.event_number))
        return DAT_HANDLE_NULL;
    EXPECT(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle == from, "%s: the request names another PSP",
           where);
    return ev.event_data.cr_arrival_event_data.cr_handle;
}

void case_conn_cr_handoff(void)
{
    struct node s, c;
    DAT_EVD_HANDLE cr2 = DAT_HANDLE_NULL;
    DAT_PSP_HANDLE psp2 = DAT_HANDLE_NULL, gone = DAT_HANDLE_NULL;
    DAT_EP_HANDLE se = DAT_HANDLE_NULL, ce = DAT_HANDLE_NULL;
    /* Qualifiers the system chose (dat_psp_create_any): a fixed port may be some connection's
     * ephemeral one. */
    DAT_CONN_QUAL q2 = 0, q_gone = 0;
    DAT_CR_HANDLE cr;
    DAT_CR_PARAM p;
    struct mr sm, cm;
    DAT_DTO_COMPLETION_EVENT_DATA d;
    memset(&sm, 0, sizeof sm);
    memset(&cm, 0, sizeof cm);
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16))
        goto out;
    if (!EXPECT_RC(dat_evd_create(s.ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr2), DAT_SUCCESS) ||
        !node_listen(&s, dx_port(0)) ||
        !EXPECT_RC(dat_psp_create_any(s.ia, &q2, cr2, DAT_PSP_CONSUMER_FLAG, &psp2), DAT_SUCCESS) ||
        !EXPECT_RC(dat_psp_create_any(s.ia, &q_gone, cr2, DAT_PSP_CONSUMER_FLAG, &gone), DAT_SUCCESS) ||
        !EXPECT_RC(dat_psp_free(gone), DAT_SUCCESS))
        goto out;
    if (!ep_make(&s, NULL, &se) || !ep_make(&c, NULL, &ce) || !mr_make(&s, s.pz, 64, PRIV_ALL, &sm) ||
        !mr_make(&c, c.pz, 64, PRIV_ALL, &cm))
        goto out;
    if (!EXPECT_RC(dat_ep_connect(ce, dx_loopback(0), s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                  DAT_CONNECT_DEFAULT_FLAG),
                   DAT_SUCCESS))
        goto out;
    cr = next_cr(s.cr, s.psp, "first PSP");
    if (cr == DAT_HANDLE_NULL)
        goto out;
    /* Refused: the CR stays valid. */
    EXPECT_RC(dat_cr_handoff(cr, q_gone), RC_ARG2);
    EXPECT_RC(dat_cr_handoff(cr, s.port), RC_ARG2);
    EXPECT_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p), DAT_SUCCESS);
    if (!EXPECT_RC(dat_cr_handoff(cr, q2), DAT_SUCCESS))
        goto out;
    EXPECT_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_CR);
    EXPECT_EMPTY(s.cr, "the first PSP's CR EVD after the handoff");
    cr = next_cr(cr2, psp2, "second PSP");
    if (cr == DAT_HANDLE_NULL)
        goto out;
    memset(&p, 0, sizeof p);
    if (EXPECT_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &p), DAT_SUCCESS))
        EXPECT(p.local_ep_handle == DAT_HANDLE_NULL, "the handed CR names an EP");
    if (!EXPECT_RC(dat_cr_accept(cr, se, 0, NULL), DAT_SUCCESS) || !wait_established(__LINE__, s.conn, se, "server") ||
        !wait_established(__LINE__, c.conn, ce, "client"))
        goto out;
    /* The connection carries a send. */
    if (post_recv1(se, &sm, 0, 64, 7)) {
        DAT_LMR_TRIPLET iov = {.virtual_address = (DAT_VADDR)(uintptr_t)cm.buf, .segment_length = 16, .lmr_context = cm.lkey};
        DAT_DTO_COOKIE ck = {.as_64 = 8};
        fill(cm.buf, 16, 3);
        if (EXPECT_RC(dat_ep_post_send(ce, 1, &iov, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
            WAIT_DTO(c.req, &d) && WAIT_DTO(s.rcv, &d)) {
            EXPECT(d.status == DAT_DTO_SUCCESS && d.transfered_length == 16, "receive: status %d, %llu bytes",
                   (int)d.status, (unsigned long long)d.transfered_length);
            EXPECT(memcmp(sm.buf, cm.buf, 16) == 0, "the received bytes differ from those sent");
        }
    }
out:
    mr_drop(&sm);
    mr_drop(&cm);
    if (psp2 != DAT_HANDLE_NULL)
        EXPECT_RC(dat_psp_free(psp2), DAT_SUCCESS);
    /* The abrupt close frees cr2 with the rest. */
    node_close(&c);
    node_close(&s);
}
