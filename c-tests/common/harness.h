/*
 * The runner shared by the C test programs of c-tests/ (memory/memtest, dataxfer/dxtest,
 * afterfree/aftest, fakeprov/fptest): the case table, the bookkeeping of failed checks and
 * skips, the verdict lines and main's command line.
 *
 *   PROGRAM [-l LABEL] list   print the case names, one a line
 *   PROGRAM [-l LABEL] NAME   run one case; prints "PASS GROUP:NAME", "FAIL GROUP:NAME why" or
 *                             "SKIP GROUP:NAME why"; exits 1 if it failed, 0 otherwise
 *   PROGRAM [-l LABEL] all    run every case in this one process (for development)
 *
 * -l LABEL prints LABEL instead of the group's name in the verdicts: fakeprov runs one program
 * against Debian's libdat2 and against ours, as "debian:..." and "dat2:...". Anything else (no
 * argument, an unknown name) exits 2. c-tests/common/lib.sh runs each case of the list in a
 * process of its own, so that a crash or a hang is charged to the case that caused it; a
 * verdict, and each "# ..." line, is flushed as soon as it is printed, so that what a case
 * printed before crashing is in its log.
 *
 * A program defines its table and calls harness_main from its main:
 *
 *   static const struct harness_case cases[] = {{"name", case_name, 0}, ...};
 *   static const struct harness_group group = {"memory", cases, sizeof cases / sizeof cases[0], NULL, NULL};
 *   int main(int argc, char **argv) { return harness_main(argc, argv, &group); }
 *
 * Checks. A case that is one long sequence of dependent steps over shared state (fakeprov's
 * "good": every libdat2 call in turn, each checked against what the provider saw) reports each
 * step with a verdict line of its own: harness_check prints "PASS GROUP:CASE:NAME" or
 * "FAIL GROUP:CASE:NAME why" at once, and harness_isolated runs a step that may crash in a
 * child process. A case that made checks prints no verdict line of its own at its end, unless
 * harness_fail (its FAIL line) or harness_skip (its SKIP line) was called in it.
 */
#ifndef HARNESS_H
#define HARNESS_H

#include <stddef.h>

struct harness_case {
    const char *name;
    void (*fn)(void);
    int arg; /* the group's own: dataxfer's "_tcp rerun" flag, afterfree's peer mode */
};

struct harness_group {
    const char *name; /* the verdicts' prefix: "memory" prints "PASS memory:NAME" (see -l) */
    const struct harness_case *cases;
    size_t ncases;
    /* Optional: called before each case's fn with the case and its index in the table (to set
     * the environment, the ports...); a harness_skip or harness_fail in it ends the case there,
     * without calling fn. */
    void (*prepare)(const struct harness_case *c, size_t index);
    /* NULL: every failed check is printed at once as "# line N: ..." (the verdict then says "and
     * more, see the log"). A variable's name: only the first failed check is printed (in the
     * verdict, followed by "# NAME: N failed checks"), unless that variable is set in the
     * environment, so that a case failing in a loop of 100,000 does not print 100,000 lines. */
    const char *verbose_env;
};

/* Runs the command line above; returns main's exit status. */
int harness_main(int argc, char **argv, const struct harness_group *g);

/* Records a failed check of the current case (its line and why); the first is in the verdict. */
void harness_fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Marks the current case skipped (why): its verdict is SKIP unless a check failed. */
void harness_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "# ..." into the case's log. */
void harness_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Text appended to the current case's PASS or FAIL line (afterfree's tally of iterations). */
void harness_verdict_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The number of failed checks of the current case so far. */
int harness_failures(void);
/* Whether the current case was marked skipped. */
int harness_skipped(void);

/* A check with a verdict line of its own (see "Checks" above): prints "PASS GROUP:CASE:NAME"
 * if ok, else "FAIL GROUP:CASE:NAME why" and counts a failed check of the current case.
 * Returns ok. */
int harness_check(const char *name, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The check NAME passed: prints "PASS GROUP:CASE:NAME". */
void harness_pass(const char *name);
/* Runs fn(arg) in a child process, so that a crash costs one check, not the whole case: the
 * checks fn makes print their verdicts from the child, and its failed ones count in the current
 * case; a harness_fail in fn is reported as the failed check NAME. A child that does not come
 * back normally (a signal, an exit of its own) is the failed check NAME ("child killed by
 * signal N", "child exited with N"). Returns 1 if no check failed in it. */
int harness_isolated(const char *name, void (*fn)(void *arg), void *arg);

/* A call that must return exactly `want`: 1 if it did, else a failed check and 0. */
int harness_expect_code(int line, const char *what, unsigned long got, unsigned long want);

/* The checks of the cases. EXPECT_RC wants <dat2/udat.h> (DAT_RETURN). */
#define EXPECT(cond, ...) ((cond) ? 1 : (harness_fail(__LINE__, __VA_ARGS__), 0))
#define EXPECT_RC(expr, want)                                                                  \
    harness_expect_code(__LINE__, #expr, (unsigned long)(DAT_RETURN)(expr), (unsigned long)(DAT_RETURN)(want))

#endif
