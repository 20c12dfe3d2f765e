/* The case functions of udtest (see udtest.c for the table). */
#ifndef UD_CASES_H
#define UD_CASES_H

/* attributes, resolution, releasing (ud_cm.c) */
void case_attributes(void);
void case_no_ud_refused(void);
void case_resolve_events(void);
void case_reject(void);
void case_modify_request_evd(void);
void case_unreachable(void);
void case_accept_wrong_service(void);
void case_many_resolutions(void);
void case_many_peers(void);
void case_many_eps_no_threads(void);
void case_resolutions_no_threads(void);
void case_ah_free_codes(void);
void case_cm_free_codes(void);
void case_free_bad_handles(void);

/* datagrams (ud_data.c) */
void case_round_trip_grh(void);
void case_boundaries(void);
void case_truncation(void);
void case_drop_no_receive(void);
void case_max_size(void);
void case_stale_ah(void);
void case_refused_ops(void);
void case_srq(void);
void case_ah_shared_in_pz(void);

#endif
