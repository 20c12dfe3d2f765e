/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * dat2-info: what the DAT registry offers on this host.
 *
 * Lists every IA name of the static registry (dat.conf entries and the library's built-in
 * providers), tries to open each one and prints either its attributes (dat_ia_query) or why
 * it does not open: the DAT_RETURN's names and the library's own messages. By default it
 * shows a table of the IAs that open and one line per group of those that do not
 * (dat2-info-summary.c); -v and -p give every IA in full (dat2-info-print.c), --json a
 * document for scripts (dat2-info-json.c).
 *
 * The program uses the public DAT API only. The library prints its reasons to standard
 * output when DAT_DBG_TYPE has the error bit (0x1) set, and it reads that variable once,
 * while it is being loaded, before main() runs. So dat2-info starts itself a second time
 * with the error bit added, and with standard output pointed at a scratch file, which also
 * catches what the library says while it reads dat.conf. Around each DAT call standard
 * output and standard error go to that file again; what lands there is printed as the
 * reason when an IA does not open (and, with -v, in any case).
 *
 * In a secure-execution process (set-user-ID, set-group-ID, file capabilities) the library
 * ignores the environment, so dat2-info reads it with secure_getenv as well and does not start
 * itself again: it shows what such a program of this host would see.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#include <dat2/udat.h>
#include "dat2-info.h"

/* Set in the environment of the second start: "<pid> <real stdout fd> <capture fd>" (the
 * process id stays the same across execv, which tells a stale value from an inherited one). */
#define RELAUNCH_ENV "DAT2_INFO_FDS"
#define EVD_QLEN 8

int verbose;

/* ---- capturing what the library prints --------------------------------------------- */

static int cap_fd = -1;   /* scratch file, -1 when nothing is captured */
static int real_out = -1; /* the real standard output and error while capturing */
static int real_err = -1;

/* Keeps standard error's real copy, and closes the capture's descriptors in the programs a
 * provider may start. */
static void keep_descriptors(void)
{
	real_err = dup(STDERR_FILENO);
	fcntl(real_out, F_SETFD, FD_CLOEXEC);
	fcntl(cap_fd, F_SETFD, FD_CLOEXEC);
	if (real_err >= 0)
		fcntl(real_err, F_SETFD, FD_CLOEXEC);
}

static int scratch_file(void)
{
	char path[4096];
	const char *dir = secure_getenv("TMPDIR");
	int fd = memfd_create("dat2-info", 0); /* no close-on-exec: it must survive execv */

	if (fd >= 0)
		return fd;
	snprintf(path, sizeof path, "%s/dat2-info.XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd >= 0)
		unlink(path);
	return fd;
}

/* ORs `bit` into the numeric environment variable `name` (read as strtol base 0 does). */
static void env_or(const char *name, unsigned long bit)
{
	const char *old = secure_getenv(name);
	unsigned long value = old ? strtoul(old, NULL, 0) : 0;
	char text[32];

	snprintf(text, sizeof text, "%#lx", value | bit);
	setenv(name, text, 1);
}

/*
 * First start: start again with the library's error messages switched on and standard output
 * in a scratch file. Returns only if that is impossible; the program then runs without
 * capturing anything.
 */
static void relaunch(char **argv)
{
	char fds[64];
	int saved, fd = scratch_file();

	if (fd < 0)
		return;
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	if (saved < 0) {
		close(fd);
		return;
	}
	env_or("DAT_DBG_TYPE", 0x1);
	env_or("DAT_DBG_DEST", 0x1);
	snprintf(fds, sizeof fds, "%ld %d %d", (long)getpid(), saved, fd);
	setenv(RELAUNCH_ENV, fds, 1);
	if (dup2(fd, STDOUT_FILENO) >= 0)
		execv("/proc/self/exe", argv);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(fd);
	unsetenv(RELAUNCH_ENV);
}

/* Reads the whole scratch file into a new string (never NULL unless out of memory). */
static char *capture_text(void)
{
	off_t size = lseek(cap_fd, 0, SEEK_END);
	char *text;
	ssize_t got = 0;

	if (size < 0)
		size = 0;
	text = malloc((size_t)size + 1);
	if (!text)
		return NULL;
	while (got < size) {
		ssize_t n = pread(cap_fd, text + got, (size_t)(size - got), got);
		if (n <= 0)
			break;
		got += n;
	}
	text[got] = '\0';
	return text;
}

static void capture_reset(void)
{
	if (ftruncate(cap_fd, 0) != 0 || lseek(cap_fd, 0, SEEK_SET) != 0) {
		close(cap_fd);
		cap_fd = -1;
	}
}

/*
 * Second start: takes over the descriptors the first start left and sets *load_log to what
 * the library printed while it loaded. Returns 0 if `fds` was not left by this process's
 * first start (then it may start again), 1 otherwise, even if capturing has to be given up.
 */
static int adopt_capture(const char *fds, char **load_log)
{
	char copy[64];
	long pid = -1;
	int out = -1, fd = -1;

	snprintf(copy, sizeof copy, "%s", fds);
	unsetenv(RELAUNCH_ENV);
	if (sscanf(copy, "%ld %d %d", &pid, &out, &fd) != 3 || pid != (long)getpid() || out < 0 ||
	    fd < 0)
		return 0;
	fflush(stdout);
	if (dup2(out, STDOUT_FILENO) < 0)
		return 1; /* standard output stays the scratch file: nothing better to do */
	real_out = out;
	cap_fd = fd;
	keep_descriptors();
	*load_log = capture_text();
	capture_reset();
	return 1;
}

/*
 * A secure-execution process: no second start (the library logs nothing there, and the
 * descriptors of a first start could not be found), but what a provider prints during each
 * DAT call is still captured.
 */
static void capture_here(void)
{
	int fd = scratch_file();

	if (fd < 0)
		return;
	real_out = dup(STDOUT_FILENO);
	if (real_out < 0) {
		close(fd);
		return;
	}
	cap_fd = fd;
	keep_descriptors();
}

static void capture_begin(void)
{
	if (cap_fd < 0)
		return;
	fflush(stdout);
	fflush(stderr);
	dup2(cap_fd, STDOUT_FILENO);
	if (real_err >= 0)
		dup2(cap_fd, STDERR_FILENO);
}

/* Ends a capture; returns the captured text (NULL when nothing is captured). */
static char *capture_end(void)
{
	char *text;

	if (cap_fd < 0)
		return NULL;
	fflush(stdout);
	fflush(stderr);
	dup2(real_out, STDOUT_FILENO);
	if (real_err >= 0)
		dup2(real_err, STDERR_FILENO);
	text = capture_text();
	capture_reset();
	return text;
}

/* ---- the configuration file, for the library path of each name ------------------------ */

struct conf_entry {
	char *name;
	char *lib_path;
	char *ia_params;
	int line;
};

static struct conf_entry *conf;
static size_t conf_count;
static const char *conf_path;

/* Splits one dat.conf line the way the library does; returns the number of fields (at most
 * `max`), or -1 for an unterminated quote. */
static int split_line(const char *s, char **fields, int max)
{
	int n = 0;

	for (;;) {
		char *tok, *out;

		while (*s == ' ' || *s == '\t' || *s == '\r')
			s++;
		if (!*s || *s == '\n' || *s == '#')
			return n;
		tok = out = malloc(strlen(s) + 1);
		if (!tok)
			return -1;
		if (*s == '"') {
			s++;
			while (*s && *s != '"' && *s != '\n') {
				if (*s == '\\' && s[1] && s[1] != '\n')
					s++;
				*out++ = *s++;
			}
			if (*s != '"') {
				free(tok);
				return -1;
			}
			s++;
		} else {
			while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
				*out++ = *s++;
		}
		*out = '\0';
		if (n < max)
			fields[n] = tok;
		else
			free(tok);
		n++;
	}
}

static void read_conf(void)
{
	const char *override = secure_getenv("DAT_OVERRIDE");
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0;
	FILE *f;

	conf_path = override ? override : "/etc/dat.conf";
	f = fopen(conf_path, "r");
	if (!f)
		return;
	while (getline(&line, &cap, f) >= 0) {
		char *fields[8] = { 0 };
		int n = split_line(line, fields, 8);
		struct conf_entry *grown;

		lineno++;
		if (n == 8 && fields[1][0] == 'u' && strncmp(fields[3], "default", 7) == 0 &&
		    (grown = realloc(conf, (conf_count + 1) * sizeof *conf))) {
			conf = grown;
			conf[conf_count].name = fields[0];
			conf[conf_count].lib_path = fields[4];
			conf[conf_count].ia_params = fields[6];
			conf[conf_count].line = lineno;
			conf_count++;
			fields[0] = fields[4] = fields[6] = NULL;
		}
		for (int i = 0; i < 8 && i < n; i++)
			free(fields[i]);
	}
	free(line);
	fclose(f);
}

static void free_conf(void)
{
	for (size_t i = 0; i < conf_count; i++) {
		free(conf[i].name);
		free(conf[i].lib_path);
		free(conf[i].ia_params);
	}
	free(conf);
}

/* ---- one provider ------------------------------------------------------------------------ */

enum form { FORM_SUMMARY, FORM_DETAIL, FORM_JSON };
static enum form form = FORM_SUMMARY;

static int same_name(const DAT_PROVIDER_INFO *a, const DAT_PROVIDER_INFO *b)
{
	return strncmp(a->ia_name, b->ia_name, DAT_NAME_MAX_LENGTH) == 0;
}

/* True if no earlier entry of the list has the same IA name as entry `i`. */
static int first_of_name(const DAT_PROVIDER_INFO *infos, DAT_COUNT i)
{
	for (DAT_COUNT j = 0; j < i; j++)
		if (same_name(&infos[j], &infos[i]))
			return 0;
	return 1;
}

static void registry_keys(const DAT_PROVIDER_INFO *infos, DAT_COUNT n, DAT_COUNT first)
{
	if (form == FORM_JSON)
		json_array_begin("registry_keys");
	for (DAT_COUNT i = first; i < n; i++) {
		char version[32];

		if (!same_name(&infos[i], &infos[first]))
			continue;
		snprintf(version, sizeof version, "%u.%u", infos[i].dapl_version_major,
			 infos[i].dapl_version_minor);
		if (form == FORM_JSON) {
			json_object_begin(NULL);
			json_string("dat_version", version);
			json_bool("thread_safe", infos[i].is_thread_safe);
			json_object_end();
		} else {
			field("registry_key", "DAT %s %s", version,
			      infos[i].is_thread_safe ? "threadsafe" : "nonthreadsafe");
		}
	}
	if (form == FORM_JSON)
		json_array_end();
}

/* The first dat.conf entry of IA `name`, or NULL for a built-in IA without one. */
static const struct conf_entry *conf_of(const char *name)
{
	for (size_t i = 0; i < conf_count; i++)
		if (strcmp(conf[i].name, name) == 0)
			return &conf[i];
	return NULL;
}

static int is_builtin(const struct conf_entry *c)
{
	return !c || strncmp(c->lib_path, "builtin:", 8) == 0;
}

static void library_lines(const char *name)
{
	int found = 0;

	if (form == FORM_JSON) {
		json_string("library", conf_of(name) ? conf_of(name)->lib_path : NULL);
		json_bool("builtin", is_builtin(conf_of(name)));
		json_array_begin("dat_conf_entries");
	}
	for (size_t i = 0; i < conf_count; i++) {
		if (strcmp(conf[i].name, name) != 0)
			continue;
		found = 1;
		if (form == FORM_JSON) {
			json_object_begin(NULL);
			json_string("library", conf[i].lib_path);
			json_int("line", conf[i].line);
			json_string("ia_params", conf[i].ia_params);
			json_object_end();
		} else if (is_builtin(&conf[i])) {
			field("library", "built in (%s, %s line %d)", conf[i].lib_path, conf_path,
			      conf[i].line);
			field("ia_params", "\"%s\"", conf[i].ia_params);
		} else {
			field("library", "%s (%s line %d)", conf[i].lib_path, conf_path, conf[i].line);
			field("ia_params", "\"%s\"", conf[i].ia_params);
		}
	}
	if (form == FORM_JSON)
		json_array_end();
	else if (!found)
		field("library", "built in");
}

/* What a failed call says: the DAT_RETURN's names, with `label` (error, query_error, ...). */
static void dat_error(const char *label, DAT_RETURN rc)
{
	const char *major = NULL, *minor = NULL;

	if (form == FORM_JSON) {
		json_dat_return(label, rc);
		return;
	}
	if (dat_strerror(rc, &major, &minor) != DAT_SUCCESS || !major)
		major = "unknown status";
	field(label, "%#x %s%s%s", (unsigned)rc, major, minor && *minor ? " " : "", minor ? minor : "");
}

/* The library's messages around a call: shown with -v, or when `always`. */
static void log_lines(const char *log, int always)
{
	if (form == FORM_JSON) {
		if (log && *log)
			json_lines("log", log);
	} else if (verbose || always) {
		text_lines("log", log);
	}
}

/* Why IA `name` did not open: the DAT_RETURN and the messages captured meanwhile. */
static void show_failure(const char *name, DAT_RETURN rc, const char *log)
{
	const struct conf_entry *c = conf_of(name);
	char origin[4096 + 32], device[256] = "";
	char *reason;

	if (c) {
		snprintf(origin, sizeof origin, "%s:%d", conf_path, c->line);
		sscanf(c->ia_params, "%255s", device);
	}
	if (cap_fd < 0)
		reason = strdup("(messages not captured)");
	else
		reason = reason_summary(log, name, c ? origin : NULL, c ? c->lib_path : NULL,
					c ? c->ia_params : NULL);
	summary_fails(name, c != NULL, rc, reason, c ? c->lib_path : NULL, device);
	if (form == FORM_JSON) {
		json_bool("opens", 0);
		json_string("state", "does not open");
		dat_error("error", rc);
		json_lines("reason", cap_fd < 0 ? NULL : log);
		json_string("reason_summary", reason);
	} else if (form == FORM_DETAIL) {
		field("state", "does not open");
		dat_error("error", rc);
		if (cap_fd < 0)
			field("reason", "(not captured: dat2-info could not redirect the library's messages)");
		else if (!log || !*log)
			field("reason", "(no message from the library or the provider)");
		else
			text_lines("reason", log);
	}
	free(reason);
}

/* What IA `name` is, from its attributes, while it is open. */
static void show_attributes(const char *name, const DAT_IA_ATTR *ia_attr,
			    const DAT_PROVIDER_ATTR *provider_attr)
{
	const struct conf_entry *c = conf_of(name);
	char device[DAT_NAME_MAX_LENGTH + 1], address[128];
	const char *transport = transport_of(ia_attr, provider_attr);

	snprintf(device, sizeof device, "%.*s", DAT_NAME_MAX_LENGTH, ia_attr->adapter_name);
	format_address(ia_attr->ia_address_ptr, address, sizeof address);
	if (form == FORM_SUMMARY) {
		summary_opens(name, device, is_builtin(c) ? "built in" : c->lib_path, transport,
			      ia_attr->ia_address_ptr ? address : NULL,
			      named_value(provider_attr->num_provider_specific_attr,
					  provider_attr->provider_specific_attr, "DAT2_MEMLOCK"));
	} else if (form == FORM_JSON) {
		json_string("device", device);
		json_string("transport", transport);
		json_string("address", ia_attr->ia_address_ptr ? address : NULL);
		json_ia_attributes("ia_attr", ia_attr);
		json_provider_attributes("provider_attr", provider_attr);
	} else {
		ia_attributes(ia_attr);
		provider_attributes(provider_attr);
	}
}

/* Opens the IA `key`, prints what it is or why it does not open; returns 1 if it opened. */
static int show_provider(const DAT_PROVIDER_INFO *infos, DAT_COUNT n, DAT_COUNT first)
{
	const DAT_PROVIDER_INFO *key = &infos[first];
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
	DAT_IA_ATTR ia_attr;
	DAT_PROVIDER_ATTR provider_attr;
	DAT_RETURN rc;
	char name[DAT_NAME_MAX_LENGTH];
	char *log;

	/* Prefer the version this header set describes, if the name is registered with it. */
	for (DAT_COUNT i = first; i < n; i++) {
		if (same_name(&infos[i], &infos[first]) &&
		    infos[i].dapl_version_major == DAT_VERSION_MAJOR &&
		    infos[i].dapl_version_minor == DAT_VERSION_MINOR) {
			key = &infos[i];
			break;
		}
	}
	snprintf(name, sizeof name, "%.*s", DAT_NAME_MAX_LENGTH - 1, key->ia_name);
	if (form == FORM_JSON) {
		json_object_begin(NULL);
		json_string("name", name);
	} else if (form == FORM_DETAIL) {
		printf("ia_name: %s\n", name);
	}
	if (form != FORM_SUMMARY) {
		library_lines(name);
		registry_keys(infos, n, first);
	}

	capture_begin();
	rc = dat_ia_openv(name, EVD_QLEN, &async_evd, &ia, key->dapl_version_major,
			  key->dapl_version_minor, key->is_thread_safe);
	log = capture_end();
	if (rc != DAT_SUCCESS) {
		show_failure(name, rc, log);
		free(log);
		if (form == FORM_JSON)
			json_object_end();
		else if (form == FORM_DETAIL)
			putchar('\n');
		return 0;
	}
	if (form == FORM_JSON) {
		json_bool("opens", 1);
		json_string("state", "opens");
	} else if (form == FORM_DETAIL) {
		field("state", "opens");
	}
	log_lines(log, 0);
	free(log);

	memset(&ia_attr, 0, sizeof ia_attr);
	memset(&provider_attr, 0, sizeof provider_attr);
	capture_begin();
	rc = dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &provider_attr);
	log = capture_end();
	if (rc == DAT_SUCCESS) {
		show_attributes(name, &ia_attr, &provider_attr);
	} else {
		if (form == FORM_SUMMARY)
			summary_opens(name, NULL, NULL, "(dat_ia_query failed)", NULL, NULL);
		dat_error("query_error", rc);
	}
	log_lines(log, rc != DAT_SUCCESS);
	free(log);

	capture_begin();
	rc = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	log = capture_end();
	if (rc != DAT_SUCCESS)
		dat_error("close_error", rc);
	log_lines(log, rc != DAT_SUCCESS);
	free(log);
	if (form == FORM_JSON)
		json_object_end();
	else if (form == FORM_DETAIL)
		putchar('\n');
	return 1;
}

/* ---- main ------------------------------------------------------------------------------- */

static void usage(FILE *to)
{
	fprintf(to,
		"usage: dat2-info [-v] [-p IA_NAME] [--json | -o json]\n"
		"List the DAT providers (dat.conf entries and built-in devices) and open each one:\n"
		"a table of those that open, then one line per reason the others do not.\n"
		"  -v             every IA in full: every attribute, and the library's messages\n"
		"  -p IA_NAME     only this IA name, in full\n"
		"  --json, -o json  a JSON document for scripts (-o text: the default form)\n"
		"  -h             this help\n"
		"Exit status: 0 if at least one provider opens, 1 if none does, 2 on a usage error.\n");
}

/* The file the DAT functions were loaded from. */
static const char *library_file(void)
{
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "dat_strerror");

	if (sym && dladdr(sym, &info) && info.dli_fname)
		return info.dli_fname;
	return "unknown";
}

/* The registry's entries (*count of them); on failure prints why and returns 0 entries. */
static DAT_PROVIDER_INFO *list_providers(DAT_COUNT *count)
{
	DAT_PROVIDER_INFO *infos = NULL, **list = NULL;
	DAT_RETURN rc;
	char *log;

	*count = 0;
	capture_begin();
	rc = dat_registry_list_providers(0, count, NULL);
	if ((rc == DAT_SUCCESS || DAT_GET_TYPE(rc) == DAT_INVALID_PARAMETER) && *count > 0) {
		infos = calloc((size_t)*count, sizeof *infos);
		list = calloc((size_t)*count, sizeof *list);
		if (!infos || !list) {
			rc = DAT_INSUFFICIENT_RESOURCES;
		} else {
			for (DAT_COUNT i = 0; i < *count; i++)
				list[i] = &infos[i];
			rc = dat_registry_list_providers(*count, count, list);
		}
	} else if (DAT_GET_TYPE(rc) == DAT_INVALID_PARAMETER) {
		rc = DAT_SUCCESS;
	}
	log = capture_end();
	free(list);
	if (rc != DAT_SUCCESS) {
		const char *major = NULL, *minor = NULL;

		if (form == FORM_JSON) {
			json_dat_return("registry_error", rc);
			json_lines("registry_messages", log);
		} else {
			dat_strerror(rc, &major, &minor);
			printf("dat_registry_list_providers failed: %#x %s %s\n", (unsigned)rc,
			       major ? major : "", minor ? minor : "");
			text_lines("message", log);
		}
		*count = 0;
	} else {
		log_lines(log, 0);
	}
	free(log);
	return infos;
}

static void header(const char *load_log)
{
	int override = secure_getenv("DAT_OVERRIDE") != NULL;

	if (form == FORM_JSON) {
		json_object_begin(NULL);
		json_string("libdat2", library_file());
		json_string("dat_conf", conf_path);
		json_bool("dat_conf_override", override);
		json_bool("secure_execution", getauxval(AT_SECURE) != 0);
		json_lines("messages", load_log);
		return;
	}
	printf("libdat2: %s\n", library_file());
	printf("dat_conf: %s%s\n", conf_path, override ? " (DAT_OVERRIDE)" : "");
	text_lines("message", load_log);
}

/* Takes the options; returns -1 to go on, or the exit status. */
static int options(int argc, char **argv, const char **only)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, json = 0;

	while ((opt = getopt_long(argc, argv, "vp:o:h", longs, NULL)) != -1) {
		switch (opt) {
		case 'v':
			verbose = 1;
			break;
		case 'p':
			*only = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'o':
			if (strcmp(optarg, "json") == 0) {
				json = 1;
				break;
			}
			if (strcmp(optarg, "text") == 0) {
				json = 0;
				break;
			}
			fprintf(stderr, "dat2-info: -o takes json or text, not '%s'\n", optarg);
			usage(stderr);
			return 2;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "dat2-info: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	form = json ? FORM_JSON : verbose || *only ? FORM_DETAIL : FORM_SUMMARY;
	return -1;
}

int main(int argc, char **argv)
{
	const char *only = NULL, *fds = secure_getenv(RELAUNCH_ENV);
	DAT_PROVIDER_INFO *infos;
	DAT_COUNT count = 0, shown = 0;
	char *load_log = NULL;
	int status, names = 0, opened = 0;

	/* A secure process would find no RELAUNCH_ENV and start again forever. */
	if (getauxval(AT_SECURE))
		capture_here();
	else if (!fds || !adopt_capture(fds, &load_log))
		relaunch(argv);

	status = options(argc, argv, &only);
	if (status >= 0) {
		free(load_log);
		return status;
	}

	read_conf();
	header(load_log);
	free(load_log);
	infos = list_providers(&count);
	for (DAT_COUNT i = 0; i < count; i++)
		names += first_of_name(infos, i);
	if (form == FORM_JSON) {
		json_int("ia_names", names);
		json_array_begin("ias");
	} else {
		printf("ia_names: %d\n\n", names);
	}

	for (DAT_COUNT i = 0; i < count; i++) {
		if (!first_of_name(infos, i) ||
		    (only && strncmp(only, infos[i].ia_name, DAT_NAME_MAX_LENGTH) != 0))
			continue;
		shown++;
		opened += show_provider(infos, count, i);
	}
	if (form == FORM_JSON) {
		json_array_end();
		json_int("opened", opened);
		summary_json_groups("not_opening");
		json_object_end();
		json_finish();
	} else if (form == FORM_SUMMARY) {
		summary_print();
	}
	fflush(stdout);
	if (only && shown == 0)
		fprintf(stderr, "dat2-info: no provider is registered as '%s'\n", only);
	free(infos);
	free_conf();
	summary_free();
	return opened > 0 ? 0 : 1;
}
