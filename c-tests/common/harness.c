/* The runner of the C test programs: see harness.h. */
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct harness_group *group;
static int failures;
static char first_failure[600];
static char skip_reason[256];
static char verdict_note[400];

/* Whether every failed check is printed as it happens (see harness_group.verbose_env). */
static int print_each_failure(void)
{
    return !group || !group->verbose_env || getenv(group->verbose_env);
}

void harness_fail(int line, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (failures++ == 0)
        snprintf(first_failure, sizeof first_failure, "line %d: %s", line, text);
    if (print_each_failure()) {
        printf("# line %d: %s\n", line, text);
        fflush(stdout);
    }
}

void harness_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
    va_end(ap);
}

void harness_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stdout);
    vprintf(fmt, ap);
    fputs("\n", stdout);
    va_end(ap);
    fflush(stdout);
}

void harness_verdict_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(verdict_note, sizeof verdict_note, fmt, ap);
    va_end(ap);
}

int harness_failures(void)
{
    return failures;
}

int harness_skipped(void)
{
    return skip_reason[0] != 0;
}

int harness_expect_code(int line, const char *what, unsigned long got, unsigned long want)
{
    if (got == want)
        return 1;
    harness_fail(line, "%.200s returned 0x%08lx, expected 0x%08lx", what, got, want);
    return 0;
}

/* Runs one case and prints its verdict; returns 1 if it failed. */
static int run_case(const struct harness_group *g, size_t index)
{
    const struct harness_case *c = &g->cases[index];
    failures = 0;
    first_failure[0] = 0;
    skip_reason[0] = 0;
    verdict_note[0] = 0;
    if (g->prepare)
        g->prepare(c, index);
    if (!failures && !skip_reason[0])
        c->fn();
    const char *sep = verdict_note[0] ? " " : "";
    if (failures) {
        const char *more = failures < 2 ? "" : print_each_failure() ? " (and more, see the log)" : " (and more)";
        printf("FAIL %s:%s %s%s%s%s\n", g->name, c->name, first_failure, more, sep, verdict_note);
        if (failures > 1 && !print_each_failure())
            printf("# %s: %d failed checks\n", c->name, failures);
    } else if (skip_reason[0]) {
        printf("SKIP %s:%s %s\n", g->name, c->name, skip_reason);
    } else {
        printf("PASS %s:%s%s%s\n", g->name, c->name, sep, verdict_note);
    }
    fflush(stdout);
    return failures != 0;
}

int harness_main(int argc, char **argv, const struct harness_group *g)
{
    group = g;
    if (argc != 2) {
        fprintf(stderr, "usage: %s list|all|CASE\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "list") == 0) {
        for (size_t i = 0; i < g->ncases; i++)
            printf("%s\n", g->cases[i].name);
        return 0;
    }
    int all = strcmp(argv[1], "all") == 0, bad = 0, found = 0;
    for (size_t i = 0; i < g->ncases; i++)
        if (all || strcmp(argv[1], g->cases[i].name) == 0) {
            found = 1;
            bad |= run_case(g, i);
        }
    if (!found) {
        fprintf(stderr, "no case %s\n", argv[1]);
        return 2;
    }
    return bad;
}
