/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: the copy ceilings the benchmark's results are read against.
 *
 *   copy_bw [SIZE [SECONDS]]
 *
 * Copies one SIZE-byte buffer (1 MiB by default) into another, over and over for SECONDS
 * (0.5), first with memcpy() and then with one process_vm_readv() per copy from the
 * process's own memory: the system call the soft device's cross-memory path makes once per
 * RDMA write (the kernel pins and copies page by page whether the peer is another process
 * or ourselves). Prints "memcpy bw SIZE MBPS" and "cma bw SIZE MBPS", MB meaning 2^20 bytes.
 * Build: cc -O2 copy_bw.c */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int copy_memcpy(char *dst, const char *src, size_t len)
{
    memcpy(dst, src, len);
    /* Keep the compiler from dropping copies nobody reads. */
    __asm__ __volatile__("" : : "r"(dst) : "memory");
    return 0;
}

static int copy_cma(char *dst, const char *src, size_t len)
{
    struct iovec local = { dst, len }, remote = { (void *)src, len };
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

static void measure(const char *name, int (*copy)(char *, const char *, size_t), char *dst,
                    const char *src, size_t len, double secs)
{
    for (int i = 0; i < 8; i++) /* warm-up */
        if (copy(dst, src, len)) {
            perror(name);
            exit(1);
        }
    unsigned long n = 0;
    double t0 = now(), el;
    do {
        for (int i = 0; i < 16; i++)
            if (copy(dst, src, len)) {
                perror(name);
                exit(1);
            }
        n += 16;
        el = now() - t0;
    } while (el < secs);
    printf("%s bw %zu %.1f\n", name, len, (double)n * (double)len / el / (1024.0 * 1024.0));
}

int main(int argc, char **argv)
{
    size_t len = argc > 1 ? (size_t)strtoull(argv[1], NULL, 0) : (size_t)1 << 20;
    double secs = argc > 2 ? strtod(argv[2], NULL) : 0.5;
    char *src, *dst;
    if (len == 0 || posix_memalign((void **)&src, 4096, len) || posix_memalign((void **)&dst, 4096, len)) {
        fprintf(stderr, "copy_bw: cannot allocate 2 x %zu bytes\n", len);
        return 1;
    }
    memset(src, 0x5a, len);
    memset(dst, 0, len);
    measure("memcpy", copy_memcpy, dst, src, len, secs);
    measure("cma", copy_cma, dst, src, len, secs);
    free(src);
    free(dst);
    return 0;
}
