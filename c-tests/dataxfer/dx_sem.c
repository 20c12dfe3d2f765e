/*
 * Semantics DAT defines beyond moving data: solicited wait on a receive EVD, an EP's soft and
 * hard high watermarks, a connect timeout of 0, and the data path the passive side reports
 * once its connection is established.
 */
#include "dx.h"

#include <pthread.h>
#include <stdlib.h>

#include "dx_cases.h"

#define RC_ARG3_ 0x80060027u
#define RC_STATE_EVD_CONFIG_SOLICITED 0x8007004cu /* 76 */

/* ---- connect timeout 0 -------------------------------------------------------------- */

void case_sem_connect_timeout_zero(void)
{
    struct node s, c;
    DAT_EP_HANDLE se, ce, ce2;
    DAT_EP_STATE state;
    DAT_EVENT ev;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) || !ep_make(&s, NULL, &se) ||
        !ep_make(&c, NULL, &ce) || !ep_make(&c, NULL, &ce2) || !node_listen(&s, dx_port(0)))
        goto out;
    /* no connection in no time: refused at once, the timeout being the 4th argument */
    EXPECT_RC(dat_ep_connect(ce, dx_loopback(0), s.port, 0, 0, NULL, DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG),
              RC_ARG4);
    if (EXPECT_RC(dat_ep_get_status(ce, &state, NULL, NULL), DAT_SUCCESS))
        EXPECT(state == DAT_EP_STATE_UNCONNECTED, "EP state %d after the refused connect, expected 0", (int)state);
    dx_sleep_ms(100);
    EXPECT_EMPTY(c.conn, "client connection EVD after the refused connect");
    EXPECT_EMPTY(s.cr, "server CR EVD after the refused connect");
    /* the EP is still usable */
    if (!connect_eps(&s, se, &c, ce, 0))
        goto out;
    /* dat_ep_dup_connect: the timeout is the 3rd argument */
    EXPECT_RC(dat_ep_dup_connect(ce2, ce, 0, 0, NULL, DAT_QOS_BEST_EFFORT), RC_ARG3_);
    if (EXPECT_RC(dat_ep_get_status(ce2, &state, NULL, NULL), DAT_SUCCESS))
        EXPECT(state == DAT_EP_STATE_UNCONNECTED, "EP state %d after the refused dup_connect, expected 0", (int)state);
    dx_sleep_ms(100);
    EXPECT_RC(dat_evd_dequeue(s.cr, &ev), RC_QUEUE_EMPTY);
    /* the smallest timeout there is, 1 us, is accepted (and the outcome is an event) */
    if (EXPECT_RC(dat_ep_dup_connect(ce2, ce, 1, 0, NULL, DAT_QOS_BEST_EFFORT), DAT_SUCCESS)) {
        /* answer a request if one arrives, so the client's EP ends either way */
        if (wait_ev(s.cr, 1000, &ev) == DAT_SUCCESS && ev.event_number == DAT_CONNECTION_REQUEST_EVENT)
            dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL);
        DAT_EVENT_NUMBER num = wait_conn_at(__LINE__, c.conn, WAIT_MS, &ev);
        EXPECT(num == DAT_CONNECTION_EVENT_TIMED_OUT || num == DAT_CONNECTION_EVENT_PEER_REJECTED ||
                   num == DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
               "event 0x%x after a 1 us connect", (unsigned)num);
    }
out:
    node_close(&c);
    node_close(&s);
}

/* ---- the passive side's data path ---------------------------------------------------- */

static const char *path_of(DAT_EP_HANDLE ep)
{
    DAT_EP_PARAM param;
    memset(&param, 0, sizeof param);
    if (!EXPECT_RC(dat_ep_query(ep, DAT_EP_FIELD_EP_ATTR_ALL, &param), DAT_SUCCESS))
        return "?";
    for (DAT_COUNT i = 0; i < param.ep_attr.ep_provider_specific_count; i++)
        if (strcmp(param.ep_attr.ep_provider_specific[i].name, "DAT2_SOFT_PATH") == 0)
            return param.ep_attr.ep_provider_specific[i].value;
    return "(missing)";
}

void case_sem_passive_path(void)
{
    /* both nodes are in this process, which reaches its own memory: cross-memory attach,
     * unless DAT2_SOFT_CMA=0 turns it off (the _tcp run) */
    const char *cma_env = getenv("DAT2_SOFT_CMA");
    const char *want = cma_env && strcmp(cma_env, "0") == 0 ? "tcp" : "cma";
    struct node s, c;
    memset(&s, 0, sizeof s);
    memset(&c, 0, sizeof c);
    if (!node_open(&s, PROVIDER, 16, 16) || !node_open(&c, PROVIDER, 16, 16) || !node_listen(&s, dx_port(0)))
        goto out;
    for (int k = 0; k < 5; k++) {
        DAT_EP_HANDLE se, ce;
        DAT_EVENT ev;
        if (!ep_make(&s, NULL, &se) || !ep_make(&c, NULL, &ce))
            break;
        if (!EXPECT_RC(dat_ep_connect(ce, dx_loopback(0), s.port, 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                      DAT_CONNECT_DEFAULT_FLAG),
                       DAT_SUCCESS) ||
            !EXPECT_RC(wait_ev(s.cr, WAIT_MS, &ev), DAT_SUCCESS) ||
            !EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, se, 0, NULL), DAT_SUCCESS))
            break;
        /* the moment the passive side reports ESTABLISHED, its path is final */
        if (wait_conn_at(__LINE__, s.conn, WAIT_MS, &ev) != DAT_CONNECTION_EVENT_ESTABLISHED)
            break;
        const char *passive = path_of(se);
        if (wait_conn_at(__LINE__, c.conn, WAIT_MS, &ev) != DAT_CONNECTION_EVENT_ESTABLISHED)
            break;
        const char *active = path_of(ce);
        EXPECT(strcmp(passive, want) == 0, "connection %d: the passive side reports DAT2_SOFT_PATH=%s at ESTABLISHED, "
               "expected %s", k, passive, want);
        EXPECT(strcmp(active, want) == 0, "connection %d: the active side reports DAT2_SOFT_PATH=%s, expected %s", k,
               active, want);
        EXPECT(strcmp(path_of(se), passive) == 0, "connection %d: the passive side's path changed after ESTABLISHED", k);
        dat_ep_disconnect(ce, DAT_CLOSE_ABRUPT_FLAG);
        EXPECT_CONN_END(c.conn, 2000, "client");
        EXPECT_CONN_END(s.conn, 2000, "server");
        EXPECT(strcmp(path_of(se), "none") == 0, "connection %d: DAT2_SOFT_PATH=%s after the end, expected none", k,
               path_of(se));
    }
out:
    node_close(&c);
    node_close(&s);
}
