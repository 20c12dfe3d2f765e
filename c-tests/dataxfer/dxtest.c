/*
 * The data path of the built-in dat2-soft provider: EVDs, CNOs, connections, sends,
 * receives, RDMA, protection errors, RMRs, the IB extensions (the counters among them), SRQs,
 * threads, IPv6, and the semantics of solicited wait, EP watermarks, connect timeouts and the passive side's path.
 *
 *   dxtest list     print the case names, one a line
 *   dxtest NAME     run one case: prints "PASS dataxfer:NAME", "FAIL dataxfer:NAME why"
 *                   or "SKIP dataxfer:NAME why"
 *   dxtest all      run every case in this one process (for development)
 *
 * (the runner of c-tests/common/harness.c). Every failed check is printed as "# line N: ..."
 * into the case's log; the verdict names the first.
 *
 * Most cases open two IAs in one process, a listening "server" and a connecting "client",
 * joined over loopback TCP; a few fork peer processes. Case names ending in _tcp rerun a
 * data case with DAT2_SOFT_CMA=0, so that payloads travel over the socket instead of by
 * cross-memory attach. Each case uses the TCP ports DX_PORT_BASE + 8 * (its index) + 0..7
 * (DX_PORT_BASE defaults to 33000).
 *
 * DAT2_TEST_IA names another IA to run the cases on (tests/vm/ctests.sh sets it in the VM);
 * the _tcp reruns and the IPv6 case, which are about the soft device, are skipped there.
 */
#include "dx.h"

#include <stdlib.h>

#include "dx_cases.h"

/* arg: 1 for a rerun with DAT2_SOFT_CMA=0 */
#define CASE(n) {#n, case_##n, 0}
#define CASE_TCP(n) {#n "_tcp", case_##n, 1}

static const struct harness_case cases[] = {
    CASE(evd_qlen),
    CASE(evd_dequeue_empty),
    CASE(evd_wait_timeout),
    CASE(evd_wait_threshold),
    CASE(evd_wait_event_null),
    CASE(evd_second_waiter),
    CASE(evd_unwaitable),
    CASE(evd_unwaitable_brief),
    CASE(evd_wait_queued),
    CASE(evd_wait_timeout_woken),
    CASE(evd_post_se),
    CASE(evd_post_se_full),
    CASE(evd_resize_below),
    CASE(evd_overflow),
    CASE(evd_free_in_use),
    CASE(cno_wait_timeout),
    CASE(cno_trigger),
    CASE(cno_proxy_agent),
    CASE(cno_free_in_use),
    CASE(conn_no_listener),
    CASE(conn_reject_pdata),
    CASE(conn_accept_pdata_256),
    CASE(conn_pdata_257),
    CASE(conn_timeout),
    CASE(conn_disconnect_graceful),
    CASE(conn_peer_killed),
    CASE(conn_ep_free_flushes),
    CASE(conn_reset_reports_sends),
    CASE(conn_connect_connected),
    CASE(conn_established_order),
    CASE(conn_passive_sends_first),
    CASE(data_send_recv_3seg),
    CASE(data_idle_and_recv_query),
    CASE_TCP(data_send_recv_3seg),
    CASE(data_suppress_unsignalled),
    CASE(data_rdma_write_read),
    CASE_TCP(data_rdma_write_read),
    CASE(rdma_zero_based),
    CASE_TCP(rdma_zero_based),
    CASE(rdma_rkey_invalid),
    CASE(rdma_rkey_bounds),
    CASE_TCP(rdma_rkey_bounds),
    CASE(rdma_rkey_no_write),
    CASE(rdma_rkey_freed),
    CASE(rdma_read_sink_rkey),
    CASE(rdma_read_sink_tag),
    CASE(shm_write_read),
    CASE_TCP(shm_write_read),
    CASE(shm_rkey_bounds),
    CASE(shm_rkey_freed),
    CASE(shm_rkey_no_write),
    CASE(shm_small_rkey_bounds),
    CASE(shm_small_rkey_freed),
    CASE(shm_small_rkey_no_write),
    CASE(shm_small_writes),
    CASE_TCP(shm_small_writes),
    CASE(shm_small_revoke_race),
    CASE(local_lkey_invalid),
    CASE(local_outside_lmr),
    CASE(local_other_pz),
    CASE(recv_too_short),
    CASE(post_too_many),
    CASE(post_too_many_iov),
    CASE(rmr_bind_write),
    CASE(rmr_outside_window),
    CASE(rmr_rebind),
    CASE(rmr_other_ep),
    CASE(rmr_lmr_free_bound),
    CASE(rmr_unbind),
    CASE(ext_write_immed),
    CASE_TCP(ext_write_immed),
    CASE(ext_cmp_and_swap),
    CASE(ext_fetch_and_add),
    CASE(ext_atomic_no_priv),
    CASE(ext_atomic_concurrent),
    CASE(srq_create_post_query),
    CASE(srq_stale_key),
    CASE(srq_ep_receive),
    CASE(srq_low_watermark),
    CASE(srq_free_in_use),
    CASE(threads_four_eps),
    CASE_TCP(threads_four_eps),
    CASE(ipv6_soft6),
    CASE(srq_ep_high_watermark),
    CASE(sem_solicited_wait),
    CASE_TCP(sem_solicited_wait),
    CASE(sem_ep_watermark),
    CASE(sem_connect_timeout_zero),
    CASE(sem_passive_path),
    CASE_TCP(sem_passive_path),
    CASE(conn_psp_provider_flood),
    CASE(conn_psp_provider_flood_ud),
    CASE(srq_race_last_receive),
    CASE_TCP(srq_race_last_receive),
    CASE(counters_traffic),
    CASE_TCP(counters_traffic),
    CASE(counters_start_stop),
    CASE(conn_sp_create_race_psp),
    CASE(conn_sp_create_race_provider),
    CASE(conn_sp_create_race_rsp),
    CASE(conn_sp_free_race_psp),
    CASE(conn_sp_free_race_rsp),
    CASE(conn_sp_close_race),
    CASE(conn_sp_free_stress),
    CASE(rdma_read_abrupt_free),
    CASE(conn_descriptor_limit),
    CASE(conn_scale),
    CASE(conn_scale_psps),
    CASE(rdma_read_target_disconnects),
    CASE(conn_ia_close_in_agent),
    CASE(conn_cr_handoff),
    CASE(engine_drain_after_read),
    CASE_TCP(engine_drain_after_read),
    CASE(engine_close_in_agent),
    CASE_TCP(engine_close_in_agent),
    CASE_TCP(engine_bulk_write_fair),
    CASE(engine_free_in_agent_cma),
    CASE(engine_lmr_free_in_agent_cma),
    CASE(send_placed_in_order),
    CASE_TCP(send_placed_in_order),
    CASE(send_placed_engine_busy),
    CASE_TCP(send_placed_engine_busy),
    CASE(send_placed_lmr_free),
    CASE(send_placed_disconnect),
    CASE(send_placed_ep_reuse),
    CASE(send_placed_write_imm),
    CASE_TCP(send_placed_write_imm),
    CASE(send_placed_threads),
    CASE_TCP(send_placed_threads),
    CASE(qual_high_bits_two_psps),
    CASE(qual_above_16_bits),
    CASE(qual_no_service_point),
    CASE(qual_host_only),
    CASE(qual_ia_port_greets),
    CASE(qual_ia_open_out_of_descriptors),
    CASE(qual_two_ias_one_qualifier),
};

/* Each case has the TCP ports of its slot (its index); a _tcp rerun sets DAT2_SOFT_CMA=0, and
 * the others unset it. */
static void prepare(const struct harness_case *c, size_t index)
{
    dx_slot = (int)index;
    if (c->arg && !dx_on_soft_device()) {
        harness_skip("DAT2_SOFT_CMA=0 reruns concern the soft device only (IA %s)", dx_ia_name());
        return;
    }
    if (c->arg)
        setenv("DAT2_SOFT_CMA", "0", 1);
    else
        unsetenv("DAT2_SOFT_CMA");
}

static const struct harness_group group = {"dataxfer", cases, sizeof cases / sizeof cases[0], prepare, NULL};

int main(int argc, char **argv)
{
    const char *base = getenv("DX_PORT_BASE");
    if (base && atoi(base) > 0)
        dx_port_base = atoi(base);
    return harness_main(argc, argv, &group);
}
