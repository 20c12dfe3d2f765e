/*
 * Drives every exported libdat2 function against the fake provider and checks,
 * through the provider's journal, that the provider saw exactly the arguments
 * the consumer passed (IA handles translated to the provider's own IA pointer).
 * Its two cases, run with the common runner (c-tests/common/harness.h):
 *
 *   fptest [-l LABEL] good   cases that any conforming libdat2 passes
 *   fptest [-l LABEL] bad    invalid handles: DAT_INVALID_HANDLE with the argument's
 *                            subtype, provider never called (each call in a child
 *                            process of its own)
 *
 * Each is a sequence of checks over shared state: one "PASS LABEL:CASE:..." or
 * "FAIL LABEL:CASE:... why" line per check (LABEL: debian or dat2, see run.sh).
 * FPTEST_PROVIDER names the provider library (libfakeprov.so); the dat.conf given
 * through DAT_OVERRIDE must name it as "fake-ia". FPTEST_LIB (good only): the real
 * path of the libdat2 the run must be using.
 */
#define _GNU_SOURCE /* dladdr */
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeprov.h"
#include "harness.h"

extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *out);

#define IA_NAME "fake-ia"
#define ANY 0xA5A5A5A5DEADBEEFull /* expected-argument wildcard */

static fake_ncalls_fn j_count;
static fake_call_at_fn j_at;
static fake_reset_fn j_reset;
static fake_fail_later_fn j_fail_later;
static fake_provider_fn j_provider;

/* ---- reporting (checks of the common runner: harness_check, harness_pass) ---- */

static void render(char *buf, size_t len, const struct fake_call *c)
{
	size_t off = (size_t)snprintf(buf, len, "%s(", c->fn);

	if (c->s[0] && off < len)
		off += (size_t)snprintf(buf + off, len - off, "\"%s\",", c->s);
	for (int i = 0; i < c->n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%#llx", i ? "," : "",
					(unsigned long long)c->a[i]);
	if (off < len)
		snprintf(buf + off, len - off, ")");
}

static void render_journal(char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < j_count() && off + 1 < len; i++) {
		char one[512];

		render(one, sizeof one, j_at(i));
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", one);
	}
	if (!j_count())
		snprintf(buf, len, "(no provider calls)");
}

/* ---- expected journals ------------------------------------------------ */

static struct fake_call mk(const char *fn, const char *s, const uint64_t *a, int n)
{
	struct fake_call c;

	memset(&c, 0, sizeof c);
	snprintf(c.fn, sizeof c.fn, "%s", fn);
	if (s)
		snprintf(c.s, sizeof c.s, "%s", s);
	else
		c.s[0] = 1; /* marker: do not compare the string */
	c.n = n;
	memcpy(c.a, a, (size_t)n * sizeof *a);
	return c;
}

#define NARGS(...) ((int)(sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t)))
#define C(fn, ...) mk(fn, NULL, (const uint64_t[]){__VA_ARGS__}, NARGS(__VA_ARGS__))
#define CS(fn, s, ...) mk(fn, s, (const uint64_t[]){__VA_ARGS__}, NARGS(__VA_ARGS__))

static int same_call(const struct fake_call *got, const struct fake_call *want)
{
	if (strcmp(got->fn, want->fn) || got->n != want->n)
		return 0;
	if (want->s[0] != 1 && strcmp(got->s, want->s))
		return 0;
	for (int i = 0; i < want->n; i++)
		if (want->a[i] != ANY && want->a[i] != got->a[i])
			return 0;
	return 1;
}

/* rc must be want_rc and the journal must be exactly exp[0..n). */
static int check_calls(const char *name, DAT_RETURN rc, DAT_RETURN want_rc,
		       const struct fake_call *exp, int n)
{
	char got[4096], wanted[4096] = "";
	int ok = rc == want_rc && j_count() == n;

	for (int i = 0; ok && i < n; i++)
		ok = same_call(j_at(i), &exp[i]);
	if (ok) {
		harness_pass(name);
		return 1;
	}
	render_journal(got, sizeof got);
	for (int i = 0; i < n; i++) {
		char one[512];
		struct fake_call e = exp[i];

		if (e.s[0] == 1)
			e.s[0] = 0;
		render(one, sizeof one, &e);
		strncat(wanted, i ? " " : "", sizeof wanted - strlen(wanted) - 1);
		strncat(wanted, one, sizeof wanted - strlen(wanted) - 1);
	}
	harness_check(name, 0, "rc=%#x (want %#x); provider saw: %s; wanted: %s", rc, want_rc, got,
		      n ? wanted : "(no provider calls)");
	return 0;
}

/* The check NAME: the call returned want_rc and the provider saw exactly the calls given, in
 * order (fptest's own: harness.h's EXPECT checks a condition). */
#define EXPECT_CALLS(name, rc, want_rc, ...) \
	check_calls(name, rc, want_rc, (const struct fake_call[]){__VA_ARGS__}, \
		    (int)(sizeof((const struct fake_call[]){__VA_ARGS__}) / sizeof(struct fake_call)))
#define EXPECT_NO_CALLS(name, rc, want_rc) check_calls(name, rc, want_rc, NULL, 0)

static uint64_t out0(int i)
{
	const struct fake_call *c = j_at(i);

	return c ? c->out[0] : 0;
}

static int count_fn(const char *fn)
{
	int n = 0;

	for (int i = 0; i < j_count(); i++)
		n += !strcmp(j_at(i)->fn, fn);
	return n;
}

/* ---- loading ---------------------------------------------------------- */

/* The runner's prepare hook: loads FPTEST_PROVIDER, whose journal the checks read; a failure
 * is the failed check "load", and ends the case. */
static void load_provider(const struct harness_case *c, size_t index)
{
	const char *path = getenv("FPTEST_PROVIDER");
	void *h;

	(void)c;
	(void)index;
	if (!path) {
		harness_check("load", 0, "FPTEST_PROVIDER is not set");
		return;
	}
	h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		harness_check("load", 0, "%s", dlerror());
		return;
	}
	j_count = (fake_ncalls_fn)dlsym(h, "fake_ncalls");
	j_at = (fake_call_at_fn)dlsym(h, "fake_call_at");
	j_reset = (fake_reset_fn)dlsym(h, "fake_reset");
	j_fail_later = (fake_fail_later_fn)dlsym(h, "fake_fail_later");
	j_provider = (fake_provider_fn)dlsym(h, "fake_provider");
	if (!j_count || !j_at || !j_reset || !j_fail_later || !j_provider)
		harness_check("load", 0, "journal functions missing");
}

/* ---- shared objects --------------------------------------------------- */

static DAT_IA_HANDLE ia;          /* consumer handle */
static uint64_t raw;              /* the provider's IA pointer */
static DAT_EVD_HANDLE aevd, evd, crevd, dtoevd, connevd;
static DAT_CNO_HANDLE cno;
static DAT_PZ_HANDLE pz;
static DAT_EP_HANDLE ep, ep_nul, ep_srq;
static DAT_SRQ_HANDLE srq;
static DAT_LMR_HANDLE lmr;
static DAT_RMR_HANDLE rmr;
static DAT_PSP_HANDLE psp;
static DAT_RSP_HANDLE rsp;
static DAT_CR_HANDLE cr;

static char buf[4096];
static DAT_LMR_TRIPLET iov[4];
static DAT_RMR_TRIPLET rtrip;
static unsigned char pdata[64];
static struct sockaddr_in peer;
static DAT_EP_ATTR epattr;
static DAT_SRQ_ATTR srqattr;
static char shared_id[DAT_LMR_COOKIE_SIZE];

static DAT_DTO_COOKIE dto_cookie(uint64_t v)
{
	DAT_DTO_COOKIE c;

	c.as_64 = v;
	return c;
}

static DAT_OS_WAIT_PROXY_AGENT agent(uintptr_t inst, uintptr_t fn)
{
	DAT_OS_WAIT_PROXY_AGENT a;

	a.instance_data = (DAT_PVOID)inst;
	a.proxy_agent_func = (DAT_AGENT_FUNC)fn;
	return a;
}

static DAT_REGION_DESCRIPTION region_va(void *va)
{
	DAT_REGION_DESCRIPTION r;

	memset(&r, 0, sizeof r);
	r.for_va = va;
	return r;
}

static DAT_REGION_DESCRIPTION region_lmr(DAT_LMR_HANDLE h)
{
	DAT_REGION_DESCRIPTION r;

	memset(&r, 0, sizeof r);
	r.for_lmr_handle = h;
	return r;
}

/* Opens IA_NAME; checks the journal's ia_open and returns the provider's IA. */
static uint64_t open_ia(const char *name, DAT_COUNT qlen, DAT_EVD_HANDLE *async,
			DAT_IA_HANDLE *out, uintptr_t want_handle, int want_init)
{
	char why[4096] = "";
	DAT_EVD_HANDLE async_in = *async;
	int first = -1, ok = 1;
	uint64_t r = 0;
	DAT_RETURN rc;

	j_reset();
	rc = dat_ia_openv(IA_NAME, qlen, async, out, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE);
	for (int i = 0; i < j_count(); i++)
		if (!strcmp(j_at(i)->fn, "ia_open")) {
			first = i;
			break;
		}
	if (rc != DAT_SUCCESS || first < 0) {
		ok = 0;
	} else {
		struct fake_call want = CS("ia_open", IA_NAME, (uint64_t)qlen, 1, U(async_in), 1);
		const struct fake_call *c = j_at(first);

		r = c->out[0];
		ok = same_call(c, &want) && U(*out) == want_handle && U(*async) == c->out[1];
		/* before ia_open: the provider's init and registration, if it was not loaded */
		if (want_init)
			ok = ok && first == 2 && !strcmp(j_at(0)->fn, "provider_init") &&
			     !strcmp(j_at(1)->fn, "add_provider") && j_at(1)->a[0] == 0;
		else
			ok = ok && first == 0;
		/* after ia_open libdat2 may query the IA it just opened */
		for (int i = first + 1; i < j_count(); i++)
			ok = ok && !strcmp(j_at(i)->fn, "ia_query") && j_at(i)->a[0] == r;
	}
	if (ok) {
		harness_pass(name);
	} else {
		render_journal(why, sizeof why);
		harness_check(name, 0, "rc=%#x handle=%p async=%p; provider saw: %s", rc, *out, *async, why);
	}
	return r;
}

/* Closes a consumer IA; checks the query-then-close protocol and the fini. */
static void close_ia(const char *name, DAT_IA_HANDLE h, uint64_t r, DAT_CLOSE_FLAGS flags, int last)
{
	DAT_RETURN rc;

	j_reset();
	rc = dat_ia_close(h, flags);
	if (last)
		EXPECT_CALLS(name, rc, DAT_SUCCESS,
			     C("ia_query", r, 0, 0, 0, DAT_PROVIDER_FIELD_ALL, 1),
			     C("ia_close", r, (uint64_t)flags),
			     CS("provider_fini", IA_NAME, ANY),
			     C("remove_provider", 0));
	else
		EXPECT_CALLS(name, rc, DAT_SUCCESS,
			     C("ia_query", r, 0, 0, 0, DAT_PROVIDER_FIELD_ALL, 1),
			     C("ia_close", r, (uint64_t)flags));
}

/* ====================================================================== */
/* good handles: same results with any conforming libdat2                  */
/* ====================================================================== */

static void good_registry(void)
{
	DAT_PROVIDER_INFO infos[128], *ptrs[128];
	DAT_COUNT n = -1;
	DAT_RETURN rc;
	int found = 0;

	for (int i = 0; i < 128; i++)
		ptrs[i] = &infos[i];
	memset(infos, 0, sizeof infos);
	rc = dat_registry_list_providers(128, &n, ptrs);
	for (int i = 0; rc == DAT_SUCCESS && i < n && i < 128; i++)
		if (!strcmp(infos[i].ia_name, IA_NAME) && infos[i].dapl_version_major == 2 &&
		    infos[i].dapl_version_minor == 0 && infos[i].is_thread_safe == DAT_FALSE)
			found++;
	harness_check("dat_registry_list_providers", rc == DAT_SUCCESS && found == 1,
		      "rc=%#x count=%d matching entries=%d", rc, n, found);
}

static void good_strerror(void)
{
	const char *maj = NULL, *min = NULL;
	DAT_RETURN rc = dat_strerror(0x8005000c, &maj, &min);

	harness_check("dat_strerror", rc == DAT_SUCCESS && maj && min &&
		      !strcmp(maj, "DAT_INVALID_HANDLE") && !strcmp(min, "DAT_INVALID_HANDLE_EP"),
		      "rc=%#x major=%s minor=%s", rc, maj ? maj : "(null)", min ? min : "(null)");
}

static void good_ia(void)
{
	DAT_IA_HANDLE x = NULL;
	DAT_EVD_HANDLE qevd = NULL;
	DAT_IA_ATTR attr;
	DAT_PROVIDER_ATTR pattr;
	DAT_EVD_PARAM evp;
	DAT_CONTEXT ctx;
	DAT_HANDLE_TYPE type = (DAT_HANDLE_TYPE)-1;
	DAT_RETURN rc;

	aevd = NULL;
	raw = open_ia("dat_ia_openv", 7, &aevd, &ia, 1, 1);
	if (!raw) {
		harness_check("setup", 0, "cannot continue without an IA");
		exit(1);
	}

	rc = dats_get_ia_handle(ia, &x);
	harness_check("dats_get_ia_handle:to_raw", rc == DAT_SUCCESS && U(x) == raw,
		      "rc=%#x got %p want %#llx", rc, x, (unsigned long long)raw);
	x = NULL;
	rc = dats_get_ia_handle((DAT_IA_HANDLE)(uintptr_t)raw, &x);
	harness_check("dats_get_ia_handle:to_small", rc == DAT_SUCCESS && x == ia,
		      "rc=%#x got %p want %p", rc, x, ia);

	j_reset();
	memset(&attr, 0, sizeof attr);
	memset(&pattr, 0, sizeof pattr);
	rc = dat_ia_query(ia, &qevd, 0x1234, &attr, 0x40000000, &pattr);
	if (EXPECT_CALLS("dat_ia_query", rc, DAT_SUCCESS, C("ia_query", raw, 1, 0x1234, 1, 0x40000000, 1)))
		harness_check("dat_ia_query:outputs", qevd == aevd && attr.max_eps == 0x4242 &&
			      !strcmp(pattr.provider_name, "fakeprov"),
			      "async evd %p (want %p) max_eps %#x provider %s", qevd, aevd, attr.max_eps,
			      pattr.provider_name);

	/* the async EVD the provider created in ia_open is a usable handle */
	j_reset();
	rc = dat_evd_query(aevd, DAT_EVD_FIELD_ALL, &evp);
	if (EXPECT_CALLS("async_evd_usable", rc, DAT_SUCCESS, C("evd_query", U(aevd), DAT_EVD_FIELD_ALL, 1)))
		harness_check("async_evd_usable:ia_handle", evp.ia_handle == ia, "ia_handle %p", evp.ia_handle);

	j_reset();
	ctx.as_64 = 0xC0FFEE;
	rc = dat_set_consumer_context(ia, ctx);
	EXPECT_CALLS("dat_set_consumer_context:ia", rc, DAT_SUCCESS,
		     C("set_consumer_context", raw, 0xC0FFEE));
	j_reset();
	ctx.as_64 = 0;
	rc = dat_get_consumer_context(ia, &ctx);
	if (EXPECT_CALLS("dat_get_consumer_context:ia", rc, DAT_SUCCESS, C("get_consumer_context", raw, 1)))
		harness_check("dat_get_consumer_context:ia:value", ctx.as_64 == 0xC0FFEE, "got %#llx",
			      (unsigned long long)ctx.as_64);
	j_reset();
	rc = dat_get_handle_type(ia, &type);
	if (EXPECT_CALLS("dat_get_handle_type:ia", rc, DAT_SUCCESS, C("get_handle_type", raw, 1)))
		harness_check("dat_get_handle_type:ia:value", type == DAT_HANDLE_TYPE_IA, "got %d", type);
}

static void good_pz_cno_evd(void)
{
	DAT_PZ_PARAM pzp;
	DAT_CNO_PARAM cnop;
	DAT_EVD_PARAM evp;
	DAT_EVD_HANDLE wevd = NULL;
	DAT_EVENT sev;
	DAT_RETURN rc;

	j_reset();
	rc = dat_pz_create(ia, &pz);
	EXPECT_CALLS("dat_pz_create", rc, DAT_SUCCESS, C("pz_create", raw, 1));
	harness_check("dat_pz_create:handle", pz && U(pz) == out0(0), "pz %p", pz);
	j_reset();
	pzp.ia_handle = NULL;
	rc = dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pzp);
	if (EXPECT_CALLS("dat_pz_query", rc, DAT_SUCCESS, C("pz_query", U(pz), DAT_PZ_FIELD_ALL, 1)))
		harness_check("dat_pz_query:ia_handle", pzp.ia_handle == ia, "ia_handle %p", pzp.ia_handle);

	j_reset();
	rc = dat_cno_create(ia, agent(0x1111, 0x2222), &cno);
	EXPECT_CALLS("dat_cno_create", rc, DAT_SUCCESS, C("cno_create", raw, 0x1111, 0x2222, 1));
	harness_check("dat_cno_create:handle", cno && U(cno) == out0(0), "cno %p", cno);
	j_reset();
	rc = dat_cno_modify_agent(cno, agent(0x3333, 0x4444));
	EXPECT_CALLS("dat_cno_modify_agent", rc, DAT_SUCCESS, C("cno_modify_agent", U(cno), 0x3333, 0x4444));
	j_reset();
	rc = dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cnop);
	if (EXPECT_CALLS("dat_cno_query", rc, DAT_SUCCESS, C("cno_query", U(cno), DAT_CNO_FIELD_ALL, 1)))
		harness_check("dat_cno_query:ia_handle", cnop.ia_handle == ia, "ia_handle %p", cnop.ia_handle);

	j_reset();
	rc = dat_evd_create(ia, 17, cno, DAT_EVD_DEFAULT_FLAG, &evd);
	EXPECT_CALLS("dat_evd_create", rc, DAT_SUCCESS,
		     C("evd_create", raw, 17, U(cno), DAT_EVD_DEFAULT_FLAG, 1));
	harness_check("dat_evd_create:handle", evd && U(evd) == out0(0), "evd %p", evd);
	j_reset();
	rc = dat_evd_create(ia, 5, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &crevd);
	EXPECT_CALLS("dat_evd_create:null_cno", rc, DAT_SUCCESS,
		     C("evd_create", raw, 5, 0, DAT_EVD_CR_FLAG, 1));
	j_reset();
	dat_evd_create(ia, 6, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dtoevd);
	dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &connevd);
	harness_check("evd_setup", dtoevd && connevd && j_count() == 2, "dto %p conn %p", dtoevd, connevd);

	j_reset();
	memset(&evp, 0, sizeof evp);
	rc = dat_evd_query(evd, DAT_EVD_FIELD_ALL, &evp);
	if (EXPECT_CALLS("dat_evd_query", rc, DAT_SUCCESS, C("evd_query", U(evd), DAT_EVD_FIELD_ALL, 1)))
		harness_check("dat_evd_query:outputs", evp.ia_handle == ia && evp.evd_qlen == 17 &&
			      evp.cno_handle == cno && evp.evd_flags == DAT_EVD_DEFAULT_FLAG,
			      "ia %p qlen %d cno %p flags %#x", evp.ia_handle, evp.evd_qlen, evp.cno_handle,
			      evp.evd_flags);
	j_reset();
	rc = dat_evd_modify_cno(evd, DAT_HANDLE_NULL);
	EXPECT_CALLS("dat_evd_modify_cno:null", rc, DAT_SUCCESS, C("evd_modify_cno", U(evd), 0));
	j_reset();
	rc = dat_evd_modify_cno(evd, cno);
	EXPECT_CALLS("dat_evd_modify_cno", rc, DAT_SUCCESS, C("evd_modify_cno", U(evd), U(cno)));
	j_reset();
	rc = dat_evd_enable(evd);
	EXPECT_CALLS("dat_evd_enable", rc, DAT_SUCCESS, C("evd_enable", U(evd)));
	j_reset();
	rc = dat_evd_disable(evd);
	EXPECT_CALLS("dat_evd_disable", rc, DAT_SUCCESS, C("evd_disable", U(evd)));
	j_reset();
	rc = dat_evd_set_unwaitable(evd);
	EXPECT_CALLS("dat_evd_set_unwaitable", rc, DAT_SUCCESS, C("evd_set_unwaitable", U(evd)));
	j_reset();
	rc = dat_evd_clear_unwaitable(evd);
	EXPECT_CALLS("dat_evd_clear_unwaitable", rc, DAT_SUCCESS, C("evd_clear_unwaitable", U(evd)));
	j_reset();
	rc = dat_evd_resize(evd, 99);
	EXPECT_CALLS("dat_evd_resize", rc, DAT_SUCCESS, C("evd_resize", U(evd), 99));
	j_reset();
	memset(&sev, 0, sizeof sev);
	sev.event_number = DAT_SOFTWARE_EVENT;
	sev.event_data.software_event_data.pointer = (DAT_PVOID)0xabc;
	rc = dat_evd_post_se(evd, &sev);
	EXPECT_CALLS("dat_evd_post_se", rc, DAT_SUCCESS,
		     C("evd_post_se", U(evd), U(&sev), DAT_SOFTWARE_EVENT));
	j_reset();
	rc = dat_cno_wait(cno, 0x12345, &wevd);
	EXPECT_CALLS("dat_cno_wait", rc, DAT_SUCCESS, C("cno_wait", U(cno), 0x12345, 1));
	harness_check("dat_cno_wait:evd", wevd && U(wevd) == out0(0), "evd %p", wevd);
}

static void good_ep(void)
{
	DAT_EP_PARAM epp;
	DAT_EP_STATE st = (DAT_EP_STATE)-1;
	DAT_BOOLEAN in = -1, out = -1;
	DAT_COUNT nb = 0, sz = 0;
	DAT_RETURN rc;

	memset(&epattr, 0, sizeof epattr);
	epattr.max_recv_dtos = 9;
	j_reset();
	rc = dat_ep_create(ia, pz, dtoevd, evd, connevd, &epattr, &ep);
	EXPECT_CALLS("dat_ep_create", rc, DAT_SUCCESS,
		     C("ep_create", raw, U(pz), U(dtoevd), U(evd), U(connevd), U(&epattr), 1));
	harness_check("dat_ep_create:handle", ep && U(ep) == out0(0), "ep %p", ep);
	j_reset();
	rc = dat_ep_create(ia, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, NULL, &ep_nul);
	EXPECT_CALLS("dat_ep_create:nulls", rc, DAT_SUCCESS, C("ep_create", raw, 0, 0, 0, 0, 0, 1));

	srqattr.max_recv_dtos = 33;
	srqattr.max_recv_iov = 2;
	srqattr.low_watermark = 1;
	j_reset();
	rc = dat_srq_create(ia, pz, &srqattr, &srq);
	EXPECT_CALLS("dat_srq_create", rc, DAT_SUCCESS, C("srq_create", raw, U(pz), U(&srqattr), 1));
	harness_check("dat_srq_create:handle", srq && U(srq) == out0(0), "srq %p", srq);
	j_reset();
	rc = dat_ep_create_with_srq(ia, pz, dtoevd, evd, connevd, srq, &epattr, &ep_srq);
	EXPECT_CALLS("dat_ep_create_with_srq", rc, DAT_SUCCESS,
		     C("ep_create_with_srq", raw, U(pz), U(dtoevd), U(evd), U(connevd), U(srq), U(&epattr), 1));
	harness_check("dat_ep_create_with_srq:handle", ep_srq && U(ep_srq) == out0(0), "ep %p", ep_srq);

	j_reset();
	memset(&epp, 0, sizeof epp);
	rc = dat_ep_query(ep, DAT_EP_FIELD_ALL, &epp);
	if (EXPECT_CALLS("dat_ep_query", rc, DAT_SUCCESS, C("ep_query", U(ep), DAT_EP_FIELD_ALL, 1)))
		harness_check("dat_ep_query:outputs", epp.ia_handle == ia && epp.ep_state == DAT_EP_STATE_CONNECTED &&
			      epp.pz_handle == pz && epp.recv_evd_handle == dtoevd && epp.request_evd_handle == evd &&
			      epp.connect_evd_handle == connevd, "ia %p state %d pz %p", epp.ia_handle,
			      epp.ep_state, epp.pz_handle);
	j_reset();
	rc = dat_ep_modify(ep, 0x100, &epp);
	EXPECT_CALLS("dat_ep_modify", rc, DAT_SUCCESS, C("ep_modify", U(ep), 0x100, U(&epp)));
	j_reset();
	rc = dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&peer, 0xC0C0, 0x1234567, 48, pdata,
			    (DAT_QOS)2, (DAT_CONNECT_FLAGS)1);
	EXPECT_CALLS("dat_ep_connect", rc, DAT_SUCCESS,
		     C("ep_connect", U(ep), U(&peer), 0xC0C0, 0x1234567, 48, U(pdata), 2, 1));
	j_reset();
	rc = dat_ep_dup_connect(ep, ep_nul, 0x4321, 16, pdata, (DAT_QOS)1);
	EXPECT_CALLS("dat_ep_dup_connect", rc, DAT_SUCCESS,
		     C("ep_dup_connect", U(ep), U(ep_nul), 0x4321, 16, U(pdata), 1));
	j_reset();
	rc = dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG);
	EXPECT_CALLS("dat_ep_disconnect", rc, DAT_SUCCESS, C("ep_disconnect", U(ep), DAT_CLOSE_GRACEFUL_FLAG));
	j_reset();
	rc = dat_ep_post_send(ep, 2, iov, dto_cookie(0x1122334455667788ull), (DAT_COMPLETION_FLAGS)0x9);
	EXPECT_CALLS("dat_ep_post_send", rc, DAT_SUCCESS,
		     C("ep_post_send", U(ep), 2, U(iov), 0x1122334455667788ull, 0x9));
	j_reset();
	rc = dat_ep_post_recv(ep, 3, iov, dto_cookie(0x99aabbccddeeff00ull), (DAT_COMPLETION_FLAGS)0x2);
	EXPECT_CALLS("dat_ep_post_recv", rc, DAT_SUCCESS,
		     C("ep_post_recv", U(ep), 3, U(iov), 0x99aabbccddeeff00ull, 0x2));
	j_reset();
	rc = dat_ep_post_rdma_read(ep, 1, iov, dto_cookie(0x9999), &rtrip, (DAT_COMPLETION_FLAGS)0x8);
	EXPECT_CALLS("dat_ep_post_rdma_read", rc, DAT_SUCCESS,
		     C("ep_post_rdma_read", U(ep), 1, U(iov), 0x9999, U(&rtrip), 0x8));
	j_reset();
	rc = dat_ep_post_rdma_write(ep, 4, iov, dto_cookie(0x7777), &rtrip, (DAT_COMPLETION_FLAGS)0x1);
	EXPECT_CALLS("dat_ep_post_rdma_write", rc, DAT_SUCCESS,
		     C("ep_post_rdma_write", U(ep), 4, U(iov), 0x7777, U(&rtrip), 0x1));
	j_reset();
	rc = dat_ep_get_status(ep, &st, &in, &out);
	if (EXPECT_CALLS("dat_ep_get_status", rc, DAT_SUCCESS, C("ep_get_status", U(ep), 1, 1, 1)))
		harness_check("dat_ep_get_status:outputs", st == DAT_EP_STATE_CONNECTED && in == DAT_TRUE &&
			      out == DAT_FALSE, "state %d in %d out %d", st, in, out);
	j_reset();
	rc = dat_ep_get_status(ep, NULL, &in, &out);
	EXPECT_CALLS("dat_ep_get_status:null_state", rc, DAT_SUCCESS, C("ep_get_status", U(ep), 0, 1, 1));
	j_reset();
	rc = dat_ep_reset(ep);
	EXPECT_CALLS("dat_ep_reset", rc, DAT_SUCCESS, C("ep_reset", U(ep)));
	j_reset();
	rc = dat_ep_recv_query(ep, &nb, &sz);
	if (EXPECT_CALLS("dat_ep_recv_query", rc, DAT_SUCCESS, C("ep_recv_query", U(ep), 1, 1)))
		harness_check("dat_ep_recv_query:outputs", nb == 11 && sz == 22, "%d %d", nb, sz);
	j_reset();
	rc = dat_ep_set_watermark(ep, 5, 6);
	EXPECT_CALLS("dat_ep_set_watermark", rc, DAT_SUCCESS, C("ep_set_watermark", U(ep), 5, 6));
}

static void good_memory(void)
{
	DAT_LMR_CONTEXT lctx = 0;
	DAT_RMR_CONTEXT rctx = 0;
	DAT_VLEN rlen = 0;
	DAT_VADDR raddr = 0;
	DAT_LMR_HANDLE lmr2 = NULL, lmr3 = NULL, lmr4 = NULL;
	DAT_REGION_DESCRIPTION reg;
	DAT_LMR_PARAM lp;
	DAT_RMR_PARAM rp;
	DAT_RMR_COOKIE rc_cookie;
	DAT_RETURN rc;

	j_reset();
	rc = dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region_va(buf), 0x10000, pz, DAT_MEM_PRIV_ALL_FLAG,
			    DAT_VA_TYPE_VA, &lmr, &lctx, &rctx, &rlen, &raddr);
	if (EXPECT_CALLS("dat_lmr_create", rc, DAT_SUCCESS,
			 C("lmr_create", raw, DAT_MEM_TYPE_VIRTUAL, U(buf), 0, 0x10000, U(pz), DAT_MEM_PRIV_ALL_FLAG,
			   DAT_VA_TYPE_VA, 1, 1, 1, 1, 1)))
		harness_check("dat_lmr_create:outputs", lmr && U(lmr) == out0(0) && lctx == 0x1111 &&
			      rctx == 0x2222 && rlen == 0x10000 && raddr == U(buf),
			      "lmr %p lctx %#x rctx %#x len %#llx addr %#llx", lmr, lctx, rctx,
			      (unsigned long long)rlen, (unsigned long long)raddr);
	j_reset();
	rc = dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region_va(buf + 64), 0x20, pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
			    DAT_VA_TYPE_ZB, &lmr2, NULL, NULL, NULL, NULL);
	EXPECT_CALLS("dat_lmr_create:null_outputs", rc, DAT_SUCCESS,
		     C("lmr_create", raw, DAT_MEM_TYPE_VIRTUAL, U(buf + 64), 0, 0x20, U(pz),
		       DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_VA_TYPE_ZB, 1, 0, 0, 0, 0));
	j_reset();
	rc = dat_lmr_create(ia, DAT_MEM_TYPE_LMR, region_lmr(lmr), 0x30, pz, DAT_MEM_PRIV_LOCAL_READ_FLAG,
			    DAT_VA_TYPE_VA, &lmr3, &lctx, NULL, NULL, NULL);
	EXPECT_CALLS("dat_lmr_create:mem_type_lmr", rc, DAT_SUCCESS,
		     C("lmr_create", raw, DAT_MEM_TYPE_LMR, U(lmr), 0, 0x30, U(pz), DAT_MEM_PRIV_LOCAL_READ_FLAG,
		       DAT_VA_TYPE_VA, 1, 1, 0, 0, 0));
	memset(&reg, 0, sizeof reg);
	reg.for_shared_memory.virtual_address = buf + 128;
	reg.for_shared_memory.shared_memory_id = &shared_id;
	j_reset();
	rc = dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, reg, 0x40, pz, DAT_MEM_PRIV_REMOTE_READ_FLAG,
			    DAT_VA_TYPE_VA, &lmr4, NULL, &rctx, NULL, &raddr);
	EXPECT_CALLS("dat_lmr_create:shared", rc, DAT_SUCCESS,
		     C("lmr_create", raw, DAT_MEM_TYPE_SHARED_VIRTUAL, U(buf + 128), U(&shared_id), 0x40, U(pz),
		       DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, 1, 0, 1, 0, 1));
	j_reset();
	memset(&lp, 0, sizeof lp);
	rc = dat_lmr_query(lmr, DAT_LMR_FIELD_ALL, &lp);
	if (EXPECT_CALLS("dat_lmr_query", rc, DAT_SUCCESS, C("lmr_query", U(lmr), DAT_LMR_FIELD_ALL, 1)))
		harness_check("dat_lmr_query:outputs", lp.ia_handle == ia && lp.length == 0x10000 &&
			      lp.pz_handle == pz, "ia %p len %#llx pz %p", lp.ia_handle,
			      (unsigned long long)lp.length, lp.pz_handle);
	j_reset();
	rc = dat_lmr_sync_rdma_read(ia, iov, 3);
	EXPECT_CALLS("dat_lmr_sync_rdma_read", rc, DAT_SUCCESS, C("lmr_sync_rdma_read", raw, U(iov), 3));
	j_reset();
	rc = dat_lmr_sync_rdma_write(ia, iov, 4);
	EXPECT_CALLS("dat_lmr_sync_rdma_write", rc, DAT_SUCCESS, C("lmr_sync_rdma_write", raw, U(iov), 4));

	j_reset();
	rc = dat_rmr_create(pz, &rmr);
	EXPECT_CALLS("dat_rmr_create", rc, DAT_SUCCESS, C("rmr_create", U(pz), 1));
	harness_check("dat_rmr_create:handle", rmr && U(rmr) == out0(0), "rmr %p", rmr);
	j_reset();
	memset(&rp, 0, sizeof rp);
	rc = dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &rp);
	if (EXPECT_CALLS("dat_rmr_query", rc, DAT_SUCCESS, C("rmr_query", U(rmr), DAT_RMR_FIELD_ALL, 1)))
		harness_check("dat_rmr_query:outputs", rp.ia_handle == ia && rp.pz_handle == pz,
			      "ia %p pz %p", rp.ia_handle, rp.pz_handle);
	rc_cookie.as_64 = 0x5555;
	rctx = 0;
	j_reset();
	rc = dat_rmr_bind(rmr, lmr, &iov[0], (DAT_MEM_PRIV_FLAGS)0x22, DAT_VA_TYPE_VA, ep, rc_cookie,
			  (DAT_COMPLETION_FLAGS)0x4, &rctx);
	if (EXPECT_CALLS("dat_rmr_bind", rc, DAT_SUCCESS,
			 C("rmr_bind", U(rmr), U(lmr), U(&iov[0]), 0x22, DAT_VA_TYPE_VA, U(ep), 0x5555, 0x4, 1)))
		harness_check("dat_rmr_bind:context", rctx == 0x3333, "rmr_context %#x", rctx);
	j_reset();
	rc = dat_rmr_bind(rmr, DAT_HANDLE_NULL, &iov[1], (DAT_MEM_PRIV_FLAGS)0, DAT_VA_TYPE_VA, ep, rc_cookie,
			  (DAT_COMPLETION_FLAGS)0, NULL);
	EXPECT_CALLS("dat_rmr_bind:null_lmr", rc, DAT_SUCCESS,
		     C("rmr_bind", U(rmr), 0, U(&iov[1]), 0, DAT_VA_TYPE_VA, U(ep), 0x5555, 0, 0));

	j_reset();
	rc = dat_lmr_free(lmr2);
	EXPECT_CALLS("dat_lmr_free", rc, DAT_SUCCESS, C("lmr_free", U(lmr2)));
	dat_lmr_free(lmr3);
	dat_lmr_free(lmr4);
}

static void good_sp_srq(void)
{
	DAT_PSP_HANDLE psp2 = NULL;
	DAT_CONN_QUAL q = 0;
	DAT_PSP_PARAM spp;
	DAT_RSP_PARAM rsp_p;
	DAT_SRQ_PARAM sp;
	DAT_RETURN rc;

	j_reset();
	rc = dat_psp_create(ia, 0xC0C0, crevd, DAT_PSP_PROVIDER_FLAG, &psp);
	EXPECT_CALLS("dat_psp_create", rc, DAT_SUCCESS,
		     C("psp_create", raw, 0xC0C0, U(crevd), DAT_PSP_PROVIDER_FLAG, 1));
	harness_check("dat_psp_create:handle", psp && U(psp) == out0(0), "psp %p", psp);
	j_reset();
	rc = dat_psp_create_any(ia, &q, crevd, DAT_PSP_CONSUMER_FLAG, &psp2);
	if (EXPECT_CALLS("dat_psp_create_any", rc, DAT_SUCCESS,
			 C("psp_create_any", raw, 1, U(crevd), DAT_PSP_CONSUMER_FLAG, 1)))
		harness_check("dat_psp_create_any:outputs", q == 0x7777 && psp2 && U(psp2) == out0(0),
			      "qual %#llx psp %p", (unsigned long long)q, psp2);
	j_reset();
	memset(&spp, 0, sizeof spp);
	rc = dat_psp_query(psp, DAT_PSP_FIELD_ALL, &spp);
	if (EXPECT_CALLS("dat_psp_query", rc, DAT_SUCCESS, C("psp_query", U(psp), DAT_PSP_FIELD_ALL, 1)))
		harness_check("dat_psp_query:outputs", spp.ia_handle == ia && spp.conn_qual == 0xC0C0 &&
			      spp.evd_handle == crevd && spp.psp_flags == DAT_PSP_PROVIDER_FLAG,
			      "ia %p qual %#llx evd %p", spp.ia_handle, (unsigned long long)spp.conn_qual,
			      spp.evd_handle);
	j_reset();
	rc = dat_psp_free(psp2);
	EXPECT_CALLS("dat_psp_free", rc, DAT_SUCCESS, C("psp_free", U(psp2)));

	j_reset();
	rc = dat_rsp_create(ia, 0xD0D0, ep_nul, crevd, &rsp);
	EXPECT_CALLS("dat_rsp_create", rc, DAT_SUCCESS, C("rsp_create", raw, 0xD0D0, U(ep_nul), U(crevd), 1));
	harness_check("dat_rsp_create:handle", rsp && U(rsp) == out0(0), "rsp %p", rsp);
	j_reset();
	memset(&rsp_p, 0, sizeof rsp_p);
	rc = dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &rsp_p);
	if (EXPECT_CALLS("dat_rsp_query", rc, DAT_SUCCESS, C("rsp_query", U(rsp), DAT_RSP_FIELD_ALL, 1)))
		harness_check("dat_rsp_query:outputs", rsp_p.ia_handle == ia && rsp_p.ep_handle == ep_nul &&
			      rsp_p.conn_qual == 0xD0D0, "ia %p ep %p", rsp_p.ia_handle, rsp_p.ep_handle);

	j_reset();
	rc = dat_srq_post_recv(srq, 2, iov, dto_cookie(0x4444));
	EXPECT_CALLS("dat_srq_post_recv", rc, DAT_SUCCESS, C("srq_post_recv", U(srq), 2, U(iov), 0x4444));
	j_reset();
	memset(&sp, 0, sizeof sp);
	rc = dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &sp);
	if (EXPECT_CALLS("dat_srq_query", rc, DAT_SUCCESS, C("srq_query", U(srq), DAT_SRQ_FIELD_ALL, 1)))
		harness_check("dat_srq_query:outputs", sp.ia_handle == ia && sp.pz_handle == pz &&
			      sp.max_recv_dtos == 0x99, "ia %p pz %p", sp.ia_handle, sp.pz_handle);
	j_reset();
	rc = dat_srq_resize(srq, 64);
	EXPECT_CALLS("dat_srq_resize", rc, DAT_SUCCESS, C("srq_resize", U(srq), 64));
	j_reset();
	rc = dat_srq_set_lw(srq, 8);
	EXPECT_CALLS("dat_srq_set_lw", rc, DAT_SUCCESS, C("srq_set_lw", U(srq), 8));
}

static DAT_CR_HANDLE dequeue_cr(const char *name)
{
	DAT_EVENT ev;
	DAT_RETURN rc;

	memset(&ev, 0, sizeof ev);
	j_reset();
	rc = dat_evd_dequeue(crevd, &ev);
	if (!EXPECT_CALLS(name, rc, DAT_SUCCESS, C("evd_dequeue", U(crevd), 1)))
		return NULL;
	if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT ||
	    U(ev.event_data.cr_arrival_event_data.cr_handle) != out0(0) || ev.evd_handle != crevd) {
		harness_check(name, 0, "event %#x cr %p", ev.event_number, ev.event_data.cr_arrival_event_data.cr_handle);
		return NULL;
	}
	return ev.event_data.cr_arrival_event_data.cr_handle;
}

static void good_cr(void)
{
	DAT_EVENT ev;
	DAT_COUNT nmore = -1;
	DAT_CR_PARAM crp;
	DAT_CR_HANDLE c;
	DAT_RETURN rc;

	memset(&ev, 0, sizeof ev);
	j_reset();
	rc = dat_evd_wait(crevd, 0x7777, 1, &ev, &nmore);
	if (EXPECT_CALLS("dat_evd_wait", rc, DAT_SUCCESS, C("evd_wait", U(crevd), 0x7777, 1, 1, 1)))
		harness_check("dat_evd_wait:event", ev.event_number == DAT_CONNECTION_REQUEST_EVENT &&
			      U(ev.event_data.cr_arrival_event_data.cr_handle) == out0(0) && nmore == 0 &&
			      ev.evd_handle == crevd, "event %#x nmore %d", ev.event_number, nmore);
	c = ev.event_data.cr_arrival_event_data.cr_handle;
	j_reset();
	memset(&crp, 0, sizeof crp);
	rc = dat_cr_query(c, DAT_CR_FIELD_ALL, &crp);
	if (EXPECT_CALLS("dat_cr_query", rc, DAT_SUCCESS, C("cr_query", U(c), DAT_CR_FIELD_ALL, 1)))
		harness_check("dat_cr_query:outputs", crp.remote_port_qual == 0x5151, "qual %#llx",
			      (unsigned long long)crp.remote_port_qual);
	j_reset();
	rc = dat_cr_accept(c, ep, 48, pdata);
	EXPECT_CALLS("dat_cr_accept", rc, DAT_SUCCESS, C("cr_accept", U(c), U(ep), 48, U(pdata)));

	if ((c = dequeue_cr("dat_evd_dequeue"))) {
		j_reset();
		rc = dat_cr_reject(c, 16, pdata);
		EXPECT_CALLS("dat_cr_reject", rc, DAT_SUCCESS, C("cr_reject", U(c), 16, U(pdata)));
	}
	if ((c = dequeue_cr("dat_evd_dequeue:2"))) {
		j_reset();
		rc = dat_cr_handoff(c, 0xABCDEF);
		EXPECT_CALLS("dat_cr_handoff", rc, DAT_SUCCESS, C("cr_handoff", U(c), 0xABCDEF));
	}
	if ((c = dequeue_cr("dat_evd_dequeue:3"))) {
		j_reset();
		rc = dat_cr_accept(c, DAT_HANDLE_NULL, 0, NULL);
		EXPECT_CALLS("dat_cr_accept:null_ep", rc, DAT_SUCCESS, C("cr_accept", U(c), 0, 0, 0));
	}
	/* kept for the bad-handle part */
	cr = dequeue_cr("dat_evd_dequeue:4");
}

static void good_context(void)
{
	DAT_CONTEXT ctx;
	DAT_HANDLE_TYPE type = (DAT_HANDLE_TYPE)-1;
	DAT_RETURN rc;

	ctx.as_64 = 0xBEEF;
	j_reset();
	rc = dat_set_consumer_context(ep, ctx);
	EXPECT_CALLS("dat_set_consumer_context:ep", rc, DAT_SUCCESS, C("set_consumer_context", U(ep), 0xBEEF));
	ctx.as_64 = 0;
	j_reset();
	rc = dat_get_consumer_context(ep, &ctx);
	if (EXPECT_CALLS("dat_get_consumer_context:ep", rc, DAT_SUCCESS, C("get_consumer_context", U(ep), 1)))
		harness_check("dat_get_consumer_context:ep:value", ctx.as_64 == 0xBEEF, "got %#llx",
			      (unsigned long long)ctx.as_64);
	j_reset();
	rc = dat_get_handle_type(lmr, &type);
	if (EXPECT_CALLS("dat_get_handle_type:lmr", rc, DAT_SUCCESS, C("get_handle_type", U(lmr), 1)))
		harness_check("dat_get_handle_type:lmr:value", type == DAT_HANDLE_TYPE_LMR, "got %d", type);
}

static void good_extension(void)
{
	DAT_HANDLE qia = NULL;
	DAT_IA_ATTR qattr;
	DAT_PROVIDER_ATTR qpattr;
	DAT_CONTEXT ctx;
	DAT_RETURN rc;

	j_reset();
	rc = dat_extension_op(ep, DAT_IB_CMP_AND_SWAP_OP, (DAT_UINT64)0x1111222233334444ull,
			      (DAT_UINT64)0x5555666677778888ull, &iov[0], dto_cookie(0x0102030405060708ull),
			      &rtrip, (DAT_COMPLETION_FLAGS)0x1);
	EXPECT_CALLS("dat_extension_op:cmp_and_swap", rc, DAT_SUCCESS,
		     C("extendedop", U(ep), DAT_IB_CMP_AND_SWAP_OP, 0x1111222233334444ull, 0x5555666677778888ull,
		       U(&iov[0]), 0x0102030405060708ull, U(&rtrip), 0x1));
	j_reset();
	rc = dat_extension_op(ep, DAT_IB_FETCH_AND_ADD_OP, (DAT_UINT64)0x100, &iov[1], dto_cookie(0x77),
			      &rtrip, (DAT_COMPLETION_FLAGS)0x8);
	EXPECT_CALLS("dat_extension_op:fetch_and_add", rc, DAT_SUCCESS,
		     C("extendedop", U(ep), DAT_IB_FETCH_AND_ADD_OP, 0x100, U(&iov[1]), 0x77, U(&rtrip), 0x8));
	j_reset();
	rc = dat_extension_op(ia, DAT_IB_PRINT_COUNTERS_OP, 3, 1);
	EXPECT_CALLS("dat_extension_op:ia_handle", rc, DAT_SUCCESS,
		     C("extendedop", raw, DAT_IB_PRINT_COUNTERS_OP, 3, 1));
	ctx.as_64 = 0xA8A8A8A8A8A8A8A8ull;
	j_reset();
	rc = dat_extension_op(evd, DAT_IB_COLLECTIVE_REDUCE_OP, (void *)0xA1, (DAT_COUNT)0xA2, (void *)0xA3,
			      (DAT_COUNT)0xA4, 0xA5, 0xA6, (unsigned int)0xA7, ctx, (DAT_COMPLETION_FLAGS)0x9);
	EXPECT_CALLS("dat_extension_op:nine_args", rc, DAT_SUCCESS,
		     C("extendedop", U(evd), DAT_IB_COLLECTIVE_REDUCE_OP, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7,
		       0xA8A8A8A8A8A8A8A8ull, 0x9));
	j_reset();
	rc = dat_extension_op(ep, 0x77);
	EXPECT_CALLS("dat_extension_op:status_passthrough", rc, DAT_NOT_IMPLEMENTED,
		     C("extendedop", U(ep), 0x77));

	memset(&qattr, 0, sizeof qattr);
	memset(&qpattr, 0, sizeof qpattr);
	j_reset();
	rc = dat_extension_op(DAT_HANDLE_NULL, DAT_IB_OPEN_QUERY_OP, IA_NAME, &qia, (DAT_IA_ATTR_MASK)DAT_IA_FIELD_ALL,
			      &qattr, (DAT_PROVIDER_ATTR_MASK)DAT_PROVIDER_FIELD_ALL, &qpattr);
	if (EXPECT_CALLS("dat_extension_op:open_query", rc, DAT_SUCCESS,
			 CS("extendedop", IA_NAME, 0, DAT_IB_OPEN_QUERY_OP, 1, DAT_IA_FIELD_ALL, 1,
			    DAT_PROVIDER_FIELD_ALL, 1)))
		harness_check("dat_extension_op:open_query:outputs", qia && U(qia) == out0(0) &&
			      qattr.max_eps == 0x4242 && !strcmp(qpattr.provider_name, "fakeprov"),
			      "ia %p max_eps %#x", qia, qattr.max_eps);
	j_reset();
	rc = dat_extension_op(qia, DAT_IB_CLOSE_QUERY_OP);
	EXPECT_CALLS("dat_extension_op:close_query", rc, DAT_SUCCESS,
		     C("extendedop", U(qia), DAT_IB_CLOSE_QUERY_OP));
}

static void good_status_passthrough(void)
{
	DAT_EVENT ev;
	DAT_EP_HANDLE e = (DAT_EP_HANDLE)0x5a5a;
	DAT_RETURN rc;

	j_reset();
	j_fail_later(0, 0x000d0000);
	rc = dat_evd_dequeue(dtoevd, &ev);
	EXPECT_CALLS("status:raw_queue_empty", rc, 0x000d0000, C("evd_dequeue", U(dtoevd), 1));
	j_reset();
	j_fail_later(0, 0x80060027);
	rc = dat_ep_post_send(ep, 1, iov, dto_cookie(1), DAT_COMPLETION_DEFAULT_FLAG);
	EXPECT_CALLS("status:error", rc, 0x80060027, C("ep_post_send", U(ep), 1, U(iov), 1, 0));
	j_reset();
	j_fail_later(0, 0x80030002);
	rc = dat_ep_create(ia, pz, dtoevd, evd, connevd, NULL, &e);
	EXPECT_CALLS("status:create_fails", rc, 0x80030002,
		     C("ep_create", raw, U(pz), U(dtoevd), U(evd), U(connevd), 0, 1));
	j_reset();
	j_fail_later(0, 0x40000001);
	rc = dat_evd_enable(evd);
	EXPECT_CALLS("status:warning", rc, 0x40000001, C("evd_enable", U(evd)));
}

static void good_frees(void)
{
	DAT_RETURN rc;

#define FREE1(nm, call, fn, h) do { \
		j_reset(); \
		rc = call; \
		EXPECT_CALLS(nm, rc, DAT_SUCCESS, C(fn, U(h))); \
	} while (0)
	FREE1("dat_rmr_free", dat_rmr_free(rmr), "rmr_free", rmr);
	FREE1("dat_lmr_free:2", dat_lmr_free(lmr), "lmr_free", lmr);
	FREE1("dat_psp_free:2", dat_psp_free(psp), "psp_free", psp);
	FREE1("dat_rsp_free", dat_rsp_free(rsp), "rsp_free", rsp);
	FREE1("dat_ep_free", dat_ep_free(ep), "ep_free", ep);
	FREE1("dat_ep_free:2", dat_ep_free(ep_srq), "ep_free", ep_srq);
	FREE1("dat_ep_free:3", dat_ep_free(ep_nul), "ep_free", ep_nul);
	FREE1("dat_srq_free", dat_srq_free(srq), "srq_free", srq);
	FREE1("dat_evd_free", dat_evd_free(evd), "evd_free", evd);
	FREE1("dat_cno_free", dat_cno_free(cno), "cno_free", cno);
	FREE1("dat_evd_free:2", dat_evd_free(dtoevd), "evd_free", dtoevd);
	FREE1("dat_evd_free:3", dat_evd_free(connevd), "evd_free", connevd);
	FREE1("dat_pz_free", dat_pz_free(pz), "pz_free", pz);
	if (cr) {
		j_reset();
		rc = dat_cr_reject(cr, 0, NULL);
		EXPECT_CALLS("dat_cr_reject:2", rc, DAT_SUCCESS, C("cr_reject", U(cr), 0, 0));
	}
	FREE1("dat_evd_free:4", dat_evd_free(crevd), "evd_free", crevd);
#undef FREE1
}

static void good_lifecycle(void)
{
	DAT_IA_HANDLE ia2 = NULL, ia3 = (DAT_IA_HANDLE)0x5a5a;
	DAT_EVD_HANDLE aevd2 = NULL, aevd3 = NULL;
	DAT_IA_ATTR attr;
	uint64_t raw2;
	DAT_RETURN rc;

	raw2 = open_ia("dat_ia_openv:second", 3, &aevd2, &ia2, 2, 0);
	close_ia("dat_ia_close:not_last", ia2, raw2, DAT_CLOSE_GRACEFUL_FLAG, 0);

	/* a failing provider ia_query makes dat_ia_close fail and keep the IA */
	j_reset();
	j_fail_later(0, 0x80070050);
	rc = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
	EXPECT_CALLS("dat_ia_close:query_fails", rc, 0x80070050,
		     C("ia_query", raw, 0, 0, 0, DAT_PROVIDER_FIELD_ALL, 1));
	/* a failing provider ia_close: status returned, IA still open */
	j_reset();
	j_fail_later(1, 0x80070050);
	rc = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
	EXPECT_CALLS("dat_ia_close:close_fails", rc, 0x80070050,
		     C("ia_query", raw, 0, 0, 0, DAT_PROVIDER_FIELD_ALL, 1), C("ia_close", raw, DAT_CLOSE_GRACEFUL_FLAG));
	j_reset();
	rc = dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL);
	EXPECT_CALLS("dat_ia_close:still_open", rc, DAT_SUCCESS, C("ia_query", raw, 0, DAT_IA_FIELD_ALL, 1, 0, 0));

	close_ia("dat_ia_close:last", ia, raw, DAT_CLOSE_ABRUPT_FLAG, 1);
	j_reset();
	rc = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	EXPECT_NO_CALLS("dat_ia_close:twice", rc, 0x8005000b);
	j_reset();
	rc = dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL);
	EXPECT_NO_CALLS("dat_ia_query:closed", rc, 0x8005000b);

	/* the provider is initialised again after its fini */
	ia2 = NULL;
	aevd2 = NULL;
	raw2 = open_ia("dat_ia_openv:reload", 4, &aevd2, &ia2, 1, 1);
	close_ia("dat_ia_close:reload", ia2, raw2, DAT_CLOSE_ABRUPT_FLAG, 1);

	/* the provider's ia_open fails: its status comes back, the provider is released */
	j_reset();
	j_fail_later(0, 0x00120000);
	rc = dat_ia_openv(IA_NAME, 5, &aevd3, &ia3, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE);
	harness_check("dat_ia_openv:provider_fails", rc == 0x00120000 && count_fn("ia_open") == 1 &&
		      count_fn("provider_init") == count_fn("provider_fini") && ia3 == (DAT_IA_HANDLE)0x5a5a,
		      "rc=%#x ia_open calls %d init %d fini %d handle %p", rc, count_fn("ia_open"),
		      count_fn("provider_init"), count_fn("provider_fini"), ia3);
}

/* The run uses the library run.sh meant (FPTEST_LIB: the real path of its file). */
static void check_library(void)
{
	const char *want = getenv("FPTEST_LIB");
	char got[4096] = "?";
	Dl_info info;

	if (dladdr((void *)dat_strerror, &info) && info.dli_fname && !realpath(info.dli_fname, got))
		snprintf(got, sizeof got, "%s", info.dli_fname);
	harness_check("which-library", want && !strcmp(got, want), "running %s, expected %s", got,
		      want ? want : "(FPTEST_LIB unset)");
}

static void run_good(void)
{
	memset(iov, 0, sizeof iov);
	check_library();
	good_registry();
	good_strerror();
	good_ia();
	good_pz_cno_evd();
	good_ep();
	good_memory();
	good_sp_srq();
	good_cr();
	good_context();
	good_extension();
	good_status_passthrough();
	good_frees();
	good_lifecycle();
}

/* ====================================================================== */
/* bad handles (our library only; the original one crashes on most)        */
/* ====================================================================== */

enum kind { K_IA, K_EP, K_EVD, K_CNO, K_LMR, K_RMR, K_PZ, K_PSP, K_RSP, K_CR, K_SRQ, K_ANY, K_NKINDS };
static DAT_HANDLE good_of[K_NKINDS], stale_of[K_NKINDS], wrong_of[K_NKINDS];
static DAT_HANDLE orphan_ep, orphan_evd; /* objects of an IA closed abruptly */
static void *zero_block, *forged_block;
static DAT_EP_HANDLE ep2;

typedef DAT_RETURN (*call_fn)(DAT_HANDLE h);

struct bad_case {
	const char *name;
	enum kind kind;
	DAT_RETURN code;
	int null_ok;          /* DAT_HANDLE_NULL is a legal value here */
	call_fn call;
};

#define H(x) ((DAT_HANDLE)(x))

/* first-argument calls; every other argument is valid */
static DAT_RETURN c_ia_query(DAT_HANDLE h)
{
	DAT_IA_ATTR a;
	DAT_PROVIDER_ATTR p;
	return dat_ia_query(h, NULL, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p);
}
static DAT_RETURN c_ia_close(DAT_HANDLE h) { return dat_ia_close(h, DAT_CLOSE_ABRUPT_FLAG); }
static DAT_RETURN c_ep_create(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create(h, pz, dtoevd, evd, connevd, NULL, &e);
}
static DAT_RETURN c_ep_create_with_srq(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create_with_srq(h, pz, dtoevd, evd, connevd, srq, NULL, &e);
}
static DAT_RETURN c_lmr_create(DAT_HANDLE h)
{
	DAT_LMR_HANDLE l;
	return dat_lmr_create(h, DAT_MEM_TYPE_VIRTUAL, region_va(buf), 64, pz, DAT_MEM_PRIV_ALL_FLAG,
			      DAT_VA_TYPE_VA, &l, NULL, NULL, NULL, NULL);
}
static DAT_RETURN c_evd_create(DAT_HANDLE h)
{
	DAT_EVD_HANDLE e;
	return dat_evd_create(h, 4, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &e);
}
static DAT_RETURN c_cno_create(DAT_HANDLE h)
{
	DAT_CNO_HANDLE c;
	return dat_cno_create(h, agent(0, 0), &c);
}
static DAT_RETURN c_lmr_sync_rdma_read(DAT_HANDLE h) { return dat_lmr_sync_rdma_read(h, iov, 1); }
static DAT_RETURN c_lmr_sync_rdma_write(DAT_HANDLE h) { return dat_lmr_sync_rdma_write(h, iov, 1); }
static DAT_RETURN c_psp_create(DAT_HANDLE h)
{
	DAT_PSP_HANDLE p;
	return dat_psp_create(h, 0x1010, crevd, DAT_PSP_CONSUMER_FLAG, &p);
}
static DAT_RETURN c_psp_create_any(DAT_HANDLE h)
{
	DAT_PSP_HANDLE p;
	DAT_CONN_QUAL q;
	return dat_psp_create_any(h, &q, crevd, DAT_PSP_CONSUMER_FLAG, &p);
}
static DAT_RETURN c_rsp_create(DAT_HANDLE h)
{
	DAT_RSP_HANDLE r;
	return dat_rsp_create(h, 0x2020, ep2, crevd, &r);
}
static DAT_RETURN c_pz_create(DAT_HANDLE h)
{
	DAT_PZ_HANDLE p;
	return dat_pz_create(h, &p);
}
static DAT_RETURN c_srq_create(DAT_HANDLE h)
{
	DAT_SRQ_HANDLE s;
	return dat_srq_create(h, pz, &srqattr, &s);
}
static DAT_RETURN c_set_ctx(DAT_HANDLE h)
{
	DAT_CONTEXT c;
	c.as_64 = 1;
	return dat_set_consumer_context(h, c);
}
static DAT_RETURN c_get_ctx(DAT_HANDLE h)
{
	DAT_CONTEXT c;
	return dat_get_consumer_context(h, &c);
}
static DAT_RETURN c_get_type(DAT_HANDLE h)
{
	DAT_HANDLE_TYPE t;
	return dat_get_handle_type(h, &t);
}
static DAT_RETURN c_extension_op(DAT_HANDLE h)
{
	return dat_extension_op(h, DAT_IB_CMP_AND_SWAP_OP, (DAT_UINT64)1, (DAT_UINT64)2, &iov[0],
				dto_cookie(3), &rtrip, DAT_COMPLETION_DEFAULT_FLAG);
}
static DAT_RETURN c_cr_query(DAT_HANDLE h)
{
	DAT_CR_PARAM p;
	return dat_cr_query(h, DAT_CR_FIELD_ALL, &p);
}
static DAT_RETURN c_cr_accept(DAT_HANDLE h) { return dat_cr_accept(h, ep2, 0, NULL); }
static DAT_RETURN c_cr_reject(DAT_HANDLE h) { return dat_cr_reject(h, 0, NULL); }
static DAT_RETURN c_cr_handoff(DAT_HANDLE h) { return dat_cr_handoff(h, 0x3030); }
static DAT_RETURN c_evd_query(DAT_HANDLE h)
{
	DAT_EVD_PARAM p;
	return dat_evd_query(h, DAT_EVD_FIELD_ALL, &p);
}
static DAT_RETURN c_evd_modify_cno(DAT_HANDLE h) { return dat_evd_modify_cno(h, cno); }
static DAT_RETURN c_evd_enable(DAT_HANDLE h) { return dat_evd_enable(h); }
static DAT_RETURN c_evd_disable(DAT_HANDLE h) { return dat_evd_disable(h); }
static DAT_RETURN c_evd_wait(DAT_HANDLE h)
{
	DAT_EVENT e;
	DAT_COUNT n;
	return dat_evd_wait(h, 0, 1, &e, &n);
}
static DAT_RETURN c_evd_resize(DAT_HANDLE h) { return dat_evd_resize(h, 32); }
static DAT_RETURN c_evd_post_se(DAT_HANDLE h)
{
	DAT_EVENT e;
	memset(&e, 0, sizeof e);
	e.event_number = DAT_SOFTWARE_EVENT;
	return dat_evd_post_se(h, &e);
}
static DAT_RETURN c_evd_dequeue(DAT_HANDLE h)
{
	DAT_EVENT e;
	return dat_evd_dequeue(h, &e);
}
static DAT_RETURN c_evd_free(DAT_HANDLE h) { return dat_evd_free(h); }
static DAT_RETURN c_evd_set_unwaitable(DAT_HANDLE h) { return dat_evd_set_unwaitable(h); }
static DAT_RETURN c_evd_clear_unwaitable(DAT_HANDLE h) { return dat_evd_clear_unwaitable(h); }
static DAT_RETURN c_cno_modify_agent(DAT_HANDLE h) { return dat_cno_modify_agent(h, agent(1, 2)); }
static DAT_RETURN c_cno_query(DAT_HANDLE h)
{
	DAT_CNO_PARAM p;
	return dat_cno_query(h, DAT_CNO_FIELD_ALL, &p);
}
static DAT_RETURN c_cno_free(DAT_HANDLE h) { return dat_cno_free(h); }
static DAT_RETURN c_cno_wait(DAT_HANDLE h)
{
	DAT_EVD_HANDLE e;
	return dat_cno_wait(h, 0, &e);
}
static DAT_RETURN c_ep_query(DAT_HANDLE h)
{
	DAT_EP_PARAM p;
	return dat_ep_query(h, DAT_EP_FIELD_ALL, &p);
}
static DAT_RETURN c_ep_modify(DAT_HANDLE h)
{
	DAT_EP_PARAM p;
	memset(&p, 0, sizeof p);
	return dat_ep_modify(h, 0, &p);
}
static DAT_RETURN c_ep_connect(DAT_HANDLE h)
{
	return dat_ep_connect(h, (DAT_IA_ADDRESS_PTR)&peer, 1, 1000, 0, NULL, DAT_QOS_BEST_EFFORT,
			      DAT_CONNECT_DEFAULT_FLAG);
}
static DAT_RETURN c_ep_dup_connect(DAT_HANDLE h)
{
	return dat_ep_dup_connect(h, ep2, 1000, 0, NULL, DAT_QOS_BEST_EFFORT);
}
static DAT_RETURN c_ep_disconnect(DAT_HANDLE h) { return dat_ep_disconnect(h, DAT_CLOSE_ABRUPT_FLAG); }
static DAT_RETURN c_ep_post_send(DAT_HANDLE h)
{
	return dat_ep_post_send(h, 1, iov, dto_cookie(1), DAT_COMPLETION_DEFAULT_FLAG);
}
static DAT_RETURN c_ep_post_recv(DAT_HANDLE h)
{
	return dat_ep_post_recv(h, 1, iov, dto_cookie(1), DAT_COMPLETION_DEFAULT_FLAG);
}
static DAT_RETURN c_ep_post_rdma_read(DAT_HANDLE h)
{
	return dat_ep_post_rdma_read(h, 1, iov, dto_cookie(1), &rtrip, DAT_COMPLETION_DEFAULT_FLAG);
}
static DAT_RETURN c_ep_post_rdma_write(DAT_HANDLE h)
{
	return dat_ep_post_rdma_write(h, 1, iov, dto_cookie(1), &rtrip, DAT_COMPLETION_DEFAULT_FLAG);
}
static DAT_RETURN c_ep_get_status(DAT_HANDLE h)
{
	DAT_EP_STATE s;
	DAT_BOOLEAN a, b;
	return dat_ep_get_status(h, &s, &a, &b);
}
static DAT_RETURN c_ep_free(DAT_HANDLE h) { return dat_ep_free(h); }
static DAT_RETURN c_ep_reset(DAT_HANDLE h) { return dat_ep_reset(h); }
static DAT_RETURN c_ep_recv_query(DAT_HANDLE h)
{
	DAT_COUNT a, b;
	return dat_ep_recv_query(h, &a, &b);
}
static DAT_RETURN c_ep_set_watermark(DAT_HANDLE h) { return dat_ep_set_watermark(h, 1, 1); }
static DAT_RETURN c_lmr_query(DAT_HANDLE h)
{
	DAT_LMR_PARAM p;
	return dat_lmr_query(h, DAT_LMR_FIELD_ALL, &p);
}
static DAT_RETURN c_lmr_free(DAT_HANDLE h) { return dat_lmr_free(h); }
static DAT_RETURN c_rmr_create(DAT_HANDLE h)
{
	DAT_RMR_HANDLE r;
	return dat_rmr_create(h, &r);
}
static DAT_RETURN c_rmr_query(DAT_HANDLE h)
{
	DAT_RMR_PARAM p;
	return dat_rmr_query(h, DAT_RMR_FIELD_ALL, &p);
}
static DAT_RETURN c_rmr_bind(DAT_HANDLE h)
{
	DAT_RMR_COOKIE c;
	DAT_RMR_CONTEXT ctx;
	c.as_64 = 1;
	return dat_rmr_bind(h, lmr, &iov[0], DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, ep2, c,
			    DAT_COMPLETION_DEFAULT_FLAG, &ctx);
}
static DAT_RETURN c_rmr_free(DAT_HANDLE h) { return dat_rmr_free(h); }
static DAT_RETURN c_pz_query(DAT_HANDLE h)
{
	DAT_PZ_PARAM p;
	return dat_pz_query(h, DAT_PZ_FIELD_ALL, &p);
}
static DAT_RETURN c_pz_free(DAT_HANDLE h) { return dat_pz_free(h); }
static DAT_RETURN c_psp_query(DAT_HANDLE h)
{
	DAT_PSP_PARAM p;
	return dat_psp_query(h, DAT_PSP_FIELD_ALL, &p);
}
static DAT_RETURN c_psp_free(DAT_HANDLE h) { return dat_psp_free(h); }
static DAT_RETURN c_rsp_query(DAT_HANDLE h)
{
	DAT_RSP_PARAM p;
	return dat_rsp_query(h, DAT_RSP_FIELD_ALL, &p);
}
static DAT_RETURN c_rsp_free(DAT_HANDLE h) { return dat_rsp_free(h); }
static DAT_RETURN c_srq_free(DAT_HANDLE h) { return dat_srq_free(h); }
static DAT_RETURN c_srq_post_recv(DAT_HANDLE h) { return dat_srq_post_recv(h, 1, iov, dto_cookie(1)); }
static DAT_RETURN c_srq_query(DAT_HANDLE h)
{
	DAT_SRQ_PARAM p;
	return dat_srq_query(h, DAT_SRQ_FIELD_ALL, &p);
}
static DAT_RETURN c_srq_resize(DAT_HANDLE h) { return dat_srq_resize(h, 16); }
static DAT_RETURN c_srq_set_lw(DAT_HANDLE h) { return dat_srq_set_lw(h, 1); }
static DAT_RETURN c_dats_get_ia_handle(DAT_HANDLE h)
{
	DAT_IA_HANDLE out;
	return dats_get_ia_handle(h, &out);
}

/* second-position handles; the first argument is valid */
static DAT_RETURN s_ep_create_pz(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create(ia, h, dtoevd, evd, connevd, NULL, &e);
}
static DAT_RETURN s_ep_create_recv(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create(ia, pz, h, evd, connevd, NULL, &e);
}
static DAT_RETURN s_ep_create_req(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create(ia, pz, dtoevd, h, connevd, NULL, &e);
}
static DAT_RETURN s_ep_create_conn(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create(ia, pz, dtoevd, evd, h, NULL, &e);
}
static DAT_RETURN s_eps_pz(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create_with_srq(ia, h, dtoevd, evd, connevd, srq, NULL, &e);
}
static DAT_RETURN s_eps_recv(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create_with_srq(ia, pz, h, evd, connevd, srq, NULL, &e);
}
static DAT_RETURN s_eps_req(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create_with_srq(ia, pz, dtoevd, h, connevd, srq, NULL, &e);
}
static DAT_RETURN s_eps_conn(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create_with_srq(ia, pz, dtoevd, evd, h, srq, NULL, &e);
}
static DAT_RETURN s_eps_srq(DAT_HANDLE h)
{
	DAT_EP_HANDLE e;
	return dat_ep_create_with_srq(ia, pz, dtoevd, evd, connevd, h, NULL, &e);
}
static DAT_RETURN s_evd_create_cno(DAT_HANDLE h)
{
	DAT_EVD_HANDLE e;
	return dat_evd_create(ia, 4, h, DAT_EVD_DTO_FLAG, &e);
}
static DAT_RETURN s_psp_create_evd(DAT_HANDLE h)
{
	DAT_PSP_HANDLE p;
	return dat_psp_create(ia, 0x1010, h, DAT_PSP_CONSUMER_FLAG, &p);
}
static DAT_RETURN s_psp_create_any_evd(DAT_HANDLE h)
{
	DAT_PSP_HANDLE p;
	DAT_CONN_QUAL q;
	return dat_psp_create_any(ia, &q, h, DAT_PSP_CONSUMER_FLAG, &p);
}
static DAT_RETURN s_rsp_create_evd(DAT_HANDLE h)
{
	DAT_RSP_HANDLE r;
	return dat_rsp_create(ia, 0x2020, ep2, h, &r);
}
static DAT_RETURN s_rsp_create_ep(DAT_HANDLE h)
{
	DAT_RSP_HANDLE r;
	return dat_rsp_create(ia, 0x2020, h, crevd, &r);
}
static DAT_RETURN s_cr_accept_ep(DAT_HANDLE h) { return dat_cr_accept(cr, h, 0, NULL); }
static DAT_RETURN s_ep_dup_connect_dup(DAT_HANDLE h)
{
	return dat_ep_dup_connect(ep2, h, 1000, 0, NULL, DAT_QOS_BEST_EFFORT);
}
static DAT_RETURN s_rmr_bind_ep(DAT_HANDLE h)
{
	DAT_RMR_COOKIE c;
	DAT_RMR_CONTEXT ctx;
	c.as_64 = 1;
	return dat_rmr_bind(rmr, lmr, &iov[0], DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, h, c,
			    DAT_COMPLETION_DEFAULT_FLAG, &ctx);
}
static DAT_RETURN s_rmr_bind_lmr(DAT_HANDLE h)
{
	DAT_RMR_COOKIE c;
	DAT_RMR_CONTEXT ctx;
	c.as_64 = 1;
	return dat_rmr_bind(rmr, h, &iov[0], DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, ep2, c,
			    DAT_COMPLETION_DEFAULT_FLAG, &ctx);
}
static DAT_RETURN s_srq_create_pz(DAT_HANDLE h)
{
	DAT_SRQ_HANDLE s;
	return dat_srq_create(ia, h, &srqattr, &s);
}
static DAT_RETURN s_lmr_create_pz(DAT_HANDLE h)
{
	DAT_LMR_HANDLE l;
	return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region_va(buf), 64, h, DAT_MEM_PRIV_ALL_FLAG,
			      DAT_VA_TYPE_VA, &l, NULL, NULL, NULL, NULL);
}
static DAT_RETURN s_lmr_create_region(DAT_HANDLE h)
{
	DAT_LMR_HANDLE l;
	return dat_lmr_create(ia, DAT_MEM_TYPE_LMR, region_lmr(h), 64, pz, DAT_MEM_PRIV_ALL_FLAG,
			      DAT_VA_TYPE_VA, &l, NULL, NULL, NULL, NULL);
}
static DAT_RETURN s_ia_openv_async(DAT_HANDLE h)
{
	DAT_EVD_HANDLE e = h;
	DAT_IA_HANDLE i;
	return dat_ia_openv(IA_NAME, 4, &e, &i, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE);
}

#define HI 0x8005000bu
#define HEP 0x8005000cu
#define HLMR 0x8005000du
#define HRMR 0x8005000eu
#define HPZ 0x8005000fu
#define HPSP 0x80050010u
#define HRSP 0x80050011u
#define HCR 0x80050012u
#define HCNO 0x80050013u
#define HEVD_CR 0x80050014u
#define HEVD_REQ 0x80050015u
#define HEVD_RECV 0x80050016u
#define HEVD_CONN 0x80050017u
#define HEVD_ASYNC 0x80050018u
#define HSRQ 0x80050019u
#define H1 0x8005001bu

static const struct bad_case first_arg[] = {
	{"dat_ia_query", K_IA, HI, 0, c_ia_query},
	{"dat_ia_close", K_IA, HI, 0, c_ia_close},
	{"dat_ep_create", K_IA, HI, 0, c_ep_create},
	{"dat_ep_create_with_srq", K_IA, HI, 0, c_ep_create_with_srq},
	{"dat_lmr_create", K_IA, HI, 0, c_lmr_create},
	{"dat_evd_create", K_IA, HI, 0, c_evd_create},
	{"dat_cno_create", K_IA, HI, 0, c_cno_create},
	{"dat_lmr_sync_rdma_read", K_IA, HI, 0, c_lmr_sync_rdma_read},
	{"dat_lmr_sync_rdma_write", K_IA, HI, 0, c_lmr_sync_rdma_write},
	{"dat_psp_create", K_IA, HI, 0, c_psp_create},
	{"dat_psp_create_any", K_IA, HI, 0, c_psp_create_any},
	{"dat_rsp_create", K_IA, HI, 0, c_rsp_create},
	{"dat_pz_create", K_IA, HI, 0, c_pz_create},
	{"dat_srq_create", K_IA, HI, 0, c_srq_create},
	{"dats_get_ia_handle", K_IA, HI, 0, c_dats_get_ia_handle},
	{"dat_set_consumer_context", K_ANY, H1, 0, c_set_ctx},
	{"dat_get_consumer_context", K_ANY, H1, 0, c_get_ctx},
	{"dat_get_handle_type", K_ANY, H1, 0, c_get_type},
	{"dat_extension_op", K_ANY, H1, 0, c_extension_op},
	{"dat_cr_query", K_CR, HCR, 0, c_cr_query},
	{"dat_cr_accept", K_CR, HCR, 0, c_cr_accept},
	{"dat_cr_reject", K_CR, HCR, 0, c_cr_reject},
	{"dat_cr_handoff", K_CR, HCR, 0, c_cr_handoff},
	{"dat_evd_query", K_EVD, HEVD_REQ, 0, c_evd_query},
	{"dat_evd_modify_cno", K_EVD, HEVD_REQ, 0, c_evd_modify_cno},
	{"dat_evd_enable", K_EVD, HEVD_REQ, 0, c_evd_enable},
	{"dat_evd_disable", K_EVD, HEVD_REQ, 0, c_evd_disable},
	{"dat_evd_wait", K_EVD, HEVD_REQ, 0, c_evd_wait},
	{"dat_evd_resize", K_EVD, HEVD_REQ, 0, c_evd_resize},
	{"dat_evd_post_se", K_EVD, HEVD_REQ, 0, c_evd_post_se},
	{"dat_evd_dequeue", K_EVD, HEVD_REQ, 0, c_evd_dequeue},
	{"dat_evd_free", K_EVD, HEVD_REQ, 0, c_evd_free},
	{"dat_evd_set_unwaitable", K_EVD, HEVD_REQ, 0, c_evd_set_unwaitable},
	{"dat_evd_clear_unwaitable", K_EVD, HEVD_REQ, 0, c_evd_clear_unwaitable},
	{"dat_cno_modify_agent", K_CNO, HCNO, 0, c_cno_modify_agent},
	{"dat_cno_query", K_CNO, HCNO, 0, c_cno_query},
	{"dat_cno_free", K_CNO, HCNO, 0, c_cno_free},
	{"dat_cno_wait", K_CNO, HCNO, 0, c_cno_wait},
	{"dat_ep_query", K_EP, HEP, 0, c_ep_query},
	{"dat_ep_modify", K_EP, HEP, 0, c_ep_modify},
	{"dat_ep_connect", K_EP, HEP, 0, c_ep_connect},
	{"dat_ep_dup_connect", K_EP, HEP, 0, c_ep_dup_connect},
	{"dat_ep_disconnect", K_EP, HEP, 0, c_ep_disconnect},
	{"dat_ep_post_send", K_EP, HEP, 0, c_ep_post_send},
	{"dat_ep_post_recv", K_EP, HEP, 0, c_ep_post_recv},
	{"dat_ep_post_rdma_read", K_EP, HEP, 0, c_ep_post_rdma_read},
	{"dat_ep_post_rdma_write", K_EP, HEP, 0, c_ep_post_rdma_write},
	{"dat_ep_get_status", K_EP, HEP, 0, c_ep_get_status},
	{"dat_ep_free", K_EP, HEP, 0, c_ep_free},
	{"dat_ep_reset", K_EP, HEP, 0, c_ep_reset},
	{"dat_ep_recv_query", K_EP, HEP, 0, c_ep_recv_query},
	{"dat_ep_set_watermark", K_EP, HEP, 0, c_ep_set_watermark},
	{"dat_lmr_query", K_LMR, HLMR, 0, c_lmr_query},
	{"dat_lmr_free", K_LMR, HLMR, 0, c_lmr_free},
	{"dat_rmr_create", K_PZ, HPZ, 0, c_rmr_create},
	{"dat_rmr_query", K_RMR, HRMR, 0, c_rmr_query},
	{"dat_rmr_bind", K_RMR, HRMR, 0, c_rmr_bind},
	{"dat_rmr_free", K_RMR, HRMR, 0, c_rmr_free},
	{"dat_pz_query", K_PZ, HPZ, 0, c_pz_query},
	{"dat_pz_free", K_PZ, HPZ, 0, c_pz_free},
	{"dat_psp_query", K_PSP, HPSP, 0, c_psp_query},
	{"dat_psp_free", K_PSP, HPSP, 0, c_psp_free},
	{"dat_rsp_query", K_RSP, HRSP, 0, c_rsp_query},
	{"dat_rsp_free", K_RSP, HRSP, 0, c_rsp_free},
	{"dat_srq_free", K_SRQ, HSRQ, 0, c_srq_free},
	{"dat_srq_post_recv", K_SRQ, HSRQ, 0, c_srq_post_recv},
	{"dat_srq_query", K_SRQ, HSRQ, 0, c_srq_query},
	{"dat_srq_resize", K_SRQ, HSRQ, 0, c_srq_resize},
	{"dat_srq_set_lw", K_SRQ, HSRQ, 0, c_srq_set_lw},
};

static const struct bad_case other_arg[] = {
	{"dat_ep_create:pz", K_PZ, HPZ, 1, s_ep_create_pz},
	{"dat_ep_create:recv_evd", K_EVD, HEVD_RECV, 1, s_ep_create_recv},
	{"dat_ep_create:request_evd", K_EVD, HEVD_REQ, 1, s_ep_create_req},
	{"dat_ep_create:connect_evd", K_EVD, HEVD_CONN, 1, s_ep_create_conn},
	{"dat_ep_create_with_srq:pz", K_PZ, HPZ, 1, s_eps_pz},
	{"dat_ep_create_with_srq:recv_evd", K_EVD, HEVD_RECV, 1, s_eps_recv},
	{"dat_ep_create_with_srq:request_evd", K_EVD, HEVD_REQ, 1, s_eps_req},
	{"dat_ep_create_with_srq:connect_evd", K_EVD, HEVD_CONN, 1, s_eps_conn},
	{"dat_ep_create_with_srq:srq", K_SRQ, HSRQ, 0, s_eps_srq},
	{"dat_evd_create:cno", K_CNO, HCNO, 1, s_evd_create_cno},
	{"dat_psp_create:evd", K_EVD, HEVD_CR, 0, s_psp_create_evd},
	{"dat_psp_create_any:evd", K_EVD, HEVD_CR, 0, s_psp_create_any_evd},
	{"dat_rsp_create:evd", K_EVD, HEVD_CR, 0, s_rsp_create_evd},
	{"dat_rsp_create:ep", K_EP, HEP, 0, s_rsp_create_ep},
	{"dat_cr_accept:ep", K_EP, HEP, 1, s_cr_accept_ep},
	{"dat_ep_dup_connect:dup_ep", K_EP, HEP, 0, s_ep_dup_connect_dup},
	{"dat_rmr_bind:ep", K_EP, HEP, 0, s_rmr_bind_ep},
	{"dat_rmr_bind:lmr", K_LMR, HLMR, 1, s_rmr_bind_lmr},
	{"dat_srq_create:pz", K_PZ, HPZ, 0, s_srq_create_pz},
	{"dat_lmr_create:pz", K_PZ, HPZ, 0, s_lmr_create_pz},
	{"dat_lmr_create:region_lmr", K_LMR, HLMR, 0, s_lmr_create_region},
	{"dat_ia_openv:async_evd", K_EVD, HEVD_ASYNC, 1, s_ia_openv_async},
};

static int provider_was_called(void)
{
	for (int i = 0; i < j_count(); i++)
		if (strcmp(j_at(i)->fn, "provider_init") && strcmp(j_at(i)->fn, "add_provider") &&
		    strcmp(j_at(i)->fn, "provider_fini") && strcmp(j_at(i)->fn, "remove_provider"))
			return 1;
	return 0;
}

struct isolated_call {
	const char *name;
	const struct bad_case *bc;
	DAT_HANDLE h;
	int expect_ok;
};

/* In the child process of harness_isolated: the call and its check. */
static void isolated_call(void *arg)
{
	const struct isolated_call *ic = arg;
	const struct bad_case *bc = ic->bc;
	DAT_RETURN rc;
	char why[4096];

	j_reset();
	rc = bc->call(ic->h);
	if (ic->expect_ok) {
		/* a legal NULL reaches the provider */
		if (rc == DAT_SUCCESS && provider_was_called()) {
			harness_pass(ic->name);
		} else {
			render_journal(why, sizeof why);
			harness_check(ic->name, 0, "rc=%#x (want 0, provider called); provider saw: %s", rc, why);
		}
	} else if (rc == bc->code && !provider_was_called()) {
		harness_pass(ic->name);
	} else {
		render_journal(why, sizeof why);
		harness_check(ic->name, 0, "rc=%#x (want %#x); provider saw: %s", rc, bc->code, why);
	}
}

/* Runs one call in a child process so that a crash costs one check only. */
static void run_isolated(const char *name, const struct bad_case *bc, DAT_HANDLE h, int expect_ok)
{
	struct isolated_call ic = {name, bc, h, expect_ok};

	harness_isolated(name, isolated_call, &ic);
}

static void run_variants(const struct bad_case *bc)
{
	char name[256];
	struct { const char *v; DAT_HANDLE h; } vs[12];
	int n = 0;

	vs[n].v = "wild"; vs[n++].h = H(0x1234);
	vs[n].v = "zeroed"; vs[n++].h = zero_block;
	vs[n].v = "forged"; vs[n++].h = forged_block;
	if (bc->kind != K_ANY) {
		vs[n].v = "wrong_type"; vs[n++].h = wrong_of[bc->kind];
	}
	vs[n].v = "stale"; vs[n++].h = stale_of[bc->kind];
	if (bc->kind != K_IA && bc->kind != K_ANY && bc->call != s_ia_openv_async) {
		/* the consumer IA handle, a small integer, is not a handle of this type */
		vs[n].v = "ia_small_int"; vs[n++].h = ia;
	}
	if (bc->kind == K_IA) {
		vs[n].v = "unused_small_int"; vs[n++].h = H(7);
	}
	if (bc->kind == K_EP && bc->call != s_rsp_create_ep) {
		vs[n].v = "orphan"; vs[n++].h = orphan_ep;
	}
	if (bc->kind == K_EVD && bc->call != s_ia_openv_async) {
		vs[n].v = "orphan"; vs[n++].h = orphan_evd;
	}

	snprintf(name, sizeof name, "%s:null", bc->name);
	run_isolated(name, bc, DAT_HANDLE_NULL, bc->null_ok);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "%s:%s", bc->name, vs[i].v);
		run_isolated(name, bc, vs[i].h, 0);
	}
}

static DAT_HANDLE made(const char *what, DAT_RETURN rc, DAT_HANDLE h)
{
	if (rc != DAT_SUCCESS || !h) {
		harness_check("setup", 0, "%s failed: %#x", what, rc);
		exit(1);
	}
	return h;
}

static void bad_setup(void)
{
	DAT_EVD_HANDLE a2 = NULL, e;
	DAT_IA_HANDLE ia2;
	DAT_HANDLE h;
	DAT_EVENT ev;
	DAT_CONN_QUAL q;
	DAT_RETURN rc;

	aevd = NULL;
	rc = dat_ia_openv(IA_NAME, 4, &aevd, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE);
	made("dat_ia_openv", rc, ia);
	rc = dat_pz_create(ia, &pz);
	made("pz", rc, pz);
	rc = dat_cno_create(ia, agent(0, 0), &cno);
	made("cno", rc, cno);
	rc = dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DEFAULT_FLAG, &evd);
	made("evd", rc, evd);
	rc = dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &crevd);
	made("cr evd", rc, crevd);
	rc = dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dtoevd);
	made("dto evd", rc, dtoevd);
	rc = dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &connevd);
	made("conn evd", rc, connevd);
	srqattr.max_recv_dtos = 8;
	srqattr.max_recv_iov = 1;
	rc = dat_srq_create(ia, pz, &srqattr, &srq);
	made("srq", rc, srq);
	rc = dat_ep_create(ia, pz, dtoevd, evd, connevd, NULL, &ep);
	made("ep", rc, ep);
	rc = dat_ep_create(ia, pz, dtoevd, evd, connevd, NULL, &ep2);
	made("ep2", rc, ep2);
	rc = dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region_va(buf), sizeof buf, pz, DAT_MEM_PRIV_ALL_FLAG,
			    DAT_VA_TYPE_VA, &lmr, NULL, NULL, NULL, NULL);
	made("lmr", rc, lmr);
	rc = dat_rmr_create(pz, &rmr);
	made("rmr", rc, rmr);
	rc = dat_psp_create(ia, 0x4040, crevd, DAT_PSP_CONSUMER_FLAG, &psp);
	made("psp", rc, psp);
	rc = dat_rsp_create(ia, 0x5050, ep2, crevd, &rsp);
	made("rsp", rc, rsp);
	rc = dat_evd_dequeue(crevd, &ev);
	cr = ev.event_data.cr_arrival_event_data.cr_handle;
	made("cr", rc, cr);

	good_of[K_IA] = ia;
	good_of[K_EP] = ep;
	good_of[K_EVD] = evd;
	good_of[K_CNO] = cno;
	good_of[K_LMR] = lmr;
	good_of[K_RMR] = rmr;
	good_of[K_PZ] = pz;
	good_of[K_PSP] = psp;
	good_of[K_RSP] = rsp;
	good_of[K_CR] = cr;
	good_of[K_SRQ] = srq;

	/* wrong types: a live handle of some other kind */
	wrong_of[K_IA] = ep;
	wrong_of[K_EP] = evd;
	wrong_of[K_EVD] = ep;
	wrong_of[K_CNO] = evd;
	wrong_of[K_LMR] = rmr;
	wrong_of[K_RMR] = lmr;
	wrong_of[K_PZ] = lmr;
	wrong_of[K_PSP] = rsp;
	wrong_of[K_RSP] = psp;
	wrong_of[K_CR] = ep;
	wrong_of[K_SRQ] = pz;

	/* stale: created, then freed through the API */
	rc = dat_pz_create(ia, &h);
	stale_of[K_PZ] = made("stale pz", rc, h);
	made("free pz", dat_pz_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_cno_create(ia, agent(0, 0), &h);
	stale_of[K_CNO] = made("stale cno", rc, h);
	made("free cno", dat_cno_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_evd_create(ia, 4, DAT_HANDLE_NULL, DAT_EVD_DEFAULT_FLAG, &h);
	stale_of[K_EVD] = made("stale evd", rc, h);
	made("free evd", dat_evd_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_ep_create(ia, pz, dtoevd, evd, connevd, NULL, &h);
	stale_of[K_EP] = made("stale ep", rc, h);
	made("free ep", dat_ep_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region_va(buf), 64, pz, DAT_MEM_PRIV_ALL_FLAG,
			    DAT_VA_TYPE_VA, &h, NULL, NULL, NULL, NULL);
	stale_of[K_LMR] = made("stale lmr", rc, h);
	made("free lmr", dat_lmr_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_rmr_create(pz, &h);
	stale_of[K_RMR] = made("stale rmr", rc, h);
	made("free rmr", dat_rmr_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_psp_create_any(ia, &q, crevd, DAT_PSP_CONSUMER_FLAG, &h);
	stale_of[K_PSP] = made("stale psp", rc, h);
	made("free psp", dat_psp_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_rsp_create(ia, 0x6060, ep2, crevd, &h);
	stale_of[K_RSP] = made("stale rsp", rc, h);
	made("free rsp", dat_rsp_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_srq_create(ia, pz, &srqattr, &h);
	stale_of[K_SRQ] = made("stale srq", rc, h);
	made("free srq", dat_srq_free(h) == DAT_SUCCESS ? 0 : 1, h);
	rc = dat_evd_dequeue(crevd, &ev);
	stale_of[K_CR] = made("stale cr", rc, ev.event_data.cr_arrival_event_data.cr_handle);
	made("reject cr", dat_cr_reject(stale_of[K_CR], 0, NULL) == DAT_SUCCESS ? 0 : 1, stale_of[K_CR]);
	/* a context set on something freed must not be reachable either */
	stale_of[K_ANY] = stale_of[K_EP];

	/* a second IA, closed abruptly with objects still open */
	rc = dat_ia_openv(IA_NAME, 4, &a2, &ia2, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE);
	made("second ia", rc, ia2);
	rc = dat_evd_create(ia2, 4, DAT_HANDLE_NULL, DAT_EVD_DEFAULT_FLAG, &e);
	orphan_evd = made("orphan evd", rc, e);
	rc = dat_ep_create(ia2, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, DAT_HANDLE_NULL, NULL, &h);
	orphan_ep = made("orphan ep", rc, h);
	made("close second ia", dat_ia_close(ia2, DAT_CLOSE_ABRUPT_FLAG) == DAT_SUCCESS ? 0 : 1, ia2);
	stale_of[K_IA] = ia2;

	zero_block = calloc(1, 256);
	forged_block = calloc(1, 256);
	if (!zero_block || !forged_block)
		exit(1);
	*(void **)forged_block = j_provider();
	harness_pass("setup");
}

static void run_bad(void)
{
	size_t i;

	memset(iov, 0, sizeof iov);
	bad_setup();
	for (i = 0; i < sizeof first_arg / sizeof first_arg[0]; i++)
		run_variants(&first_arg[i]);
	for (i = 0; i < sizeof other_arg / sizeof other_arg[0]; i++)
		run_variants(&other_arg[i]);
	/* an EVD handle that is valid is passed on as the IA's async EVD */
	{
		static const struct bad_case live = {"dat_ia_openv:async_evd", K_EVD, 0, 1, s_ia_openv_async};
		run_isolated("dat_ia_openv:async_evd:live_evd", &live, evd, 1);
	}
}

static const struct harness_case cases[] = {
	{"good", run_good, 0},
	{"bad", run_bad, 0},
};

/* run.sh names every run: -l debian or -l dat2 */
static const struct harness_group group = {
	"fakeprov", cases, sizeof cases / sizeof cases[0], load_provider, NULL,
};

int main(int argc, char **argv)
{
	return harness_main(argc, argv, &group);
}
