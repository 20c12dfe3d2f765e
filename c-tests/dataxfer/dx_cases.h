/* The case functions of dxtest, one per rule (see dxtest.c for the table). */
#ifndef DX_CASES_H
#define DX_CASES_H

/* EVD and CNO (dx_evd.c) */
void case_evd_qlen(void);
void case_evd_dequeue_empty(void);
void case_evd_wait_timeout(void);
void case_evd_wait_threshold(void);
void case_evd_wait_event_null(void);
void case_evd_second_waiter(void);
void case_evd_unwaitable(void);
void case_evd_unwaitable_brief(void);
void case_evd_wait_queued(void);
void case_evd_wait_timeout_woken(void);
void case_evd_post_se(void);
void case_evd_post_se_full(void);
void case_evd_resize_below(void);
void case_evd_overflow(void);
void case_evd_free_in_use(void);
void case_cno_wait_timeout(void);
void case_cno_trigger(void);
void case_cno_proxy_agent(void);
void case_cno_free_in_use(void);

/* connections (dx_conn.c) */
void case_conn_no_listener(void);
void case_conn_reject_pdata(void);
void case_conn_accept_pdata_256(void);
void case_conn_pdata_257(void);
void case_conn_timeout(void);
void case_conn_disconnect_graceful(void);
void case_conn_peer_killed(void);
void case_conn_ep_free_flushes(void);
void case_conn_reset_reports_sends(void);
void case_conn_connect_connected(void);
void case_conn_established_order(void);
void case_conn_passive_sends_first(void);

/* service points (dx_psp.c) */
void case_conn_psp_provider_flood(void);
void case_conn_psp_provider_flood_ud(void);

/* dat_cr_handoff (dx_handoff.c) */
void case_conn_cr_handoff(void);

/* service points' creation and free racing requests (dx_sprace.c) */
void case_conn_sp_create_race_psp(void);
void case_conn_sp_create_race_provider(void);
void case_conn_sp_create_race_rsp(void);
void case_conn_sp_free_race_psp(void);
void case_conn_sp_free_race_rsp(void);
void case_conn_sp_close_race(void);
void case_conn_sp_free_stress(void);

/* requests the peer moves itself, flushed by a disconnect (dx_linger.c) */
void case_rdma_read_abrupt_free(void);
void case_rdma_read_target_disconnects(void);
void case_conn_ia_close_in_agent(void);

/* shared-memory registrations (dx_shm.c) */
void case_shm_write_read(void);
void case_shm_rkey_bounds(void);
void case_shm_rkey_freed(void);
void case_shm_rkey_no_write(void);
void case_shm_small_rkey_bounds(void);
void case_shm_small_rkey_freed(void);
void case_shm_small_rkey_no_write(void);
void case_shm_small_writes(void);
void case_shm_small_revoke_race(void);

/* data and RMR (dx_data.c) */
void case_data_send_recv_3seg(void);
void case_data_idle_and_recv_query(void);
void case_data_suppress_unsignalled(void);
void case_data_rdma_write_read(void);
void case_rdma_zero_based(void);
void case_rdma_rkey_invalid(void);
void case_rdma_rkey_bounds(void);
void case_rdma_rkey_no_write(void);
void case_rdma_rkey_freed(void);
void case_rdma_read_sink_rkey(void);
void case_rdma_read_sink_tag(void);
void case_local_lkey_invalid(void);
void case_local_outside_lmr(void);
void case_local_other_pz(void);
void case_recv_too_short(void);
void case_post_too_many(void);
void case_post_too_many_iov(void);
void case_rmr_bind_write(void);
void case_rmr_outside_window(void);
void case_rmr_rebind(void);
void case_rmr_other_ep(void);
void case_rmr_lmr_free_bound(void);
void case_rmr_unbind(void);

/* IB extensions (dx_ext.c) */
void case_ext_write_immed(void);
void case_ext_cmp_and_swap(void);
void case_ext_fetch_and_add(void);
void case_ext_atomic_no_priv(void);
void case_ext_atomic_concurrent(void);

/* SRQ, threads, IPv6 (dx_misc.c) */
void case_srq_create_post_query(void);
void case_srq_stale_key(void);
void case_srq_ep_receive(void);
void case_srq_low_watermark(void);
void case_srq_free_in_use(void);
void case_srq_ep_high_watermark(void);
void case_srq_race_last_receive(void);
void case_threads_four_eps(void);
void case_ipv6_soft6(void);

/* DAT semantics: solicited wait, EP watermarks, connect timeout 0, passive path (dx_sem.c) */
void case_sem_solicited_wait(void);
void case_sem_ep_watermark(void);
void case_sem_connect_timeout_zero(void);
void case_sem_passive_path(void);

/* the counters extension and DAT2_STATS (dx_counters.c) */
void case_counters_traffic(void);
void case_counters_start_stop(void);

/* a connect past RLIMIT_NOFILE (dx_limits.c) */
void case_conn_descriptor_limit(void);
void case_conn_scale(void);
void case_conn_scale_psps(void);

/* the progress engine's wake-ups (dx_engine.c) */
void case_engine_drain_after_read(void);
void case_engine_close_in_agent(void);
void case_engine_bulk_write_fair(void);
void case_engine_free_in_agent_cma(void);
void case_engine_lmr_free_in_agent_cma(void);

/* sends placed into the peer's receive (dx_placed.c) */
void case_send_placed_in_order(void);
void case_send_placed_engine_busy(void);
void case_send_placed_lmr_free(void);
void case_send_placed_disconnect(void);
void case_send_placed_ep_reuse(void);
void case_send_placed_write_imm(void);
void case_send_placed_threads(void);

/* connection qualifiers on the IA's port (dx_qual.c) */
void case_qual_high_bits_two_psps(void);
void case_qual_above_16_bits(void);
void case_qual_no_service_point(void);
void case_qual_host_only(void);
void case_qual_ia_port_greets(void);
void case_qual_ia_open_out_of_descriptors(void);
void case_qual_two_ias_one_qualifier(void);

#endif
