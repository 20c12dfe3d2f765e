/*
 * What the two sources of aftest share: aftest.c (the cases that free memory with requests
 * outstanding, the peer, the table and main) and stale.c (the cases that post with a freed
 * LMR's lmr_context). One program, one table: main appends stale.c's cases to aftest.c's.
 */
#ifndef AF_H
#define AF_H

#include "harness.h"

#include <stddef.h>

/* Where the peer runs (a case's arg in the table): a thread of this process, another process,
 * another process with DAT2_SOFT_CMA=0, another process with the memory in sealed memfds.
 * stale.c's cases keep both sides in this process: M_TCP and M_SHM there say which path of the
 * soft device they take (DAT2_SOFT_CMA=0; sealed memfds under both sides' LMRs). */
enum mode { M_THREAD, M_FORK, M_TCP, M_SHM };

/* The mode of the case being run (set by aftest.c's prepare, which also skips _tcp and _shm
 * off the soft device and sets DAT2_SOFT_CMA). */
extern enum mode case_mode;

/* stale.c's cases. */
extern const struct harness_case stale_cases[];
extern const size_t stale_ncases;

#endif
