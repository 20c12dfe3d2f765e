/* The runner of the C test programs: see harness.h. */
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct harness_group *group;
static const char *label;                 /* the verdicts' prefix: the group's name or -l's */
static const struct harness_case *current; /* the case being run */
static int failures;      /* failed checks of the current case, of every kind */
static int loose;         /* of them, the harness_fail calls (not reported by a check's line) */
static int checks;        /* checks with a verdict line of their own made by the current case */
static char first_failure[600]; /* the first harness_fail's text */
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
    failures++;
    if (loose++ == 0)
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

/* "LABEL:CASE:NAME" (or "LABEL:NAME" outside a case). */
static void check_verdict(const char *verdict, const char *name)
{
    if (current)
        printf("%s %s:%s:%s", verdict, label, current->name, name);
    else
        printf("%s %s:%s", verdict, label, name);
}

int harness_check(const char *name, int ok, const char *fmt, ...)
{
    checks++;
    if (ok) {
        check_verdict("PASS", name);
        printf("\n");
    } else {
        va_list ap;
        failures++;
        check_verdict("FAIL", name);
        printf(" ");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
    }
    fflush(stdout);
    return ok;
}

void harness_pass(const char *name)
{
    harness_check(name, 1, "%s", "");
}

/* A child's exit statuses: no check failed in it, or one did. */
enum { CHILD_PASSED = 10, CHILD_FAILED = 11 };

int harness_isolated(const char *name, void (*fn)(void *arg), void *arg)
{
    int status;
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        failures = loose = 0;
        first_failure[0] = 0;
        fn(arg);
        if (loose)
            harness_check(name, 0, "%s", first_failure);
        fflush(stdout);
        _exit(failures ? CHILD_FAILED : CHILD_PASSED);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return harness_check(name, 0, "fork/wait failed");
    checks++;
    if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_PASSED)
        return 1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_FAILED) {
        failures++;
        return 0;
    }
    return harness_check(name, 0, "child %s %d", WIFSIGNALED(status) ? "killed by signal" : "exited with",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* Runs one case and prints its verdict; returns 1 if it failed. */
static int run_case(const struct harness_group *g, size_t index)
{
    const struct harness_case *c = &g->cases[index];
    current = c;
    failures = loose = checks = 0;
    first_failure[0] = 0;
    skip_reason[0] = 0;
    verdict_note[0] = 0;
    if (g->prepare)
        g->prepare(c, index);
    if (!failures && !skip_reason[0])
        c->fn();
    const char *sep = verdict_note[0] ? " " : "";
    if (loose) {
        const char *more = loose < 2 ? "" : print_each_failure() ? " (and more, see the log)" : " (and more)";
        printf("FAIL %s:%s %s%s%s%s\n", label, c->name, first_failure, more, sep, verdict_note);
        if (loose > 1 && !print_each_failure())
            printf("# %s: %d failed checks\n", c->name, loose);
    } else if (skip_reason[0]) {
        printf("SKIP %s:%s %s\n", label, c->name, skip_reason);
    } else if (!checks) {
        printf("PASS %s:%s%s%s\n", label, c->name, sep, verdict_note);
    }
    fflush(stdout);
    current = NULL;
    return failures != 0;
}

int harness_main(int argc, char **argv, const struct harness_group *g)
{
    const char *self = argv[0];
    group = g;
    label = g->name;
    if (argc == 4 && strcmp(argv[1], "-l") == 0) {
        label = argv[2];
        argv += 2;
        argc -= 2;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s [-l LABEL] list|all|CASE\n", self);
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
