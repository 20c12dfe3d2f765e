/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: counts the user-space instructions a program's main thread executes between
 * two marks, split into those inside one shared library and the rest, by single-stepping it
 * with ptrace (no performance counters needed: this host's VM has none, and valgrind does not
 * know pidfd_getfd, which the soft device's same-host paths need).
 *
 *   inscount LIBNAME PROGRAM [ARGS...]
 *
 * The marks are two getppid() system calls the program makes (rdma_bench -I makes them around
 * its latency loops); instructions are counted from each first mark to the next, in the thread
 * that made them (the process's main thread). Other threads run untraced. Prints
 *   "inscount PAIR lib N other M"
 * (one line per pair of marks, numbered) where lib counts instructions whose address lies in a mapping of a file whose name
 * contains LIBNAME. Counts are exact for the path taken; they vary only when the path does
 * (a spin that waits longer executes more).
 * With INSCOUNT_PROFILE=FILE, the library offset of every instruction counted in the library
 * is appended to FILE, one hexadecimal number a line (for addr2line -f). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RANGES 16

static uint64_t lo[MAX_RANGES], hi[MAX_RANGES];
static int nranges;
/* The library's load address (its lowest mapping), for INSCOUNT_PROFILE. */
static uint64_t base = UINT64_MAX;

static void ranges(pid_t pid, const char *lib)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        perror("inscount: maps");
        exit(1);
    }
    while (fgets(line, sizeof line, f) && nranges < MAX_RANGES) {
        unsigned long a, b;
        char perm[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) == 3 && strstr(line, lib) && a < base)
            base = a;
        if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) == 3 && perm[2] == 'x' && strstr(line, lib)) {
            lo[nranges] = a;
            hi[nranges] = b;
            nranges++;
        }
    }
    fclose(f);
    if (nranges == 0) {
        fprintf(stderr, "inscount: no executable mapping of %s\n", lib);
        exit(1);
    }
}

static int in_lib(uint64_t ip)
{
    for (int i = 0; i < nranges; i++)
        if (ip >= lo[i] && ip < hi[i])
            return 1;
    return 0;
}

/* Resumes `pid` with `req` and waits for its next stop; returns 0 when it exited. A signal
 * stop other than the trap is delivered on the next resume through *sig. */
static int resume(pid_t pid, enum __ptrace_request req, int *sig)
{
    int status;
    if (ptrace(req, pid, 0, (void *)(intptr_t)*sig) != 0) {
        perror("inscount: ptrace");
        exit(1);
    }
    *sig = 0;
    for (;;) {
        if (waitpid(pid, &status, __WALL) < 0) {
            if (errno == EINTR)
                continue;
            perror("inscount: waitpid");
            exit(1);
        }
        break;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status))
        return 0;
    if (WIFSTOPPED(status)) {
        int s = WSTOPSIG(status);
        if (s != SIGTRAP && s != (SIGTRAP | 0x80))
            *sig = s;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: inscount LIBNAME PROGRAM [ARGS...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        execvp(argv[2], argv + 2);
        perror("inscount: exec");
        _exit(127);
    }
    int status, sig = 0;
    waitpid(pid, &status, 0);
    ptrace(PTRACE_SETOPTIONS, pid, 0, (void *)(intptr_t)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL));
    struct user_regs_struct r;
    FILE *prof = getenv("INSCOUNT_PROFILE") ? fopen(getenv("INSCOUNT_PROFILE"), "a") : NULL;
    for (int pair = 1;; pair++) {
        /* Until a first mark: system-call stops only. */
        for (;;) {
            if (!resume(pid, PTRACE_SYSCALL, &sig))
                return pair > 1 ? 0 : (fprintf(stderr, "inscount: the program made no mark\n"), 1);
            if (sig)
                continue;
            ptrace(PTRACE_GETREGS, pid, 0, &r);
            if (r.orig_rax == SYS_getppid)
                break;
        }
        /* Let the marking call finish (its exit stop). */
        resume(pid, PTRACE_SYSCALL, &sig);
        if (nranges == 0)
            ranges(pid, argv[1]);
        uint64_t lib = 0, other = 0;
        for (;;) {
            ptrace(PTRACE_GETREGS, pid, 0, &r);
            errno = 0;
            long word = ptrace(PTRACE_PEEKTEXT, pid, (void *)(uintptr_t)r.rip, 0);
            if (errno == 0 && (word & 0xffff) == 0x050f && r.rax == SYS_getppid)
                break; /* the second mark (its call is stopped at by the loop above) */
            if (in_lib(r.rip)) {
                lib++;
                if (prof)
                    fprintf(prof, "%llx\n", (unsigned long long)(r.rip - base));
            }
            else
                other++;
            if (!resume(pid, PTRACE_SINGLESTEP, &sig)) {
                fprintf(stderr, "inscount: the program ended before the second mark\n");
                return 1;
            }
        }
        printf("inscount %d lib %llu other %llu\n", pair, (unsigned long long)lib, (unsigned long long)other);
        fflush(stdout);
        /* The second mark's own system call: its entry stop, then its exit stop. */
        resume(pid, PTRACE_SYSCALL, &sig);
        resume(pid, PTRACE_SYSCALL, &sig);
    }
}
