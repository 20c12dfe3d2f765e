/*
 * A fake DAT 2.0 provider for testing the dispatch layer of libdat2.
 *
 * It is loaded by the DAT library through a dat.conf entry. Every entry point
 * journals its arguments (see fakeprov.h) and succeeds, filling outputs with
 * recognisable values. Objects it hands out are heap blocks whose first word is
 * the provider's DAT_PROVIDER, as the DAT dispatch rules require. Freed objects
 * are only marked dead (and released when the library is unloaded for good), so
 * that a stale handle reaching the provider is journalled instead of crashing.
 */
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/dat_ib_extensions.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fakeprov.h"

/* Exported by libdat2 but not declared in its headers. */
extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *out);

#define EXPORT __attribute__((visibility("default")))

struct fobj {
	DAT_PROVIDER *prov;       /* must stay first */
	DAT_HANDLE_TYPE type;
	int live;
	DAT_CONTEXT ctx;
	struct fobj *ia;          /* owning IA (NULL for an IA) */
	DAT_HANDLE link[6];       /* pz, evds, srq, cno... as given at creation */
	uint64_t v[2];            /* per-type values (qlen, conn_qual, length...) */
	struct fobj *next_all;
};

static DAT_PROVIDER prov;
static DAT_PROVIDER_INFO prov_info;
static struct fobj *all_objs;
static struct fobj *last_evd, *last_psp;

static struct fake_call journal[2048];
static int njournal;
static DAT_RETURN fail_code;
static int fail_armed;
static int fail_skip;

static struct sockaddr_in local_addr;

/* ---- journal ---------------------------------------------------------- */

static struct fake_call *rec(const char *fn, const char *s, const uint64_t *a, int n)
{
	struct fake_call *c;

	if (njournal == (int)(sizeof journal / sizeof journal[0]))
		njournal--; /* keep the newest entries; the driver resets often */
	c = &journal[njournal++];
	memset(c, 0, sizeof *c);
	strncpy(c->fn, fn, sizeof c->fn - 1);
	if (s)
		strncpy(c->s, s, sizeof c->s - 1);
	if (n > FAKE_MAX_ARGS)
		n = FAKE_MAX_ARGS;
	c->n = n;
	memcpy(c->a, a, (size_t)n * sizeof a[0]);
	return c;
}

#define REC(fn, ...) \
	rec(fn, NULL, (const uint64_t[]){__VA_ARGS__}, \
	    (int)(sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t)))
#define RECS(fn, str, ...) \
	rec(fn, str, (const uint64_t[]){__VA_ARGS__}, \
	    (int)(sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t)))

/* Every DAT entry point starts with this after journalling. */
#define MAYBE_FAIL() do { \
		if (fail_armed && fail_skip-- == 0) { fail_armed = 0; return fail_code; } \
	} while (0)

EXPORT int fake_ncalls(void) { return njournal; }
EXPORT const struct fake_call *fake_call_at(int i)
{
	return (i >= 0 && i < njournal) ? &journal[i] : NULL;
}
EXPORT void fake_reset(void) { njournal = 0; fail_armed = 0; }
/* The DAT entry point called after `skip` others returns `code` and does nothing. */
EXPORT void fake_fail_later(int skip, uint32_t code)
{
	fail_code = code;
	fail_skip = skip;
	fail_armed = 1;
}
EXPORT void *fake_provider(void) { return &prov; }

/* ---- objects ---------------------------------------------------------- */

static struct fobj *obj_new(DAT_HANDLE_TYPE type, struct fobj *ia)
{
	struct fobj *o = calloc(1, sizeof *o);

	if (!o)
		abort();
	o->prov = &prov;
	o->type = type;
	o->live = 1;
	o->ia = ia;
	o->next_all = all_objs;
	all_objs = o;
	if (type == DAT_HANDLE_TYPE_EVD)
		last_evd = o;
	if (type == DAT_HANDLE_TYPE_PSP)
		last_psp = o;
	return o;
}

/* Only pointers this provider handed out are ever dereferenced. */
static struct fobj *obj_find(DAT_HANDLE h, int type)
{
	struct fobj *o;

	for (o = all_objs; o; o = o->next_all)
		if ((DAT_HANDLE)o == h)
			return (o->live && (type < 0 || (int)o->type == type)) ? o : NULL;
	return NULL;
}

static void obj_kill(struct fobj *o)
{
	if (!o)
		return;
	o->live = 0;
	if (o == last_evd)
		last_evd = NULL;
	if (o == last_psp)
		last_psp = NULL;
}

/* The consumer's view of the IA owning o (a small integer in libdat2). */
static DAT_IA_HANDLE consumer_ia(struct fobj *o)
{
	DAT_IA_HANDLE out = NULL;
	struct fobj *ia = o->type == DAT_HANDLE_TYPE_IA ? o : o->ia;

	if (!ia || dats_get_ia_handle((DAT_IA_HANDLE)ia, &out) != DAT_SUCCESS)
		return NULL;
	return out;
}

#define BAD_HANDLE (DAT_INVALID_HANDLE) /* raw type, no class bit */

#define LOOKUP(var, h, t) \
	struct fobj *var = obj_find((h), (t)); \
	if (!var) return BAD_HANDLE

__attribute__((destructor)) static void release_all(void)
{
	while (all_objs) {
		struct fobj *o = all_objs;
		all_objs = o->next_all;
		free(o);
	}
}

/* ---- IA and helpers --------------------------------------------------- */

static void fill_attrs(DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR *pattr)
{
	if (ia_attr) {
		memset(ia_attr, 0, sizeof *ia_attr);
		strcpy(ia_attr->adapter_name, "fake adapter");
		strcpy(ia_attr->vendor_name, "fake vendor");
		ia_attr->ia_address_ptr = (DAT_IA_ADDRESS_PTR)&local_addr;
		ia_attr->max_eps = 0x4242;
		ia_attr->extension_supported = DAT_EXTENSION_IB;
		ia_attr->extension_version = 209;
	}
	if (pattr) {
		memset(pattr, 0, sizeof *pattr);
		strcpy(pattr->provider_name, "fakeprov");
		pattr->provider_version_major = 7;
		pattr->provider_version_minor = 3;
		pattr->dapl_version_major = 2;
		pattr->dapl_version_minor = 0;
		pattr->is_thread_safe = DAT_FALSE;
	}
}

static DAT_RETURN f_ia_open(const DAT_NAME_PTR name, DAT_COUNT qlen,
			    DAT_EVD_HANDLE *evd, DAT_IA_HANDLE *ia)
{
	struct fake_call *c = RECS("ia_open", name, (uint64_t)qlen, NN(evd),
				   evd ? U(*evd) : 0, NN(ia));
	struct fobj *o;

	MAYBE_FAIL();
	o = obj_new(DAT_HANDLE_TYPE_IA, NULL);
	if (evd) {
		if (*evd == DAT_HANDLE_NULL) {
			struct fobj *e = obj_new(DAT_HANDLE_TYPE_EVD, o);
			e->v[0] = (uint64_t)qlen;
			e->v[1] = DAT_EVD_ASYNC_FLAG;
			*evd = (DAT_EVD_HANDLE)e;
		}
		o->link[0] = *evd;
	}
	*ia = (DAT_IA_HANDLE)o;
	c->out[0] = U(o);
	c->out[1] = U(o->link[0]);
	return DAT_SUCCESS;
}

static DAT_RETURN f_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *evd, DAT_IA_ATTR_MASK ia_mask,
			     DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK p_mask,
			     DAT_PROVIDER_ATTR *pattr)
{
	REC("ia_query", U(ia), NN(evd), (uint64_t)ia_mask, NN(ia_attr), (uint64_t)p_mask,
	    NN(pattr));
	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	if (evd)
		*evd = o->link[0];
	fill_attrs(ia_attr, pattr);
	return DAT_SUCCESS;
}

static DAT_RETURN f_ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags)
{
	REC("ia_close", U(ia), (uint64_t)flags);
	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	obj_kill(obj_find(o->link[0], DAT_HANDLE_TYPE_EVD));
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_set_consumer_context(DAT_HANDLE h, DAT_CONTEXT ctx)
{
	REC("set_consumer_context", U(h), ctx.as_64);
	MAYBE_FAIL();
	LOOKUP(o, h, -1);
	o->ctx = ctx;
	return DAT_SUCCESS;
}

static DAT_RETURN f_get_consumer_context(DAT_HANDLE h, DAT_CONTEXT *ctx)
{
	REC("get_consumer_context", U(h), NN(ctx));
	MAYBE_FAIL();
	LOOKUP(o, h, -1);
	*ctx = o->ctx;
	return DAT_SUCCESS;
}

static DAT_RETURN f_get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE *type)
{
	REC("get_handle_type", U(h), NN(type));
	MAYBE_FAIL();
	LOOKUP(o, h, -1);
	*type = o->type;
	return DAT_SUCCESS;
}

/* ---- CNO -------------------------------------------------------------- */

static DAT_RETURN f_cno_create(DAT_IA_HANDLE ia, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *cno)
{
	struct fake_call *c = REC("cno_create", U(ia), U(agent.instance_data),
				  U(agent.proxy_agent_func), NN(cno));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_CNO, o);
	*cno = (DAT_CNO_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_cno_modify_agent(DAT_CNO_HANDLE cno, DAT_OS_WAIT_PROXY_AGENT agent)
{
	REC("cno_modify_agent", U(cno), U(agent.instance_data), U(agent.proxy_agent_func));
	MAYBE_FAIL();
	LOOKUP(o, cno, DAT_HANDLE_TYPE_CNO);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_cno_query(DAT_CNO_HANDLE cno, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM *p)
{
	REC("cno_query", U(cno), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, cno, DAT_HANDLE_TYPE_CNO);
	memset(p, 0, sizeof *p);
	p->ia_handle = consumer_ia(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_cno_free(DAT_CNO_HANDLE cno)
{
	REC("cno_free", U(cno));
	MAYBE_FAIL();
	LOOKUP(o, cno, DAT_HANDLE_TYPE_CNO);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_cno_wait(DAT_CNO_HANDLE cno, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd)
{
	struct fake_call *c = REC("cno_wait", U(cno), (uint64_t)timeout, NN(evd));

	MAYBE_FAIL();
	LOOKUP(o, cno, DAT_HANDLE_TYPE_CNO);
	(void)o;
	*evd = (DAT_EVD_HANDLE)last_evd;
	c->out[0] = U(last_evd);
	return DAT_SUCCESS;
}

static DAT_RETURN f_cno_fd_create(DAT_IA_HANDLE ia, DAT_FD *fd, DAT_CNO_HANDLE *cno)
{
	REC("cno_fd_create", U(ia), NN(fd), NN(cno));
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

static DAT_RETURN f_cno_trigger(DAT_CNO_HANDLE cno, DAT_EVD_HANDLE *evd)
{
	REC("cno_trigger", U(cno), NN(evd));
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

/* ---- CR --------------------------------------------------------------- */

static DAT_RETURN f_cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *p)
{
	REC("cr_query", U(cr), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, cr, DAT_HANDLE_TYPE_CR);
	(void)o;
	memset(p, 0, sizeof *p);
	p->remote_port_qual = 0x5151;
	return DAT_SUCCESS;
}

static DAT_RETURN f_cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT size, const DAT_PVOID pdata)
{
	REC("cr_accept", U(cr), U(ep), (uint64_t)size, U(pdata));
	MAYBE_FAIL();
	LOOKUP(o, cr, DAT_HANDLE_TYPE_CR);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_cr_reject(DAT_CR_HANDLE cr, DAT_COUNT size, const DAT_PVOID pdata)
{
	REC("cr_reject", U(cr), (uint64_t)size, U(pdata));
	MAYBE_FAIL();
	LOOKUP(o, cr, DAT_HANDLE_TYPE_CR);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_cr_handoff(DAT_CR_HANDLE cr, DAT_CONN_QUAL qual)
{
	REC("cr_handoff", U(cr), (uint64_t)qual);
	MAYBE_FAIL();
	LOOKUP(o, cr, DAT_HANDLE_TYPE_CR);
	obj_kill(o);
	return DAT_SUCCESS;
}

/* ---- EVD -------------------------------------------------------------- */

static DAT_RETURN f_evd_create(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_CNO_HANDLE cno,
			       DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *evd)
{
	struct fake_call *c = REC("evd_create", U(ia), (uint64_t)qlen, U(cno), (uint64_t)flags, NN(evd));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_EVD, o);
	n->v[0] = (uint64_t)qlen;
	n->v[1] = (uint64_t)flags;
	n->link[0] = cno;
	*evd = (DAT_EVD_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_evd_query(DAT_EVD_HANDLE evd, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *p)
{
	REC("evd_query", U(evd), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, evd, DAT_HANDLE_TYPE_EVD);
	memset(p, 0, sizeof *p);
	p->ia_handle = consumer_ia(o);
	p->evd_qlen = (DAT_COUNT)o->v[0];
	p->cno_handle = o->link[0];
	p->evd_flags = (DAT_EVD_FLAGS)o->v[1];
	return DAT_SUCCESS;
}

static DAT_RETURN f_evd_modify_cno(DAT_EVD_HANDLE evd, DAT_CNO_HANDLE cno)
{
	REC("evd_modify_cno", U(evd), U(cno));
	MAYBE_FAIL();
	LOOKUP(o, evd, DAT_HANDLE_TYPE_EVD);
	o->link[0] = cno;
	return DAT_SUCCESS;
}

#define SIMPLE_EVD_OP(fname, label) \
	static DAT_RETURN fname(DAT_EVD_HANDLE evd) \
	{ \
		REC(label, U(evd)); \
		MAYBE_FAIL(); \
		LOOKUP(o, evd, DAT_HANDLE_TYPE_EVD); \
		(void)o; \
		return DAT_SUCCESS; \
	}
SIMPLE_EVD_OP(f_evd_enable, "evd_enable")
SIMPLE_EVD_OP(f_evd_disable, "evd_disable")
SIMPLE_EVD_OP(f_evd_set_unwaitable, "evd_set_unwaitable")
SIMPLE_EVD_OP(f_evd_clear_unwaitable, "evd_clear_unwaitable")

/* Both ways of taking an event hand out a brand new connection request. */
static struct fobj *make_cr_event(struct fobj *evd, DAT_EVENT *ev)
{
	struct fobj *cr = obj_new(DAT_HANDLE_TYPE_CR, evd->ia);
	DAT_CR_ARRIVAL_EVENT_DATA *d = &ev->event_data.cr_arrival_event_data;

	memset(ev, 0, sizeof *ev);
	ev->event_number = DAT_CONNECTION_REQUEST_EVENT;
	ev->evd_handle = (DAT_EVD_HANDLE)evd;
	d->sp_handle.psp_handle = (DAT_PSP_HANDLE)last_psp;
	d->local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&local_addr;
	d->conn_qual = 0xC0C0;
	d->cr_handle = (DAT_CR_HANDLE)cr;
	return cr;
}

static DAT_RETURN f_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold,
			     DAT_EVENT *ev, DAT_COUNT *nmore)
{
	struct fake_call *c = REC("evd_wait", U(evd), (uint64_t)timeout, (uint64_t)threshold,
				  NN(ev), NN(nmore));

	MAYBE_FAIL();
	LOOKUP(o, evd, DAT_HANDLE_TYPE_EVD);
	c->out[0] = U(make_cr_event(o, ev));
	if (nmore)
		*nmore = 0;
	return DAT_SUCCESS;
}

static DAT_RETURN f_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *ev)
{
	struct fake_call *c = REC("evd_dequeue", U(evd), NN(ev));

	MAYBE_FAIL();
	LOOKUP(o, evd, DAT_HANDLE_TYPE_EVD);
	c->out[0] = U(make_cr_event(o, ev));
	return DAT_SUCCESS;
}

static DAT_RETURN f_evd_resize(DAT_EVD_HANDLE evd, DAT_COUNT qlen)
{
	REC("evd_resize", U(evd), (uint64_t)qlen);
	MAYBE_FAIL();
	LOOKUP(o, evd, DAT_HANDLE_TYPE_EVD);
	o->v[0] = (uint64_t)qlen;
	return DAT_SUCCESS;
}

static DAT_RETURN f_evd_post_se(DAT_EVD_HANDLE evd, const DAT_EVENT *ev)
{
	REC("evd_post_se", U(evd), U(ev), ev ? (uint64_t)ev->event_number : 0);
	MAYBE_FAIL();
	LOOKUP(o, evd, DAT_HANDLE_TYPE_EVD);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_evd_free(DAT_EVD_HANDLE evd)
{
	REC("evd_free", U(evd));
	MAYBE_FAIL();
	LOOKUP(o, evd, DAT_HANDLE_TYPE_EVD);
	obj_kill(o);
	return DAT_SUCCESS;
}

/* ---- EP --------------------------------------------------------------- */

static DAT_RETURN f_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
			      DAT_EVD_HANDLE req_evd, DAT_EVD_HANDLE conn_evd,
			      const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep)
{
	struct fake_call *c = REC("ep_create", U(ia), U(pz), U(recv_evd), U(req_evd), U(conn_evd),
				  U(attr), NN(ep));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_EP, o);
	n->link[0] = pz;
	n->link[1] = recv_evd;
	n->link[2] = req_evd;
	n->link[3] = conn_evd;
	*ep = (DAT_EP_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_create_with_srq(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd,
				       DAT_EVD_HANDLE req_evd, DAT_EVD_HANDLE conn_evd,
				       DAT_SRQ_HANDLE srq, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep)
{
	struct fake_call *c = REC("ep_create_with_srq", U(ia), U(pz), U(recv_evd), U(req_evd),
				  U(conn_evd), U(srq), U(attr), NN(ep));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_EP, o);
	n->link[0] = pz;
	n->link[1] = recv_evd;
	n->link[2] = req_evd;
	n->link[3] = conn_evd;
	n->link[4] = srq;
	*ep = (DAT_EP_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_query(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, DAT_EP_PARAM *p)
{
	REC("ep_query", U(ep), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	memset(p, 0, sizeof *p);
	p->ia_handle = consumer_ia(o);
	p->ep_state = DAT_EP_STATE_CONNECTED;
	p->local_ia_address_ptr = (DAT_IA_ADDRESS_PTR)&local_addr;
	p->pz_handle = o->link[0];
	p->recv_evd_handle = o->link[1];
	p->request_evd_handle = o->link[2];
	p->connect_evd_handle = o->link[3];
	p->srq_handle = o->link[4];
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_modify(DAT_EP_HANDLE ep, DAT_EP_PARAM_MASK mask, const DAT_EP_PARAM *p)
{
	REC("ep_modify", U(ep), (uint64_t)mask, U(p));
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual,
			       DAT_TIMEOUT timeout, DAT_COUNT size, const DAT_PVOID pdata,
			       DAT_QOS qos, DAT_CONNECT_FLAGS flags)
{
	REC("ep_connect", U(ep), U(addr), (uint64_t)qual, (uint64_t)timeout, (uint64_t)size,
	    U(pdata), (uint64_t)qos, (uint64_t)flags);
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_common_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_TIMEOUT timeout,
				      DAT_COUNT size, const DAT_PVOID pdata)
{
	REC("ep_common_connect", U(ep), U(addr), (uint64_t)timeout, (uint64_t)size, U(pdata));
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

static DAT_RETURN f_ep_dup_connect(DAT_EP_HANDLE ep, DAT_EP_HANDLE dup, DAT_TIMEOUT timeout,
				   DAT_COUNT size, const DAT_PVOID pdata, DAT_QOS qos)
{
	REC("ep_dup_connect", U(ep), U(dup), (uint64_t)timeout, (uint64_t)size, U(pdata),
	    (uint64_t)qos);
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags)
{
	REC("ep_disconnect", U(ep), (uint64_t)flags);
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	(void)o;
	return DAT_SUCCESS;
}

#define EP_POST(fname, label) \
	static DAT_RETURN fname(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, \
				DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags) \
	{ \
		REC(label, U(ep), (uint64_t)n, U(iov), cookie.as_64, (uint64_t)flags); \
		MAYBE_FAIL(); \
		LOOKUP(o, ep, DAT_HANDLE_TYPE_EP); \
		(void)o; \
		return DAT_SUCCESS; \
	}
EP_POST(f_ep_post_send, "ep_post_send")
EP_POST(f_ep_post_recv, "ep_post_recv")

#define EP_RDMA(fname, label) \
	static DAT_RETURN fname(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov, \
				DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote, \
				DAT_COMPLETION_FLAGS flags) \
	{ \
		REC(label, U(ep), (uint64_t)n, U(iov), cookie.as_64, U(remote), (uint64_t)flags); \
		MAYBE_FAIL(); \
		LOOKUP(o, ep, DAT_HANDLE_TYPE_EP); \
		(void)o; \
		return DAT_SUCCESS; \
	}
EP_RDMA(f_ep_post_rdma_read, "ep_post_rdma_read")
EP_RDMA(f_ep_post_rdma_write, "ep_post_rdma_write")

static DAT_RETURN f_ep_post_send_with_invalidate(DAT_EP_HANDLE ep, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
						 DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags,
						 DAT_BOOLEAN inv, DAT_RMR_CONTEXT ctx)
{
	REC("ep_post_send_with_invalidate", U(ep), (uint64_t)n, U(iov), cookie.as_64,
	    (uint64_t)flags, (uint64_t)inv, (uint64_t)ctx);
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

static DAT_RETURN f_ep_post_rdma_read_to_rmr(DAT_EP_HANDLE ep, const DAT_RMR_TRIPLET *local,
					     DAT_DTO_COOKIE cookie, const DAT_RMR_TRIPLET *remote,
					     DAT_COMPLETION_FLAGS flags)
{
	REC("ep_post_rdma_read_to_rmr", U(ep), U(local), cookie.as_64, U(remote), (uint64_t)flags);
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

static DAT_RETURN f_ep_get_status(DAT_EP_HANDLE ep, DAT_EP_STATE *state, DAT_BOOLEAN *in_idle,
				  DAT_BOOLEAN *out_idle)
{
	REC("ep_get_status", U(ep), NN(state), NN(in_idle), NN(out_idle));
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	(void)o;
	if (state)
		*state = DAT_EP_STATE_CONNECTED;
	if (in_idle)
		*in_idle = DAT_TRUE;
	if (out_idle)
		*out_idle = DAT_FALSE;
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_free(DAT_EP_HANDLE ep)
{
	REC("ep_free", U(ep));
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_reset(DAT_EP_HANDLE ep)
{
	REC("ep_reset", U(ep));
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_recv_query(DAT_EP_HANDLE ep, DAT_COUNT *bufs, DAT_COUNT *size)
{
	REC("ep_recv_query", U(ep), NN(bufs), NN(size));
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	(void)o;
	if (bufs)
		*bufs = 11;
	if (size)
		*size = 22;
	return DAT_SUCCESS;
}

static DAT_RETURN f_ep_set_watermark(DAT_EP_HANDLE ep, DAT_COUNT soft, DAT_COUNT hard)
{
	REC("ep_set_watermark", U(ep), (uint64_t)soft, (uint64_t)hard);
	MAYBE_FAIL();
	LOOKUP(o, ep, DAT_HANDLE_TYPE_EP);
	(void)o;
	return DAT_SUCCESS;
}

/* ---- LMR / RMR / PZ --------------------------------------------------- */

static DAT_RETURN f_lmr_create(DAT_IA_HANDLE ia, DAT_MEM_TYPE type, DAT_REGION_DESCRIPTION region,
			       DAT_VLEN len, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv,
			       DAT_VA_TYPE va_type, DAT_LMR_HANDLE *lmr, DAT_LMR_CONTEXT *lctx,
			       DAT_RMR_CONTEXT *rctx, DAT_VLEN *rlen, DAT_VADDR *raddr)
{
	uint64_t w[2];
	struct fake_call *c;
	struct fobj *n;

	memcpy(w, &region, sizeof w);
	c = REC("lmr_create", U(ia), (uint64_t)type, w[0], w[1], (uint64_t)len, U(pz),
		(uint64_t)priv, (uint64_t)va_type, NN(lmr), NN(lctx), NN(rctx), NN(rlen), NN(raddr));
	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_LMR, o);
	n->link[0] = pz;
	n->v[0] = len;
	n->v[1] = w[0];
	*lmr = (DAT_LMR_HANDLE)n;
	if (lctx)
		*lctx = 0x1111;
	if (rctx)
		*rctx = 0x2222;
	if (rlen)
		*rlen = len;
	if (raddr)
		*raddr = w[0];
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_lmr_query(DAT_LMR_HANDLE lmr, DAT_LMR_PARAM_MASK mask, DAT_LMR_PARAM *p)
{
	REC("lmr_query", U(lmr), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, lmr, DAT_HANDLE_TYPE_LMR);
	memset(p, 0, sizeof *p);
	p->ia_handle = consumer_ia(o);
	p->pz_handle = o->link[0];
	p->length = o->v[0];
	p->lmr_context = 0x1111;
	return DAT_SUCCESS;
}

static DAT_RETURN f_lmr_free(DAT_LMR_HANDLE lmr)
{
	REC("lmr_free", U(lmr));
	MAYBE_FAIL();
	LOOKUP(o, lmr, DAT_HANDLE_TYPE_LMR);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_lmr_sync_rdma_read(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *segs, DAT_VLEN n)
{
	REC("lmr_sync_rdma_read", U(ia), U(segs), (uint64_t)n);
	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_lmr_sync_rdma_write(DAT_IA_HANDLE ia, const DAT_LMR_TRIPLET *segs, DAT_VLEN n)
{
	REC("lmr_sync_rdma_write", U(ia), U(segs), (uint64_t)n);
	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_rmr_create(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr)
{
	struct fake_call *c = REC("rmr_create", U(pz), NN(rmr));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, pz, DAT_HANDLE_TYPE_PZ);
	n = obj_new(DAT_HANDLE_TYPE_RMR, o->ia);
	n->link[0] = pz;
	*rmr = (DAT_RMR_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_rmr_create_for_ep(DAT_PZ_HANDLE pz, DAT_RMR_HANDLE *rmr)
{
	REC("rmr_create_for_ep", U(pz), NN(rmr));
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

static DAT_RETURN f_rmr_query(DAT_RMR_HANDLE rmr, DAT_RMR_PARAM_MASK mask, DAT_RMR_PARAM *p)
{
	REC("rmr_query", U(rmr), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, rmr, DAT_HANDLE_TYPE_RMR);
	memset(p, 0, sizeof *p);
	p->ia_handle = consumer_ia(o);
	p->pz_handle = o->link[0];
	return DAT_SUCCESS;
}

static DAT_RETURN f_rmr_bind(DAT_RMR_HANDLE rmr, DAT_LMR_HANDLE lmr, const DAT_LMR_TRIPLET *trip,
			     DAT_MEM_PRIV_FLAGS priv, DAT_VA_TYPE va_type, DAT_EP_HANDLE ep,
			     DAT_RMR_COOKIE cookie, DAT_COMPLETION_FLAGS flags, DAT_RMR_CONTEXT *rctx)
{
	REC("rmr_bind", U(rmr), U(lmr), U(trip), (uint64_t)priv, (uint64_t)va_type, U(ep),
	    cookie.as_64, (uint64_t)flags, NN(rctx));
	MAYBE_FAIL();
	LOOKUP(o, rmr, DAT_HANDLE_TYPE_RMR);
	(void)o;
	if (rctx)
		*rctx = 0x3333;
	return DAT_SUCCESS;
}

static DAT_RETURN f_rmr_free(DAT_RMR_HANDLE rmr)
{
	REC("rmr_free", U(rmr));
	MAYBE_FAIL();
	LOOKUP(o, rmr, DAT_HANDLE_TYPE_RMR);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE *pz)
{
	struct fake_call *c = REC("pz_create", U(ia), NN(pz));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_PZ, o);
	*pz = (DAT_PZ_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *p)
{
	REC("pz_query", U(pz), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, pz, DAT_HANDLE_TYPE_PZ);
	p->ia_handle = consumer_ia(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_pz_free(DAT_PZ_HANDLE pz)
{
	REC("pz_free", U(pz));
	MAYBE_FAIL();
	LOOKUP(o, pz, DAT_HANDLE_TYPE_PZ);
	obj_kill(o);
	return DAT_SUCCESS;
}

/* ---- service points --------------------------------------------------- */

static DAT_RETURN f_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd,
			       DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp)
{
	struct fake_call *c = REC("psp_create", U(ia), (uint64_t)qual, U(evd), (uint64_t)flags, NN(psp));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_PSP, o);
	n->link[0] = evd;
	n->v[0] = qual;
	n->v[1] = (uint64_t)flags;
	*psp = (DAT_PSP_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_psp_create_any(DAT_IA_HANDLE ia, DAT_CONN_QUAL *qual, DAT_EVD_HANDLE evd,
				   DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp)
{
	struct fake_call *c = REC("psp_create_any", U(ia), NN(qual), U(evd), (uint64_t)flags, NN(psp));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_PSP, o);
	n->link[0] = evd;
	n->v[0] = 0x7777;
	n->v[1] = (uint64_t)flags;
	*qual = 0x7777;
	*psp = (DAT_PSP_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_psp_query(DAT_PSP_HANDLE psp, DAT_PSP_PARAM_MASK mask, DAT_PSP_PARAM *p)
{
	REC("psp_query", U(psp), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, psp, DAT_HANDLE_TYPE_PSP);
	memset(p, 0, sizeof *p);
	p->ia_handle = consumer_ia(o);
	p->conn_qual = o->v[0];
	p->evd_handle = o->link[0];
	p->psp_flags = (DAT_PSP_FLAGS)o->v[1];
	return DAT_SUCCESS;
}

static DAT_RETURN f_psp_free(DAT_PSP_HANDLE psp)
{
	REC("psp_free", U(psp));
	MAYBE_FAIL();
	LOOKUP(o, psp, DAT_HANDLE_TYPE_PSP);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_rsp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EP_HANDLE ep,
			       DAT_EVD_HANDLE evd, DAT_RSP_HANDLE *rsp)
{
	struct fake_call *c = REC("rsp_create", U(ia), (uint64_t)qual, U(ep), U(evd), NN(rsp));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_RSP, o);
	n->link[0] = evd;
	n->link[1] = ep;
	n->v[0] = qual;
	*rsp = (DAT_RSP_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_rsp_query(DAT_RSP_HANDLE rsp, DAT_RSP_PARAM_MASK mask, DAT_RSP_PARAM *p)
{
	REC("rsp_query", U(rsp), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, rsp, DAT_HANDLE_TYPE_RSP);
	memset(p, 0, sizeof *p);
	p->ia_handle = consumer_ia(o);
	p->conn_qual = o->v[0];
	p->evd_handle = o->link[0];
	p->ep_handle = o->link[1];
	return DAT_SUCCESS;
}

static DAT_RETURN f_rsp_free(DAT_RSP_HANDLE rsp)
{
	REC("rsp_free", U(rsp));
	MAYBE_FAIL();
	LOOKUP(o, rsp, DAT_HANDLE_TYPE_RSP);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_csp_create(DAT_IA_HANDLE ia, DAT_COMM *comm, DAT_IA_ADDRESS_PTR addr,
			       DAT_EVD_HANDLE evd, DAT_CSP_HANDLE *csp)
{
	REC("csp_create", U(ia), U(comm), U(addr), U(evd), NN(csp));
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

static DAT_RETURN f_csp_query(DAT_CSP_HANDLE csp, DAT_CSP_PARAM_MASK mask, DAT_CSP_PARAM *p)
{
	REC("csp_query", U(csp), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

static DAT_RETURN f_csp_free(DAT_CSP_HANDLE csp)
{
	REC("csp_free", U(csp));
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

/* ---- SRQ -------------------------------------------------------------- */

static DAT_RETURN f_srq_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_SRQ_ATTR *attr,
			       DAT_SRQ_HANDLE *srq)
{
	struct fake_call *c = REC("srq_create", U(ia), U(pz), U(attr), NN(srq));
	struct fobj *n;

	MAYBE_FAIL();
	LOOKUP(o, ia, DAT_HANDLE_TYPE_IA);
	n = obj_new(DAT_HANDLE_TYPE_SRQ, o);
	n->link[0] = pz;
	*srq = (DAT_SRQ_HANDLE)n;
	c->out[0] = U(n);
	return DAT_SUCCESS;
}

static DAT_RETURN f_srq_free(DAT_SRQ_HANDLE srq)
{
	REC("srq_free", U(srq));
	MAYBE_FAIL();
	LOOKUP(o, srq, DAT_HANDLE_TYPE_SRQ);
	obj_kill(o);
	return DAT_SUCCESS;
}

static DAT_RETURN f_srq_post_recv(DAT_SRQ_HANDLE srq, DAT_COUNT n, DAT_LMR_TRIPLET *iov,
				  DAT_DTO_COOKIE cookie)
{
	REC("srq_post_recv", U(srq), (uint64_t)n, U(iov), cookie.as_64);
	MAYBE_FAIL();
	LOOKUP(o, srq, DAT_HANDLE_TYPE_SRQ);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_srq_query(DAT_SRQ_HANDLE srq, DAT_SRQ_PARAM_MASK mask, DAT_SRQ_PARAM *p)
{
	REC("srq_query", U(srq), (uint64_t)mask, NN(p));
	MAYBE_FAIL();
	LOOKUP(o, srq, DAT_HANDLE_TYPE_SRQ);
	memset(p, 0, sizeof *p);
	p->ia_handle = consumer_ia(o);
	p->pz_handle = o->link[0];
	p->max_recv_dtos = 0x99;
	return DAT_SUCCESS;
}

static DAT_RETURN f_srq_resize(DAT_SRQ_HANDLE srq, DAT_COUNT n)
{
	REC("srq_resize", U(srq), (uint64_t)n);
	MAYBE_FAIL();
	LOOKUP(o, srq, DAT_HANDLE_TYPE_SRQ);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_srq_set_lw(DAT_SRQ_HANDLE srq, DAT_COUNT lw)
{
	REC("srq_set_lw", U(srq), (uint64_t)lw);
	MAYBE_FAIL();
	LOOKUP(o, srq, DAT_HANDLE_TYPE_SRQ);
	(void)o;
	return DAT_SUCCESS;
}

static DAT_RETURN f_ia_ha_related(DAT_IA_HANDLE ia, const DAT_NAME_PTR name, DAT_BOOLEAN *answer)
{
	RECS("ia_ha_related", name, U(ia), NN(answer));
	MAYBE_FAIL();
	return DAT_NOT_IMPLEMENTED;
}

/* ---- extensions ------------------------------------------------------- */

/*
 * The argument lists read here follow dat_ib_extensions.h for the IB operations
 * the test uses. 0x1000 opens a new IA for a quick query and 0x2000 closes it.
 */
static DAT_RETURN f_extendedop(DAT_HANDLE h, DAT_EXTENDED_OP op, va_list ap)
{
	struct fake_call *c;

	switch (op) {
	case DAT_IB_OPEN_QUERY_OP: {
		DAT_HANDLE *ia = va_arg(ap, DAT_HANDLE *);
		DAT_IA_ATTR_MASK mask = va_arg(ap, DAT_IA_ATTR_MASK);
		DAT_IA_ATTR *attr = va_arg(ap, DAT_IA_ATTR *);
		DAT_PROVIDER_ATTR_MASK pmask = va_arg(ap, DAT_PROVIDER_ATTR_MASK);
		DAT_PROVIDER_ATTR *pattr = va_arg(ap, DAT_PROVIDER_ATTR *);
		struct fobj *n;

		/* the "handle" is the IA name here */
		c = RECS("extendedop", (const char *)h, 0, (uint64_t)op, NN(ia), (uint64_t)mask,
			 NN(attr), (uint64_t)pmask, NN(pattr));
		MAYBE_FAIL();
		n = obj_new(DAT_HANDLE_TYPE_IA, NULL);
		fill_attrs(attr, pattr);
		*ia = (DAT_HANDLE)n;
		c->out[0] = U(n);
		return DAT_SUCCESS;
	}
	case DAT_IB_CLOSE_QUERY_OP: {
		REC("extendedop", U(h), (uint64_t)op);
		MAYBE_FAIL();
		LOOKUP(o, h, DAT_HANDLE_TYPE_IA);
		obj_kill(o);
		return DAT_SUCCESS;
	}
	case DAT_IB_CMP_AND_SWAP_OP: {
		DAT_UINT64 cmp = va_arg(ap, DAT_UINT64);
		DAT_UINT64 swap = va_arg(ap, DAT_UINT64);
		DAT_LMR_TRIPLET *local = va_arg(ap, DAT_LMR_TRIPLET *);
		DAT_DTO_COOKIE cookie = va_arg(ap, DAT_DTO_COOKIE);
		DAT_RMR_TRIPLET *remote = va_arg(ap, DAT_RMR_TRIPLET *);
		DAT_COMPLETION_FLAGS flags = va_arg(ap, DAT_COMPLETION_FLAGS);

		REC("extendedop", U(h), (uint64_t)op, cmp, swap, U(local), cookie.as_64, U(remote),
		    (uint64_t)flags);
		break;
	}
	case DAT_IB_FETCH_AND_ADD_OP: {
		DAT_UINT64 add = va_arg(ap, DAT_UINT64);
		DAT_LMR_TRIPLET *local = va_arg(ap, DAT_LMR_TRIPLET *);
		DAT_DTO_COOKIE cookie = va_arg(ap, DAT_DTO_COOKIE);
		DAT_RMR_TRIPLET *remote = va_arg(ap, DAT_RMR_TRIPLET *);
		DAT_COMPLETION_FLAGS flags = va_arg(ap, DAT_COMPLETION_FLAGS);

		REC("extendedop", U(h), (uint64_t)op, add, U(local), cookie.as_64, U(remote),
		    (uint64_t)flags);
		break;
	}
	case DAT_IB_PRINT_COUNTERS_OP: {
		int cntr = va_arg(ap, int);
		int reset = va_arg(ap, int);

		REC("extendedop", U(h), (uint64_t)op, (uint64_t)cntr, (uint64_t)reset);
		break;
	}
	case DAT_IB_COLLECTIVE_REDUCE_OP: {
		void *sbuf = va_arg(ap, void *);
		DAT_COUNT ssize = va_arg(ap, DAT_COUNT);
		void *rbuf = va_arg(ap, void *);
		DAT_COUNT rsize = va_arg(ap, DAT_COUNT);
		int rop = va_arg(ap, int);
		int type = va_arg(ap, int);
		unsigned int root = va_arg(ap, unsigned int);
		DAT_CONTEXT ctx = va_arg(ap, DAT_CONTEXT);
		DAT_COMPLETION_FLAGS flags = va_arg(ap, DAT_COMPLETION_FLAGS);

		REC("extendedop", U(h), (uint64_t)op, U(sbuf), (uint64_t)ssize, U(rbuf),
		    (uint64_t)rsize, (uint64_t)rop, (uint64_t)type, (uint64_t)root, ctx.as_64,
		    (uint64_t)flags);
		break;
	}
	default:
		REC("extendedop", U(h), (uint64_t)op);
		MAYBE_FAIL();
		return DAT_NOT_IMPLEMENTED;
	}
	MAYBE_FAIL();
	if (!obj_find(h, -1))
		return BAD_HANDLE;
	return DAT_SUCCESS;
}

/* ---- registration ----------------------------------------------------- */

static void fill_provider(const DAT_PROVIDER_INFO *info)
{
	memset(&prov, 0, sizeof prov);
	prov.device_name = prov_info.ia_name;
	prov.extension = NULL;
	prov.ia_open_func = f_ia_open;
	prov.ia_query_func = f_ia_query;
	prov.ia_close_func = f_ia_close;
	prov.set_consumer_context_func = f_set_consumer_context;
	prov.get_consumer_context_func = f_get_consumer_context;
	prov.get_handle_type_func = f_get_handle_type;
	prov.cno_create_func = f_cno_create;
	prov.cno_modify_agent_func = f_cno_modify_agent;
	prov.cno_query_func = f_cno_query;
	prov.cno_free_func = f_cno_free;
	prov.cno_wait_func = f_cno_wait;
	prov.cr_query_func = f_cr_query;
	prov.cr_accept_func = f_cr_accept;
	prov.cr_reject_func = f_cr_reject;
	prov.cr_handoff_func = f_cr_handoff;
	prov.evd_create_func = f_evd_create;
	prov.evd_query_func = f_evd_query;
	prov.evd_modify_cno_func = f_evd_modify_cno;
	prov.evd_enable_func = f_evd_enable;
	prov.evd_disable_func = f_evd_disable;
	prov.evd_wait_func = f_evd_wait;
	prov.evd_resize_func = f_evd_resize;
	prov.evd_post_se_func = f_evd_post_se;
	prov.evd_dequeue_func = f_evd_dequeue;
	prov.evd_free_func = f_evd_free;
	prov.ep_create_func = f_ep_create;
	prov.ep_query_func = f_ep_query;
	prov.ep_modify_func = f_ep_modify;
	prov.ep_connect_func = f_ep_connect;
	prov.ep_dup_connect_func = f_ep_dup_connect;
	prov.ep_disconnect_func = f_ep_disconnect;
	prov.ep_post_send_func = f_ep_post_send;
	prov.ep_post_recv_func = f_ep_post_recv;
	prov.ep_post_rdma_read_func = f_ep_post_rdma_read;
	prov.ep_post_rdma_write_func = f_ep_post_rdma_write;
	prov.ep_get_status_func = f_ep_get_status;
	prov.ep_free_func = f_ep_free;
	prov.lmr_create_func = f_lmr_create;
	prov.lmr_query_func = f_lmr_query;
	prov.lmr_free_func = f_lmr_free;
	prov.rmr_create_func = f_rmr_create;
	prov.rmr_query_func = f_rmr_query;
	prov.rmr_bind_func = f_rmr_bind;
	prov.rmr_free_func = f_rmr_free;
	prov.psp_create_func = f_psp_create;
	prov.psp_query_func = f_psp_query;
	prov.psp_free_func = f_psp_free;
	prov.rsp_create_func = f_rsp_create;
	prov.rsp_query_func = f_rsp_query;
	prov.rsp_free_func = f_rsp_free;
	prov.pz_create_func = f_pz_create;
	prov.pz_query_func = f_pz_query;
	prov.pz_free_func = f_pz_free;
	prov.psp_create_any_func = f_psp_create_any;
	prov.ep_reset_func = f_ep_reset;
	prov.evd_set_unwaitable_func = f_evd_set_unwaitable;
	prov.evd_clear_unwaitable_func = f_evd_clear_unwaitable;
	prov.lmr_sync_rdma_read_func = f_lmr_sync_rdma_read;
	prov.lmr_sync_rdma_write_func = f_lmr_sync_rdma_write;
	prov.ep_create_with_srq_func = f_ep_create_with_srq;
	prov.ep_recv_query_func = f_ep_recv_query;
	prov.ep_set_watermark_func = f_ep_set_watermark;
	prov.srq_create_func = f_srq_create;
	prov.srq_free_func = f_srq_free;
	prov.srq_post_recv_func = f_srq_post_recv;
	prov.srq_query_func = f_srq_query;
	prov.srq_resize_func = f_srq_resize;
	prov.srq_set_lw_func = f_srq_set_lw;
	prov.csp_create_func = f_csp_create;
	prov.csp_query_func = f_csp_query;
	prov.csp_free_func = f_csp_free;
	prov.ep_common_connect_func = f_ep_common_connect;
	prov.rmr_create_for_ep_func = f_rmr_create_for_ep;
	prov.ep_post_send_with_invalidate_func = f_ep_post_send_with_invalidate;
	prov.ep_post_rdma_read_to_rmr_func = f_ep_post_rdma_read_to_rmr;
	prov.cno_fd_create_func = f_cno_fd_create;
	prov.cno_trigger_func = f_cno_trigger;
	prov.ia_ha_related_func = f_ia_ha_related;
	prov.handle_extendedop_func = f_extendedop;
	(void)info;
}

EXPORT void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *instance_data)
{
	struct fake_call *c;
	DAT_RETURN r;

	c = RECS("provider_init", instance_data, U(info), (uint64_t)info->dapl_version_major,
		 (uint64_t)info->dapl_version_minor, (uint64_t)info->is_thread_safe);
	/* the IA name goes after the instance data, separated by '|' */
	strncat(c->s, "|", sizeof c->s - strlen(c->s) - 1);
	strncat(c->s, info->ia_name, sizeof c->s - strlen(c->s) - 1);
	prov_info = *info;
	local_addr.sin_family = AF_INET;
	local_addr.sin_addr.s_addr = htonl(0x7f000001);
	fill_provider(info);
	r = dat_registry_add_provider(&prov, info);
	REC("add_provider", (uint64_t)r);
}

EXPORT void dat_provider_fini(const DAT_PROVIDER_INFO *info)
{
	DAT_RETURN r;

	RECS("provider_fini", info->ia_name, U(info));
	r = dat_registry_remove_provider(&prov, info);
	REC("remove_provider", (uint64_t)r);
}
