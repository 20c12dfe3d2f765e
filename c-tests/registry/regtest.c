/*
 * Registry behaviour probe. Runs one scenario and writes one "key value" line per
 * observation to OUTFILE (never stdout, which belongs to the library's own
 * messages). run.sh runs each scenario against Debian's libdat2 and ours and
 * compares the files. Values never contain addresses, so they compare as text.
 *
 *   regtest SCENARIO OUTFILE [PROVIDER.so]
 *
 * Key suffixes for the provider list, where ours may hold more (its built-in
 * providers are listed after the dat.conf entries): "#ge" ours may report a larger
 * number, "#prefix" ours must start with Debian's value.
 */
#define _GNU_SOURCE /* dladdr */
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakeprov.h"

extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE *out);

static FILE *out;
static fake_ncalls_fn j_count;
static fake_call_at_fn j_at;
static fake_reset_fn j_reset;

static void put(const char *key, const char *fmt, ...)
{
	va_list ap;

	fprintf(out, "%s ", key);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
	fflush(out);
}

static void load_provider(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		fprintf(stderr, "regtest: %s\n", dlerror());
		exit(3);
	}
	j_count = (fake_ncalls_fn)dlsym(h, "fake_ncalls");
	j_at = (fake_call_at_fn)dlsym(h, "fake_call_at");
	j_reset = (fake_reset_fn)dlsym(h, "fake_reset");
	if (!j_count || !j_at || !j_reset)
		exit(3);
}

/* ---- listing ---------------------------------------------------------- */

static void list_all(const char *prefix)
{
	static DAT_PROVIDER_INFO infos[256];
	DAT_PROVIDER_INFO *ptrs[256];
	DAT_COUNT n = -1;
	DAT_RETURN rc;
	char key[128];

	for (int i = 0; i < 256; i++)
		ptrs[i] = &infos[i];
	memset(infos, 0, sizeof infos);
	rc = dat_registry_list_providers(256, &n, ptrs);
	snprintf(key, sizeof key, "%s.list.rc", prefix);
	put(key, "%#x", rc);
	snprintf(key, sizeof key, "%s.list.count#ge", prefix);
	put(key, "%d", n);
	/* all entries on one line, each ending with ';' */
	snprintf(key, sizeof key, "%s.list.entries#prefix", prefix);
	fprintf(out, "%s ", key);
	for (int i = 0; rc == DAT_SUCCESS && i < n && i < 256; i++)
		fprintf(out, "%s %u.%u %s;", infos[i].ia_name, infos[i].dapl_version_major,
			infos[i].dapl_version_minor, infos[i].is_thread_safe ? "threadsafe" : "nonthreadsafe");
	fputc('\n', out);
}

/* ---- opening through the fake provider -------------------------------- */

/* Opens name, reports status, the instance data the provider got, and the close. */
static void try_open(const char *key, const char *name, DAT_UINT32 major, DAT_UINT32 minor,
		     DAT_BOOLEAN ts)
{
	DAT_IA_HANDLE ia = NULL;
	DAT_EVD_HANDLE evd = NULL;
	char init[256] = "-";
	DAT_RETURN rc, crc = 0;
	int inits = 0;

	j_reset();
	rc = dat_ia_openv((DAT_NAME_PTR)name, 4, &evd, &ia, major, minor, ts);
	for (int i = 0; i < j_count(); i++)
		if (!strcmp(j_at(i)->fn, "provider_init")) {
			inits++;
			snprintf(init, sizeof init, "[%s] %u.%u.%u", j_at(i)->s, (unsigned)j_at(i)->a[1],
				 (unsigned)j_at(i)->a[2], (unsigned)j_at(i)->a[3]);
		}
	if (rc == DAT_SUCCESS)
		crc = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	put(key, "open=%#x handle=%lu inits=%d init=%s close=%#x", rc,
	    rc == DAT_SUCCESS ? (unsigned long)(uintptr_t)ia : 0ul, inits, init, crc);
}

static void scenario_conf(void)
{
	static const struct {
		const char *name;
		DAT_UINT32 major, minor;
		DAT_BOOLEAN ts;
	} names[] = {
		{"ok-plain", 2, 0, DAT_FALSE},
		{"ok-ts", 2, 0, DAT_TRUE},
		{"ok-ts", 2, 0, DAT_FALSE},
		{"ok-quoted", 2, 0, DAT_FALSE},
		{"ok-escaped", 2, 0, DAT_FALSE},
		{"ok-comment", 2, 0, DAT_FALSE},
		{"ok-tabs", 2, 0, DAT_FALSE},
		{"ok-prefix-ts", 2, 0, DAT_TRUE},
		{"bad-fields", 2, 0, DAT_FALSE},
		{"bad-toomany", 2, 0, DAT_FALSE},
		{"bad-api", 2, 0, DAT_FALSE},
		{"bad-api2", 2, 0, DAT_FALSE},
		{"bad-ts", 2, 0, DAT_FALSE},
		{"bad-default", 2, 0, DAT_FALSE},
		{"bad-provver", 2, 0, DAT_FALSE},
		{"ok-after-bad", 2, 0, DAT_FALSE},
		{"bad-quote", 2, 0, DAT_FALSE},
		{"ok-after-quote", 2, 0, DAT_FALSE},
		{"skip-nondefault", 2, 0, DAT_FALSE},
		{"skip-kdat", 2, 0, DAT_FALSE},
		{"dup", 2, 0, DAT_FALSE},
		{"ok-v13", 2, 0, DAT_FALSE},
		{"ok-v13", 1, 3, DAT_FALSE},
		{"missing-lib", 2, 0, DAT_FALSE},
		{"no-init", 2, 0, DAT_FALSE},
		{"not-a-library", 2, 0, DAT_FALSE},
		{"bare-name", 2, 0, DAT_FALSE},
		{"ok-last", 2, 0, DAT_FALSE},
		{"nosuch", 2, 0, DAT_FALSE},
		{"ok-plain", 1, 0, DAT_FALSE},
		{"ok-plain", 2, 1, DAT_FALSE},
		{"ok-plain", 2, 0, DAT_TRUE},
		{"OK-PLAIN", 2, 0, DAT_FALSE},
		{"ok-plai", 2, 0, DAT_FALSE},
	};
	char key[160];

	list_all("conf");
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(key, sizeof key, "conf.open.%s.%u.%u.%s", names[i].name, names[i].major,
			 names[i].minor, names[i].ts ? "ts" : "nts");
		try_open(key, names[i].name, names[i].major, names[i].minor, names[i].ts);
	}
	/* reopening after a close loads and initialises the provider again */
	try_open("conf.reopen.ok-plain", "ok-plain", 2, 0, DAT_FALSE);
}

/* ---- a provider registered directly (dynamic registry only) ----------- */

struct direct_ia {
	DAT_PROVIDER *prov;
};

static DAT_PROVIDER direct;
static struct direct_ia direct_ia_obj = {&direct};
static int direct_opens, direct_closes;

static DAT_RETURN d_ia_open(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *evd, DAT_IA_HANDLE *ia)
{
	(void)name;
	(void)qlen;
	(void)evd;
	direct_opens++;
	*ia = (DAT_IA_HANDLE)&direct_ia_obj;
	return DAT_SUCCESS;
}

static DAT_RETURN d_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *evd, DAT_IA_ATTR_MASK m1, DAT_IA_ATTR *a,
			     DAT_PROVIDER_ATTR_MASK m2, DAT_PROVIDER_ATTR *p)
{
	(void)ia;
	(void)m1;
	(void)m2;
	if (evd)
		*evd = NULL;
	if (a)
		memset(a, 0, sizeof *a);
	if (p) {
		memset(p, 0, sizeof *p);
		p->dapl_version_major = 2;
		p->dapl_version_minor = 0;
		p->is_thread_safe = DAT_FALSE;
	}
	return DAT_SUCCESS;
}

static DAT_RETURN d_ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags)
{
	(void)ia;
	(void)flags;
	direct_closes++;
	return DAT_SUCCESS;
}

static DAT_PROVIDER_INFO make_info(const char *name, DAT_UINT32 major, DAT_UINT32 minor, DAT_BOOLEAN ts)
{
	DAT_PROVIDER_INFO info;

	memset(&info, 0, sizeof info);
	snprintf(info.ia_name, sizeof info.ia_name, "%s", name);
	info.dapl_version_major = major;
	info.dapl_version_minor = minor;
	info.is_thread_safe = ts;
	return info;
}

static DAT_RETURN open_name(const char *name, DAT_IA_HANDLE *ia)
{
	DAT_EVD_HANDLE evd = NULL;

	return dat_ia_openv((DAT_NAME_PTR)name, 4, &evd, ia, 2, 0, DAT_FALSE);
}

static void scenario_args(void)
{
	DAT_PROVIDER_INFO infos[4], *ptrs[4], *holes[2];
	DAT_PROVIDER_INFO info = make_info("direct", 2, 0, DAT_FALSE);
	DAT_PROVIDER_INFO other = make_info("nope", 2, 0, DAT_FALSE);
	DAT_PROVIDER_INFO v1 = make_info("direct-v1", 1, 0, DAT_FALSE);
	DAT_IA_HANDLE ia = NULL, raw = NULL, back = NULL;
	DAT_EVD_HANDLE evd = NULL;
	DAT_COUNT n;
	DAT_RETURN rc;
	char name[300];

	list_all("args");
	for (int i = 0; i < 4; i++)
		ptrs[i] = &infos[i];
	memset(infos, 0, sizeof infos);

	rc = dat_registry_list_providers(4, NULL, ptrs);
	put("args.list.count_null", "%#x", rc);
	n = -1;
	rc = dat_registry_list_providers(4, &n, NULL);
	put("args.list.list_null", "%#x", rc);
	n = -1;
	rc = dat_registry_list_providers(0, &n, ptrs);
	put("args.list.max0.rc", "%#x", rc);
	put("args.list.max0.count#ge", "%d", n);
	n = -1;
	rc = dat_registry_list_providers(0, &n, NULL);
	put("args.list.max0_list_null.rc", "%#x", rc);
	put("args.list.max0_list_null.count#ge", "%d", n);
	n = -1;
	rc = dat_registry_list_providers(1, &n, ptrs);
	put("args.list.max1", "%#x count=%d first=%s", rc, n, infos[0].ia_name);
	n = -1;
	holes[0] = NULL;
	holes[1] = NULL;
	rc = dat_registry_list_providers(2, &n, holes);
	put("args.list.null_element", "%#x", rc);
	n = -1;
	rc = dat_registry_list_providers(-1, &n, ptrs);
	put("args.list.negative_max", "%#x count=%d", rc, rc == DAT_SUCCESS ? n : -1);

	rc = open_name(NULL, &ia);
	put("args.open.name_null", "%#x", rc);
	memset(name, 'a', sizeof name);
	name[256] = 0;
	rc = open_name(name, &ia);
	put("args.open.name_256", "%#x", rc);
	name[255] = 0;
	rc = open_name(name, &ia);
	put("args.open.name_255", "%#x", rc);
	rc = open_name("", &ia);
	put("args.open.name_empty", "%#x", rc);
	rc = dat_ia_openv("fake-ia", 4, &evd, NULL, 2, 0, DAT_FALSE);
	put("args.open.ia_null", "%#x", rc);
	rc = dat_ia_openv(NULL, 4, &evd, NULL, 2, 0, DAT_FALSE);
	put("args.open.name_and_ia_null", "%#x", rc);
	rc = open_name("unknown-name", &ia);
	put("args.open.unknown", "%#x", rc);
	rc = dat_ia_openv("fake-ia", 4, &evd, &ia, 1, 0, DAT_FALSE);
	put("args.open.major1", "%#x", rc);
	rc = dat_ia_openv("fake-ia", 4, &evd, &ia, 2, 1, DAT_FALSE);
	put("args.open.minor1", "%#x", rc);
	rc = dat_ia_openv("fake-ia", 4, &evd, &ia, 2, 0, DAT_TRUE);
	put("args.open.threadsafe", "%#x", rc);

	rc = dat_ia_close(NULL, DAT_CLOSE_ABRUPT_FLAG);
	put("args.close.null", "%#x", rc);
	rc = dat_ia_close((DAT_IA_HANDLE)5, DAT_CLOSE_ABRUPT_FLAG);
	put("args.close.unused_small_int", "%#x", rc);

	/* dynamic registration, as a provider does it */
	memset(&direct, 0, sizeof direct);
	direct.device_name = "direct";
	direct.ia_open_func = d_ia_open;
	direct.ia_query_func = d_ia_query;
	direct.ia_close_func = d_ia_close;
	rc = dat_registry_add_provider(NULL, &info);
	put("args.add.provider_null", "%#x", rc);
	rc = dat_registry_remove_provider(NULL, &info);
	put("args.remove.provider_null", "%#x", rc);
	rc = dat_registry_remove_provider(&direct, &other);
	put("args.remove.unknown", "%#x", rc);
	rc = dat_registry_add_provider(&direct, &info);
	put("args.add.first", "%#x", rc);
	rc = dat_registry_add_provider(&direct, &info);
	put("args.add.twice", "%#x", rc);
	rc = dat_registry_add_provider(&direct, &v1);
	put("args.add.other_key", "%#x", rc);
	rc = open_name("direct-v1", &ia);
	put("args.open.direct_v1_as_v2", "%#x", rc);
	rc = dat_registry_remove_provider(&direct, &v1);
	put("args.remove.other_key", "%#x", rc);

	ia = NULL;
	rc = open_name("direct", &ia);
	put("args.direct.open", "%#x handle=%lu opens=%d", rc, (unsigned long)(uintptr_t)ia, direct_opens);
	rc = dat_registry_remove_provider(&direct, &info);
	put("args.remove.in_use", "%#x", rc);

	rc = dats_get_ia_handle(NULL, &raw);
	put("args.dats.null", "%#x", rc);
	raw = NULL;
	rc = dats_get_ia_handle(ia, &raw);
	put("args.dats.small_to_raw", "%#x %s", rc, raw == (DAT_IA_HANDLE)&direct_ia_obj ? "eq" : "ne");
	rc = dats_get_ia_handle((DAT_IA_HANDLE)&direct_ia_obj, &back);
	put("args.dats.raw_to_small", "%#x %s", rc, back == ia ? "eq" : "ne");
	rc = dats_get_ia_handle((DAT_IA_HANDLE)5, &back);
	put("args.dats.unused_small_int", "%#x", rc);
	rc = dats_get_ia_handle((DAT_IA_HANDLE)&other, &back);
	put("args.dats.unknown_pointer", "%#x", rc);

	rc = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	put("args.direct.close", "%#x closes=%d", rc, direct_closes);
	rc = dats_get_ia_handle(ia, &raw);
	put("args.dats.after_close", "%#x", rc);
	rc = dat_registry_remove_provider(&direct, &info);
	put("args.remove.after_close", "%#x", rc);
	rc = dat_registry_remove_provider(&direct, &info);
	put("args.remove.again", "%#x", rc);
	rc = open_name("direct", &ia);
	put("args.direct.open_removed", "%#x", rc);
}

static void scenario_list(const char *prefix)
{
	DAT_IA_HANDLE ia;

	list_all(prefix);
	put("list.open.fake-ia", "%#x", open_name("fake-ia", &ia));
}

/* ---- dat_strerror ----------------------------------------------------- */

static void one_strerror(char *buf, size_t len, DAT_RETURN v, int with_minor)
{
	const char *maj = "(untouched)", *min = "(untouched)";
	DAT_RETURN rc = dat_strerror(v, &maj, with_minor ? &min : NULL);

	snprintf(buf, len, "%#x:%s:%s;", rc, maj ? maj : "(null)", min ? min : "(null)");
}

static void scenario_strerror(void)
{
	static const unsigned types[] = {
		0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
		0x1000, 0x1001, 0x2000, 0x3ffe, 0x3fff,
	};
	static char line[16384];
	char one[256], key[64];

	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		line[0] = 0;
		for (unsigned sub = 0; sub <= 110; sub++) {
			one_strerror(one, sizeof one, 0x80000000u | (types[t] << 16) | sub, 1);
			strncat(line, one, sizeof line - strlen(line) - 1);
		}
		snprintf(key, sizeof key, "strerror.type.%#x", types[t]);
		put(key, "%s", line);
	}
	one_strerror(one, sizeof one, 0x8005000c, 0);
	put("strerror.minor_null", "%s", one);
	one_strerror(one, sizeof one, 0x0005000c, 1);
	put("strerror.class_none", "%s", one);
	one_strerror(one, sizeof one, 0x4005000c, 1);
	put("strerror.class_warning", "%s", one);
	one_strerror(one, sizeof one, 0xc005000c, 1);
	put("strerror.class_both", "%s", one);
	one_strerror(one, sizeof one, 0x8005ffff, 1);
	put("strerror.subtype_ffff", "%s", one);
	one_strerror(one, sizeof one, 0, 1);
	put("strerror.success", "%s", one);
}

/* Only for our library: the original dereferences these NULL pointers. */
static void scenario_ours(void)
{
	DAT_PROVIDER p;
	const char *min = NULL;

	memset(&p, 0, sizeof p);
	p.device_name = "x";
	put("ours.strerror.major_null", "%#x", dat_strerror(0x8005000c, NULL, &min));
	put("ours.add.info_null", "%#x", dat_registry_add_provider(&p, NULL));
	put("ours.remove.info_null.type", "%#x", dat_registry_remove_provider(&p, NULL) & 0x3fff0000u);
}

/* "ok" when running the library run.sh meant (REGTEST_LIB: the real path of its file). */
static void which_library(void)
{
	const char *want = getenv("REGTEST_LIB");
	char got[4096] = "?";
	Dl_info info;

	if (dladdr((void *)dat_strerror, &info) && info.dli_fname && !realpath(info.dli_fname, got))
		snprintf(got, sizeof got, "%s", info.dli_fname);
	put("which-library", "%s", want && !strcmp(got, want) ? "ok" : got);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: regtest SCENARIO OUTFILE [PROVIDER.so]\n");
		return 2;
	}
	out = fopen(argv[2], "w");
	if (!out)
		return 2;
	which_library();
	if (argc > 3)
		load_provider(argv[3]);
	if (!strcmp(argv[1], "conf") && j_count)
		scenario_conf();
	else if (!strcmp(argv[1], "args") && j_count)
		scenario_args();
	else if (!strcmp(argv[1], "list"))
		scenario_list("list");
	else if (!strcmp(argv[1], "strerror"))
		scenario_strerror();
	else if (!strcmp(argv[1], "ours"))
		scenario_ours();
	else
		return 2;
	put("end", "ok");
	fclose(out);
	return 0;
}
