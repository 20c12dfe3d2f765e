/* A process out of file descriptors: every dat2-soft connection holds one, so a connect past
 * RLIMIT_NOFILE fails with a connection event, and DAT_DBG_TYPE's message names the limit and
 * how to raise it. */
#include "dx.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dx_cases.h"

void case_conn_descriptor_limit(void)
{
    struct node c;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    if (!dx_on_soft_device()) {
        harness_skip("the soft device's descriptors only");
        return;
    }
    /* run.sh gives this case DAT_DBG_TYPE=0x1 and DAT_DBG_DEST=1 (stdout). */
    if (!node_open(&c, PROVIDER, 16, 16))
        return;
    if (!ep_make(&c, NULL, &ep))
        goto out;
    char path[] = "/tmp/dx-nofile-XXXXXX";
    int log = mkstemp(path);
    if (!EXPECT(log >= 0, "mkstemp failed"))
        goto out;
    unlink(path);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(log, STDOUT_FILENO);
    /* The lowest free descriptor: with the soft limit there, the next socket() fails. */
    int lowest = dup(STDERR_FILENO);
    close(lowest);
    struct rlimit before, low;
    getrlimit(RLIMIT_NOFILE, &before);
    low = before;
    low.rlim_cur = (rlim_t)lowest;
    int lowered = setrlimit(RLIMIT_NOFILE, &low) == 0;
    DAT_RETURN rc = dat_ep_connect(ep, dx_loopback(0), dx_port(0), 5000000, 0, NULL, DAT_QOS_BEST_EFFORT,
                                   DAT_CONNECT_DEFAULT_FLAG);
    /* Polled, not waited for: a wait must not need a descriptor either way. */
    DAT_EVENT ev;
    DAT_EVENT_NUMBER got = 0;
    double t0 = dx_now();
    while (rc == DAT_SUCCESS && dx_now() - t0 < 5.0) {
        if (dat_evd_dequeue(c.conn, &ev) == DAT_SUCCESS) {
            got = ev.event_number;
            break;
        }
        dx_sleep_ms(5);
    }
    setrlimit(RLIMIT_NOFILE, &before);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    char text[8192] = "";
    ssize_t n = pread(log, text, sizeof text - 1, 0);
    close(log);
    text[n > 0 ? n : 0] = 0;
    EXPECT(lowered, "cannot lower RLIMIT_NOFILE to %d", lowest);
    EXPECT_RC(rc, DAT_SUCCESS);
    EXPECT(got == DAT_CONNECTION_EVENT_UNREACHABLE, "the connect past the limit got event 0x%x, expected UNREACHABLE",
           (unsigned)got);
    EXPECT(strstr(text, "RLIMIT_NOFILE") && strstr(text, "ulimit -n"),
           "no DAT_DBG_TYPE message naming RLIMIT_NOFILE and ulimit -n; the log had: %.300s", text);
out:
    if (ep != DAT_HANDLE_NULL)
        EXPECT_RC(dat_ep_free(ep), DAT_SUCCESS);
    node_close(&c);
}
