/*
 * The unreliable datagram (UD) service of the IB extensions (<dat2/dat_ib_extensions.h>), on
 * the built-in dat2-soft provider or the IA DAT2_TEST_IA names: UD EPs and their attributes,
 * address resolution through dat_ep_connect / dat_cr_accept and the UD connection events,
 * dat_ib_post_send_ud and UD receives (GRH, boundaries, truncation, drops, the size limit, an
 * SRQ), the release of address handles and connection records (dat_ib_ud_ah_free,
 * dat_ib_ud_cm_free) with their exact codes, and the operations a UD EP refuses.
 *
 *   udtest list     print the case names, one a line
 *   udtest NAME     run one case: prints "PASS ud:NAME", "FAIL ud:NAME why" or "SKIP ud:NAME why"
 *   udtest all      run every case in this one process (for development)
 *
 * (the runner of c-tests/common/harness.c). Each case opens two IAs in this process, a
 * "server" and a "client" with one UD EP each at least, joined over loopback. On the soft
 * device the server's IA is "ud-soft2", a dat.conf entry of the soft device on 127.0.0.2 that
 * run.sh writes (by hand: DAT_OVERRIDE=build/test-out/plain/ud/ud.conf udtest NAME), so that
 * sender and receiver have different addresses in a datagram's GRH.
 *
 * An IA whose provider reports DAT_IB_UD=FALSE has no UD: the cases skip, saying so, except
 * no_ud_refused, which checks that a UD EP is then refused, and attributes, which on dat2-soft
 * requires UD (DAT_IB_UD=TRUE, DAT2_UD_MAX_MESSAGE=4096). A library that does not report
 * DAT_IB_UD at all fails them.
 *
 * Each case uses the TCP ports DX_PORT_BASE + 8 * (its index) + 0..7 (DX_PORT_BASE defaults to
 * 35000 here).
 */
#include "ud.h"

#include <stdlib.h>

#include "ud_cases.h"

enum { NEEDS_UD = 0, OWN_CHECK = 1 };

#define CASE(n) {#n, case_##n, NEEDS_UD}
#define CASE_OWN(n) {#n, case_##n, OWN_CHECK}

static const struct harness_case cases[] = {
    CASE_OWN(attributes),
    CASE_OWN(no_ud_refused),
    CASE(resolve_events),
    CASE(round_trip_grh),
    CASE(boundaries),
    CASE(truncation),
    CASE(drop_no_receive),
    CASE(max_size),
    CASE(ah_free_codes),
    CASE(cm_free_codes),
    CASE(free_bad_handles),
    CASE(stale_ah),
    CASE(ah_shared_in_pz),
    CASE(refused_ops),
    CASE(srq),
    CASE(reject),
    CASE(modify_request_evd),
    CASE(unreachable),
    CASE(accept_wrong_service),
    CASE(many_resolutions),
    CASE(many_peers),
    CASE(many_eps_no_threads),
    CASE(resolutions_no_threads),
};

/* The ports of the case's slot; a case that needs UD is skipped on an IA whose provider says
 * it has none (DAT_IB_UD=FALSE). A provider that does not say (no DAT_IB_UD attribute) is not
 * skipped: the case then fails where it asks for UD. */
static void prepare(const struct harness_case *c, size_t index)
{
    dx_slot = (int)index;
    if (c->arg != NEEDS_UD)
        return;
    const char *names[2] = {ud_ia_s(), ud_ia_c()};
    for (int k = 0; k < 2; k++) {
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
        unsigned long max;
        DAT_RETURN rc = dat_ia_openv((DAT_NAME_PTR)names[k], 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_TRUE);
        if (rc != DAT_SUCCESS) {
            harness_fail(__LINE__, "dat_ia_open of %s returned 0x%08x%s", names[k], (unsigned)rc,
                         k == 0 && dx_on_soft_device() ? " (the soft device on 127.0.0.2: run with DAT_OVERRIDE naming ud.conf, see run.sh)"
                                                       : "");
            return;
        }
        int ud = ud_support(ia, &max);
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        if (ud == 0) {
            harness_skip("%s reports DAT_IB_UD=FALSE: no UD", names[k]);
            return;
        }
    }
}

static const struct harness_group group = {"ud", cases, sizeof cases / sizeof cases[0], prepare, NULL};

int main(int argc, char **argv)
{
    const char *base = getenv("DX_PORT_BASE");
    dx_port_base = base && atoi(base) > 0 ? atoi(base) : 35000;
    return harness_main(argc, argv, &group);
}
