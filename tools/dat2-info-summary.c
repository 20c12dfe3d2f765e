/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * dat2-info's default form: a table of the IAs that open, then one line per group of those
 * that do not. A stock /etc/dat.conf names some sixty devices a host does not have; they fail
 * the same few ways, so each way gets one line with a count, as ibv_devinfo -l and fi_info -l
 * lead with what works.
 *
 * Entries fall in one group when their DAT_RETURN and the first message about them agree once
 * what belongs to one entry (its dat.conf line, IA name, library and device) is taken out.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dat2-info.h"

/* Groups of more entries than this are shown without their names (-v lists them). */
#define NAMES_SHOWN 3

struct row {
	char *cells[6]; /* name, device, library, transport, address, state */
	char *memlock;  /* a verbs IA's DAT2_MEMLOCK, or NULL */
};

struct group {
	DAT_RETURN rc;
	char *reason;
	int conf, builtin; /* entries from dat.conf, built-in IAs */
	char **names;
	int count;
	int seq; /* the order it was met in */
	/* The library and device of its entries, shown for <library> and <device> when all
	 * entries have the same; NULL when they differ or are unknown. */
	char *lib_path, *device;
	int lib_varies, device_varies;
};

static struct row *rows;
static int row_count;
static struct group *groups;
static int group_count;

static char *copy(const char *s)
{
	return strdup(s && *s ? s : "-");
}

void summary_opens(const char *name, const char *device, const char *library,
		   const char *transport, const char *address, const char *memlock)
{
	struct row *grown = realloc(rows, (size_t)(row_count + 1) * sizeof *rows);

	if (!grown)
		return;
	rows = grown;
	rows[row_count].cells[0] = copy(name);
	rows[row_count].cells[1] = copy(device);
	rows[row_count].cells[2] = copy(library);
	rows[row_count].cells[3] = copy(transport);
	rows[row_count].cells[4] = copy(address);
	rows[row_count].cells[5] = copy("opens");
	rows[row_count].memlock = memlock && *memlock ? strdup(memlock) : NULL;
	row_count++;
}

/* Keeps `value` in *kept if every call gives the same. */
static void same_value(char **kept, int *varies, const char *value, int first)
{
	if (first) {
		*kept = value && *value ? strdup(value) : NULL;
		*varies = !*kept;
	} else if (!*varies && (!value || strcmp(*kept, value) != 0)) {
		*varies = 1;
	}
}

void summary_fails(const char *name, int from_conf, DAT_RETURN rc, const char *reason,
		   const char *lib_path, const char *device)
{
	struct group *g = NULL;
	char **names;

	if (!reason)
		reason = "";
	for (int i = 0; i < group_count && !g; i++)
		if (groups[i].rc == rc && strcmp(groups[i].reason, reason) == 0)
			g = &groups[i];
	if (!g) {
		struct group *grown = realloc(groups, (size_t)(group_count + 1) * sizeof *groups);
		char *text = strdup(reason);

		if (!grown || !text) {
			free(text);
			if (grown)
				groups = grown;
			return;
		}
		groups = grown;
		g = &groups[group_count];
		memset(g, 0, sizeof *g);
		g->rc = rc;
		g->reason = text;
		g->seq = group_count++;
	}
	names = realloc(g->names, (size_t)(g->count + 1) * sizeof *names);
	if (!names)
		return;
	g->names = names;
	g->names[g->count] = strdup(name);
	if (!g->names[g->count])
		return;
	same_value(&g->lib_path, &g->lib_varies, lib_path, g->count == 0);
	same_value(&g->device, &g->device_varies, device, g->count == 0);
	g->count++;
	if (from_conf)
		g->conf++;
	else
		g->builtin++;
}

static const char *noun(const struct group *g)
{
	if (g->builtin == 0)
		return g->count == 1 ? "dat.conf entry" : "dat.conf entries";
	if (g->conf == 0)
		return g->count == 1 ? "built-in IA" : "built-in IAs";
	return g->count == 1 ? "IA" : "IAs";
}

/* The type and subtype names of a DAT_RETURN, or its number. */
static void return_names(DAT_RETURN rc, char *buf, size_t size)
{
	const char *major = NULL, *minor = NULL;

	if (dat_strerror(rc, &major, &minor) != DAT_SUCCESS || !major)
		snprintf(buf, size, "%#x", (unsigned)rc);
	else
		snprintf(buf, size, "%s%s%s", major, minor && *minor ? " " : "", minor ? minor : "");
}

/* `reason` with <library> and <device> put back where all the group's entries agree. */
static void print_reason(const struct group *g)
{
	const char *s = g->reason;

	if (!*s) {
		fputs("(no message)", stdout);
		return;
	}
	while (*s) {
		if (!g->lib_varies && strncmp(s, "<library>", 9) == 0) {
			fputs(g->lib_path, stdout);
			s += 9;
		} else if (!g->device_varies && strncmp(s, "<device>", 8) == 0) {
			fputs(g->device, stdout);
			s += 8;
		} else {
			putchar(*s++);
		}
	}
}

/* Larger groups first; equal ones in the order they were met (the registry's). */
static int by_count(const void *a, const void *b)
{
	const struct group *x = a, *y = b;

	if (x->count != y->count)
		return y->count - x->count;
	return x->seq - y->seq;
}

/* A table cell padded to `width`, or the last one (width -1), which ends the line. */
static void cell(const char *text, int width)
{
	if (width < 0)
		printf("%s\n", text);
	else
		printf("%-*s  ", width, text);
}

void summary_print(void)
{
	static const char *heads[6] = { "IA", "DEVICE", "LIBRARY", "TRANSPORT", "ADDRESS", "STATE" };
	int width[6], digits;

	if (row_count == 0) {
		printf("No IA opens.\n");
	} else {
		for (int c = 0; c < 6; c++) {
			width[c] = (int)strlen(heads[c]);
			for (int r = 0; r < row_count; r++)
				if ((int)strlen(rows[r].cells[c]) > width[c])
					width[c] = (int)strlen(rows[r].cells[c]);
		}
		for (int c = 0; c < 6; c++)
			cell(heads[c], c < 5 ? width[c] : -1);
		for (int r = 0; r < row_count; r++)
			for (int c = 0; c < 6; c++)
				cell(rows[r].cells[c], c < 5 ? width[c] : -1);
		/* Registrations on a verbs IA pin memory: the limit that bounds them, and
		 * whether it is enough. */
		for (int r = 0; r < row_count; r++)
			if (rows[r].memlock)
				printf("%s: locked memory (RLIMIT_MEMLOCK): %s\n", rows[r].cells[0],
				       rows[r].memlock);
	}
	if (group_count == 0)
		return;
	qsort(groups, (size_t)group_count, sizeof *groups, by_count);
	printf("\nDoes not open:\n");
	digits = snprintf(NULL, 0, "%d", groups[0].count);
	for (int i = 0; i < group_count; i++) {
		const struct group *g = &groups[i];
		char names[256];

		return_names(g->rc, names, sizeof names);
		printf("  %*d %s", digits, g->count, noun(g));
		if (g->count <= NAMES_SHOWN) {
			for (int n = 0; n < g->count; n++)
				printf("%s%s", n ? ", " : " (", g->names[n]);
			putchar(')');
		}
		printf(": %s: ", names);
		print_reason(g);
		putchar('\n');
	}
	printf("\n'dat2-info -v' shows every IA in full, 'dat2-info -p NAME' one of them.\n");
}

void summary_json_groups(const char *key)
{
	qsort(groups, (size_t)group_count, sizeof *groups, by_count);
	json_array_begin(key);
	for (int i = 0; i < group_count; i++) {
		const struct group *g = &groups[i];

		json_object_begin(NULL);
		json_int("count", g->count);
		json_int("dat_conf_entries", g->conf);
		json_int("builtin", g->builtin);
		json_dat_return("error", g->rc);
		json_string("reason", g->reason);
		json_array_begin("ias");
		for (int n = 0; n < g->count; n++)
			json_string(NULL, g->names[n]);
		json_array_end();
		json_object_end();
	}
	json_array_end();
}

/* ---- one entry's reason, made comparable -------------------------------------------------- */

static int word_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || c == '/';
}

/* Skips `prefix` and the ": " after it at the start of *s. */
static void skip_prefix(const char **s, const char *prefix)
{
	size_t n = prefix ? strlen(prefix) : 0;

	if (n && strncmp(*s, prefix, n) == 0 && (*s)[n] == ':' && (*s)[n + 1] == ' ')
		*s += n + 2;
}

char *reason_summary(const char *log, const char *ia_name, const char *origin,
		     const char *lib_path, const char *ia_params)
{
	static regex_t stamp;
	static int stamp_ok = -1;
	const char *p = log, *line;
	const char *words[3][2] = { { lib_path, "<library>" }, { ia_name, "<ia>" }, { NULL, "<device>" } };
	char device[256] = "", *text, *out;
	size_t len, o = 0;
	regmatch_t m;

	if (!next_line(&p, &line, &len))
		return strdup("");
	text = strndup(line, len);
	if (!text)
		return NULL;
	if (ia_params)
		sscanf(ia_params, "%255s", device);
	words[2][0] = device;

	line = text;
	skip_prefix(&line, origin);
	skip_prefix(&line, ia_name);
	/* A dapl provider's messages start "host:PROV:pid:tid: N us(N us): ". */
	if (stamp_ok < 0)
		stamp_ok = regcomp(&stamp, "^[^ ]+: +[0-9]+ us\\([0-9]+ us\\): +", REG_EXTENDED) == 0;
	if (stamp_ok && regexec(&stamp, line, 1, &m, 0) == 0)
		line += m.rm_eo;

	/* Each word becomes at most a 9-byte placeholder only where it is 2 bytes or longer. */
	out = malloc(strlen(line) * 5 + 1);
	if (!out) {
		free(text);
		return NULL;
	}
	for (const char *s = line; *s;) {
		int done = 0;

		for (int w = 0; w < 3 && !done; w++) {
			const char *word = words[w][0];
			size_t n = word ? strlen(word) : 0;

			if (n < 2 || strncmp(s, word, n) != 0 || (s > line && word_char(s[-1])) ||
			    word_char(s[n]))
				continue;
			o += (size_t)sprintf(out + o, "%s", words[w][1]);
			s += n;
			done = 1;
		}
		if (!done)
			out[o++] = *s++;
	}
	out[o] = '\0';
	free(text);
	return out;
}

void summary_free(void)
{
	for (int r = 0; r < row_count; r++)
		for (int c = 0; c < 6; c++)
			free(rows[r].cells[c]);
	free(rows);
	for (int i = 0; i < group_count; i++) {
		for (int n = 0; n < groups[i].count; n++)
			free(groups[i].names[n]);
		free(groups[i].names);
		free(groups[i].reason);
		free(groups[i].lib_path);
		free(groups[i].device);
	}
	free(groups);
	rows = NULL;
	groups = NULL;
	row_count = group_count = 0;
}
