/*
 * Shared declarations of the data path tests (dxtest, and aftest of c-tests/afterfree): the
 * exact codes the rules name, and helpers that build IAs, EPs, connections and registrations
 * on the built-in dat2-soft provider (or the IA named by DAT2_TEST_IA).
 */
#ifndef DX_H
#define DX_H

#define _GNU_SOURCE
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

#include "harness.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <string.h>

/* ---- result bookkeeping: c-tests/common/harness.h (EXPECT, EXPECT_RC, harness_fail...) ---- */

int dx_expect_type(int line, const char *what, DAT_RETURN got, DAT_RETURN want_class_type);

/* The call must return an error whose class and type (the top 16 bits) are `want`. */
#define EXPECT_TYPE(expr, want) dx_expect_type(__LINE__, #expr, (DAT_RETURN)(expr), (DAT_RETURN)(want))

/* ---- exact codes ---------------------------------------------------------- */

#define RC_QUEUE_EMPTY 0x000d0000u /* plain, no class bit: programs compare with == */
#define RC_TIMEOUT 0x800f0000u
#define RC_QUEUE_FULL 0x800e0000u
#define RC_ARG2 0x80060026u
#define RC_ARG3 0x80060027u
#define RC_ARG4 0x80060028u
#define RC_ARG5 0x80060029u
#define RC_STATE 0x80070000u
#define RC_STATE_EP_CONNECTED 0x80070033u /* 51 */
#define RC_STATE_CNO_IN_USE 0x80070043u   /* 67 */
#define RC_STATE_UNWAITABLE 0x80070049u   /* 73 */
#define RC_STATE_EVD_IN_USE 0x8007004au   /* 74 */
#define RC_STATE_EVD_WAITER 0x8007004eu   /* 78 */
#define RC_STATE_LMR_IN_USE 0x80070051u   /* 81 */
#define RC_RESOURCES 0x80030000u          /* class and type only */
#define RC_PARAMETER 0x80060000u          /* class and type only */

/* ---- objects -------------------------------------------------------------- */

/* One IA with a PZ and one EVD of each kind. */
struct node {
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async; /* the IA's own async EVD */
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE req;  /* DTO | RMR_BIND: requests */
    DAT_EVD_HANDLE rcv;  /* DTO: receives */
    DAT_EVD_HANDLE conn; /* CONNECTION */
    DAT_EVD_HANDLE cr;   /* CR */
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL port; /* the PSP's port */
};

/* Two nodes in this process, "s" listening and "c" connecting, with one EP each. */
struct pair {
    struct node s, c;
    DAT_EP_HANDLE se, ce;
};

/* A registration and the buffer under it. */
struct mr {
    DAT_LMR_HANDLE h;
    DAT_LMR_CONTEXT lkey;
    DAT_RMR_CONTEXT rkey;
    unsigned char *buf;
    DAT_VLEN len;
    size_t alloc; /* bytes allocated (len rounded up, plus a page) */
    int shared;   /* the buffer is a shared mapping of a sealed memfd (mr_make_shared) */
};

/* The IA under test: DAT2_TEST_IA when set, else dat2-soft. Cases about the soft device's own
 * facts (its DAT2_SOFT_CMA switch, its IPv6 dat.conf entry) are skipped on any other IA. */
#define SOFT_IA "dat2-soft"
#define PROVIDER dx_ia_name()
const char *dx_ia_name(void);
int dx_on_soft_device(void);
/* The most private data the IA takes (its provider attribute max_private_data_size). */
DAT_COUNT dx_max_pdata(DAT_IA_HANDLE ia);
/* Whether the IA is a verbs device on Soft-RoCE (rxe): some of rxe's reports differ from
 * what an HCA reports, said at each use. */
int dx_on_rxe(DAT_IA_HANDLE ia);
/* Whether the IA's provider attribute `attr` says FALSE (say DAT_IB_CMP_AND_SWAP on iWARP);
 * dx_ia_lacks asks an IA it opens on dx_ia_name() for the time of the call. */
int dx_cma_on(DAT_IA_HANDLE ia);
int dx_lacks(DAT_IA_HANDLE ia, const char *attr);
/* Whether the IA's provider attribute `attr` says TRUE (absent: no). */
int dx_says_true(DAT_IA_HANDLE ia, const char *attr);
int dx_ia_lacks(const char *attr);
/* The same questions of an IA opened on dx_ia_name() for the time of the call: iWARP, and
 * no memory windows (max_rmrs 0). */
int dx_ia_iwarp(void);
int dx_ia_lacks_windows(void);
/* Whether the IA is a verbs IA on iWARP (its DAT2_VERBS_TRANSPORT attribute). */
int dx_iwarp(DAT_IA_HANDLE ia);
/* Whether `status` reports an RDMA write the target refused: REMOTE_ACCESS; on iWARP, where a
 * write completes once it is sent and the target answers with a TERMINATE that ends the
 * connection, also SUCCESS, LOCAL_EP or FLUSHED (the connection's end is checked apart). */
int dx_remote_error(DAT_IA_HANDLE ia, unsigned status);
/* Whether `status` is what a local protection error completes with: LOCAL_PROTECTION, or on
 * rxe a flush (rxe completes the failing request itself as flushed; the connection still ends)
 * or, for a receive whose lkey it refuses, LOCAL_EP; on siw LOCAL_EP. */
int dx_local_protection(DAT_IA_HANDLE ia, unsigned status);
#define PRIV_ALL 0x33u       /* local read/write, remote read/write */
#define PRIV_ALL_ATOMIC 0x73u /* ... and remote atomic */
#define WAIT_MS 5000

extern int dx_port_base;
extern int dx_slot;

/* The k-th TCP port (connection qualifier) of this case. */
DAT_CONN_QUAL dx_port(int k);
double dx_now(void);
void dx_sleep_ms(int ms);
/* This process's threads (/proc/self/task) and open descriptors (/proc/self/fd, counting the
 * one that reads it); -1 if unreadable. */
int dx_threads(void);
int dx_fds(void);
/* Ends a forked peer: a byte on `down_fd` tells it to finish, `seconds` are given to it, then
 * it is killed; reaped either way. */
void dx_reap(int pid, int down_fd, double seconds);
/* Forks a peer process with a pipe `up` from it (the peer writes up[1]) and a pipe `down` to
 * it (the peer reads down[0]); either may be NULL. Returns 0 in the peer, which runs its part
 * and _exits, and the peer's pid in this process, each holding only its own ends; -1 (a
 * failure recorded, no pipe left open) when a pipe or the fork failed. */
pid_t dx_fork_peer(int up[2], int down[2]);

/* Opens a thread-safe IA (node_open_ts: as asked) with its PZ and EVDs. */
int node_open(struct node *n, const char *ia_name, DAT_COUNT req_qlen, DAT_COUNT rcv_qlen);
int node_open_ts(struct node *n, const char *ia_name, DAT_BOOLEAN thread_safe, DAT_COUNT req_qlen, DAT_COUNT rcv_qlen);
void node_close(struct node *n);
/* Listens on `port`, or (when a port of the 33000s range is taken, as an ephemeral port of
 * some connection may be) on a fallback port; n->port is the one used. */
int node_listen(struct node *n, DAT_CONN_QUAL port);
void attr_init(DAT_EP_ATTR *a);
int ep_make(struct node *n, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep);

/* The address a client connects to: 127.0.0.1 (or ::1 with ipv6) on the soft device, the
 * IA's own address (dat_ia_query) on any other IA, whose device may not serve loopback. */
DAT_IA_ADDRESS_PTR dx_loopback(int ipv6);

/* Starts a connect from `ce` to the server's PSP, answers the request on `se` and waits
 * for both ESTABLISHED events. */
int connect_eps(struct node *s, DAT_EP_HANDLE se, struct node *c, DAT_EP_HANDLE ce, int ipv6);
/* Opens both nodes, one EP each (attributes may be NULL), listens on port and connects. */
int pair_up(struct pair *p, DAT_CONN_QUAL port, const DAT_EP_ATTR *sattr, const DAT_EP_ATTR *cattr, DAT_COUNT qlen);
/* pair_up with queues of 16 and a 4096-byte registration (PRIV_ALL) on the client (`cm`) and
 * the server (`sm`). */
int pair_up_mrs(struct pair *p, DAT_CONN_QUAL port, struct mr *cm, struct mr *sm);
/* The two pairs of a case that runs beside a second connection: p (queues of `qlen`) on
 * dx_port(0), and q (pair_up_mrs, `qcm` and `qsm`) on dx_port(1). q is zeroed first, so
 * pair_down(q) is right whatever failed. */
int pairs_up(struct pair *p, DAT_COUNT qlen, struct pair *q, struct mr *qcm, struct mr *qsm);
void pair_down(struct pair *p);

/* Waits up to `ms` for one event. */
DAT_RETURN wait_ev(DAT_EVD_HANDLE evd, int ms, DAT_EVENT *ev);
/* Waits for a DTO completion; returns 1 with it in *d, or records a failure. */
int wait_dto_at(int line, DAT_EVD_HANDLE evd, int ms, DAT_DTO_COMPLETION_EVENT_DATA *d);
#define WAIT_DTO(evd, d) wait_dto_at(__LINE__, evd, WAIT_MS, d)
/* Waits for a connection event; returns its number (0 on none). */
DAT_EVENT_NUMBER wait_conn_at(int line, DAT_EVD_HANDLE evd, int ms, DAT_EVENT *ev);
/* A connection that ended: BROKEN or DISCONNECTED within `ms`. */
int expect_conn_end_at(int line, DAT_EVD_HANDLE evd, int ms, const char *who);
/* The next event on evd is ESTABLISHED for ep (within WAIT_MS). */
int wait_established(int line, DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, const char *who);
#define EXPECT_CONN_END(evd, ms, who) expect_conn_end_at(__LINE__, evd, ms, who)
/* Nothing more is queued on the EVD. */
int expect_empty_at(int line, DAT_EVD_HANDLE evd, const char *what);
#define EXPECT_EMPTY(evd, what) expect_empty_at(__LINE__, evd, what)

/* Registers `len` bytes of a fresh zeroed buffer (page aligned) in `pz`. */
int mr_make(struct node *n, DAT_PZ_HANDLE pz, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv, struct mr *m);
/* The same in a shared mapping of a memfd sealed against shrinking, as programs that keep their
 * buffers in shared memory have them (the soft device then copies between files, shm.rs); the
 * memfd's name is "dx-shm". */
int mr_make_shared(struct node *n, DAT_PZ_HANDLE pz, DAT_VLEN len, DAT_MEM_PRIV_FLAGS priv, struct mr *m);
/* How many mappings of "dx-shm" files this process has (/proc/self/maps). */
int dx_shm_mappings(void);
void mr_drop(struct mr *m);
DAT_LMR_TRIPLET lt(const struct mr *m, size_t off, DAT_SEG_LENGTH len);
DAT_RMR_TRIPLET rt(const struct mr *m, size_t off, DAT_SEG_LENGTH len);
DAT_DTO_COOKIE ck(uint64_t v);
void fill(unsigned char *p, size_t n, unsigned seed);

/* Binds `rmr` over [off, off+len) of m for `ep`; checks the bind completion on `evd`. */
int bind_at(int line, DAT_RMR_HANDLE rmr, const struct mr *m, size_t off, DAT_SEG_LENGTH len, DAT_EP_HANDLE ep,
            DAT_EVD_HANDLE evd, uint64_t cookie, DAT_RMR_CONTEXT *ctx);
#define BIND(rmr, m, off, len, ep, evd, cookie, ctx) bind_at(__LINE__, rmr, m, off, len, ep, evd, cookie, ctx)
/* An RDMA write of `len` bytes from the start of src to `addr` with key `key`; returns its
 * completion status. */
unsigned write_via(int line, DAT_EP_HANDLE ep, DAT_EVD_HANDLE evd, struct mr *src, DAT_VADDR addr, DAT_RMR_CONTEXT key,
                   DAT_SEG_LENGTH len);
#define WRITE_VIA(ep, evd, src, addr, key, len) write_via(__LINE__, ep, evd, src, addr, key, len)
#define ADDR(m, off) ((DAT_VADDR)(uintptr_t)((m)->buf + (off)))

/* The soft device's data path of a connected EP (its DAT2_SOFT_PATH attribute: "cma", "tcp"). */
const char *path_of(DAT_EP_HANDLE ep);

/* Posts one receive of `len` bytes at `off` of m. */
int post_recv1(DAT_EP_HANDLE ep, const struct mr *m, size_t off, DAT_SEG_LENGTH len, uint64_t cookie);

#endif
