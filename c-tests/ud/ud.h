/*
 * Shared declarations of the unreliable datagram (UD) tests (udtest): the exact codes, and
 * helpers that resolve UD peers and move datagrams on two IAs of this process. Built on the
 * dataxfer helpers (c-tests/dataxfer/dx_common.c: nodes, registrations, events).
 */
#ifndef UD_H
#define UD_H

#include "dx.h"

/* ---- exact codes (class | type | subtype, as the library returns them) ----------------- */

#define RC_MODEL (DAT_CLASS_ERROR | DAT_MODEL_NOT_SUPPORTED) /* 0x80090000 */
#define RC_LENGTH (DAT_CLASS_ERROR | DAT_LENGTH_ERROR)       /* 0x80080000 */
#define RC_HANDLE1 0x8005001bu                               /* DAT_INVALID_HANDLE | DAT_INVALID_HANDLE1 */
#define RC_HANDLE_EP 0x8005000cu                             /* DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP */
/* RC_ARG2, RC_ARG3, RC_ARG4: dx.h (DAT_INVALID_PARAMETER | DAT_INVALID_ARGn) */

#define GRH 40 /* the bytes a UD receive gives the global routing header before the payload */

/* ---- the IAs ------------------------------------------------------------------------ */

/* The IA of each side. On the soft device the server side ("s") is the dat.conf entry
 * "ud-soft2", dat2-soft on 127.0.0.2 (run.sh writes it; run udtest by hand with
 * DAT_OVERRIDE=.../ud.conf), and the client side ("c") is dat2-soft on 127.0.0.1, so that a
 * datagram's sender and receiver have different addresses. DAT2_TEST_IA names one IA for both. */
const char *ud_ia_s(void);
const char *ud_ia_c(void);

/* What an IA's provider attributes say about UD: DAT_IB_UD absent (-1), "FALSE" (0), "TRUE" (1);
 * *max gets DAT2_UD_MAX_MESSAGE (0 when absent or not a number). */
int ud_support(DAT_IA_HANDLE ia, unsigned long *max);

/* The IA's own address (dat_ia_query); family AF_UNSPEC when unknown. */
struct sockaddr_storage ud_ia_address(DAT_IA_HANDLE ia);
/* The 16-byte GID a datagram from or to this address carries in its GRH: an IPv4 address as
 * ::ffff:a.b.c.d, an IPv6 one as is. */
void ud_gid_of(const struct sockaddr_storage *a, unsigned char gid[16]);
/* A sockaddr_in or sockaddr_in6 as text (into buf). */
const char *ud_addr_text(const void *sa, char *buf, size_t size);
/* Whether a DAT_IB_ADDR_HANDLE's ia_addr names the address `a` (family and address). */
int ud_same_address(const DAT_SOCK_ADDR6 *ia_addr, const struct sockaddr_storage *a);

/* UD EP attributes: dx's attr_init with the UD service type, max_message_size `max_msg` and no
 * RDMA. */
void ud_attr(DAT_EP_ATTR *a, DAT_VLEN max_msg);
int ud_ep_make(struct node *n, DAT_VLEN max_msg, DAT_EP_HANDLE *ep);

/* ---- resolutions -------------------------------------------------------------------- */

/* What one UD connection event handed out. */
struct ud_peer {
    DAT_EVENT_NUMBER number;
    DAT_EP_HANDLE ep;           /* connect_event_data.ep_handle */
    DAT_IB_EXT_TYPE type;       /* of the extension data */
    DAT_IB_STATUS status;
    DAT_IB_ADDR_HANDLE ah;      /* remote_ah, copied */
    DAT_CONTEXT context;
    DAT_COUNT pdata_size;
    unsigned char pdata[256];   /* the private data it pointed at, copied */
};

/* The extension data of an event. */
const DAT_IB_EXTENSION_EVENT_DATA *ud_ext(const DAT_EVENT *ev);
/* Copies a UD connection event. */
void ud_peer_of(const DAT_EVENT *ev, struct ud_peer *p);

/* Starts a UD resolution of the PSP at `port` of `s` from EP `ce` of `c`, with private data
 * `pdata` (a string, its NUL included). */
int ud_connect_at(int line, struct node *s, DAT_CONN_QUAL port, DAT_EP_HANDLE ce, const char *pdata);
/* Waits for a UD request on s->cr and accepts it on `se` with private data `pdata`. */
int ud_accept_next_at(int line, struct node *s, DAT_EP_HANDLE se, const char *pdata);
/* Waits for a UD ESTABLISHED event on `evd` for `ep` with extension type `type`; copies it to
 * *p and checks what every such event must carry (status, address handle, context). `peer_ia`
 * is the address the peer's IA has (AF_UNSPEC: not checked). */
int ud_wait_established_at(int line, DAT_EVD_HANDLE evd, DAT_EP_HANDLE ep, DAT_IB_EXT_TYPE type,
                           const struct sockaddr_storage *peer_ia, struct ud_peer *p);
/* A whole resolution: `ce` connects to s's PSP (s->port), `se` accepts; *at_c gets the active
 * side's event (its address handle names se), *at_s the passive side's (names ce). The private
 * data ("req", "acc") is checked both ways. */
int ud_resolve_at(int line, struct node *s, DAT_EP_HANDLE se, struct node *c, DAT_EP_HANDLE ce, struct ud_peer *at_s,
                  struct ud_peer *at_c);
#define UD_CONNECT(s, port, ce, pd) ud_connect_at(__LINE__, s, port, ce, pd)
#define UD_ACCEPT_NEXT(s, se, pd) ud_accept_next_at(__LINE__, s, se, pd)
#define UD_WAIT_ESTABLISHED(evd, ep, type, peer_ia, p) ud_wait_established_at(__LINE__, evd, ep, type, peer_ia, p)
#define UD_RESOLVE(s, se, c, ce, at_s, at_c) ud_resolve_at(__LINE__, s, se, c, ce, at_s, at_c)

/* ---- the usual rig: one UD EP on each of two IAs, resolved once -------------------------- */

struct ud_rig {
    struct node s, c;
    DAT_EP_HANDLE se, ce;
    struct mr sm, cm;           /* 64 KiB each, all privileges */
    struct sockaddr_storage sa, ca; /* the IAs' addresses */
    struct ud_peer at_s, at_c;  /* the resolution's events (at_c.ah names se, at_s.ah names ce) */
    unsigned long max;          /* DAT2_UD_MAX_MESSAGE of the server's IA */
};

/* Opens the two IAs (port: the PSP's), one UD EP each with max_message_size `max_msg` (0: the
 * provider's limit), registers memory and, if `resolve`, resolves once. */
int ud_rig_up_at(int line, struct ud_rig *r, DAT_CONN_QUAL port, DAT_VLEN max_msg, int resolve);
#define UD_RIG_UP(r, port, max_msg, resolve) ud_rig_up_at(__LINE__, r, port, max_msg, resolve)
void ud_rig_down(struct ud_rig *r);

/* ---- datagrams ---------------------------------------------------------------------- */

/* Posts a datagram of the bytes at `off`..`off + len` of m to `ah`. */
int ud_send_at(int line, DAT_EP_HANDLE ep, const struct mr *m, size_t off, DAT_SEG_LENGTH len,
               const DAT_IB_ADDR_HANDLE *ah, uint64_t cookie);
#define UD_SEND(ep, m, off, len, ah, cookie) ud_send_at(__LINE__, ep, m, off, len, ah, cookie)
/* Waits for a UD completion (DAT_IB_DTO_EVENT of extension type `type`: DAT_IB_UD_SEND or
 * DAT_IB_UD_RECV, with the matching operation); 1 with the event in *ev. */
int ud_wait_dto_at(int line, DAT_EVD_HANDLE evd, DAT_IB_EXT_TYPE type, DAT_EVENT *ev);
#define UD_WAIT_DTO(evd, type, ev) ud_wait_dto_at(__LINE__, evd, type, ev)
/* A send's completion: success, with this cookie. */
int ud_wait_sent_at(int line, DAT_EVD_HANDLE evd, uint64_t cookie);
#define UD_WAIT_SENT(evd, cookie) ud_wait_sent_at(__LINE__, evd, cookie)
/* A successful receive of `len` payload bytes into the buffer at `buf` (its GRH first), for
 * EP `ep` with this cookie; checks the GRH (version 6, SGID the sender's address, DGID the
 * receiver's) and that the payload equals `want`. */
int ud_check_recv_at(int line, const DAT_EVENT *ev, DAT_EP_HANDLE ep, uint64_t cookie, const unsigned char *buf,
                     const unsigned char *want, size_t len, const struct sockaddr_storage *sender,
                     const struct sockaddr_storage *receiver);
#define UD_CHECK_RECV(ev, ep, cookie, buf, want, len, from, to) \
    ud_check_recv_at(__LINE__, ev, ep, cookie, buf, want, len, from, to)

/* Dequeues every event of `evd` for up to `ms`: returns how many were there (for "nothing
 * arrived" checks that must wait a moment). */
int ud_drain(DAT_EVD_HANDLE evd, int ms);

#endif
