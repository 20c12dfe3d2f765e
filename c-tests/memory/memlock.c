/*
 * The locked-memory limit (RLIMIT_MEMLOCK), case memlock_limit. Each part runs in a child
 * process of its own, which sets the limit and, when it runs as root, becomes nobody (root's
 * CAP_IPC_LOCK would exempt it from the limit):
 *
 *   1. soft = hard = 64 KiB: a 1 MiB LMR on a verbs IA is refused with
 *      DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY (0x80030002), the IA's DAT2_MEMLOCK
 *      attribute names the 64 KiB, and a 16 KiB LMR still registers. On the soft device, which
 *      pins nothing, the 1 MiB LMR registers.
 *   2. soft 64 KiB, hard unlimited: opening a verbs IA raises the soft limit to the hard one,
 *      and the 1 MiB LMR registers.
 */
#define _GNU_SOURCE
#include <dat2/udat.h>

#include "harness.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB 1024u
#define RC_MEMORY 0x80030002u /* DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY */

static const char *ia_name(void)
{
    const char *n = getenv("DAT2_TEST_IA");
    return n && *n ? n : "dat2-soft";
}

static const char *attr(DAT_IA_HANDLE ia, const char *name)
{
    static DAT_PROVIDER_ATTR pa;
    memset(&pa, 0, sizeof pa);
    if (dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR, &pa) != DAT_SUCCESS)
        return NULL;
    for (DAT_COUNT i = 0; i < pa.num_provider_specific_attr; i++)
        if (pa.provider_specific_attr[i].name && strcmp(pa.provider_specific_attr[i].name, name) == 0)
            return pa.provider_specific_attr[i].value;
    return NULL;
}

/* In the child: an LMR of `len` bytes; its return code (the LMR is freed). */
static DAT_RETURN lmr(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, size_t len)
{
    DAT_REGION_DESCRIPTION r;
    DAT_LMR_HANDLE h;
    DAT_LMR_CONTEXT lc;
    DAT_RMR_CONTEXT rc;
    DAT_VLEN rlen;
    DAT_VADDR raddr;
    char *buf = aligned_alloc(4096, len);
    if (!buf)
        return DAT_INTERNAL_ERROR;
    memset(buf, 1, len);
    memset(&r, 0, sizeof r);
    r.for_va = buf;
    DAT_RETURN ret = dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, len, pz,
                                    DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_VA_TYPE_VA, &h, &lc,
                                    &rc, &rlen, &raddr);
    if (ret == DAT_SUCCESS)
        dat_lmr_free(h);
    free(buf);
    return ret;
}

/* In the child: 0 when the part holds, 2 to skip (the reason on stderr), 1 on failure. */
static int part(int which, int verbs)
{
    struct rlimit l = {64 * KIB, which == 1 ? 64 * KIB : RLIM_INFINITY};
    if (setrlimit(RLIMIT_MEMLOCK, &l) != 0) {
        struct rlimit now = {0, 0};
        getrlimit(RLIMIT_MEMLOCK, &now);
        if (which == 2 && errno == EPERM) {
            fprintf(stderr, "the hard limit is %llu KiB, and this process may not raise it (CAP_SYS_RESOURCE)\n",
                    (unsigned long long)now.rlim_max / KIB);
            return 2;
        }
        perror("setrlimit");
        return 1;
    }
    if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
        perror("becoming nobody");
        return 1;
    }
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz;
    DAT_RETURN r = dat_ia_openv((DAT_NAME_PTR)ia_name(), 8, &async, &ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_FALSE);
    if (r != DAT_SUCCESS) {
        fprintf(stderr, "%s does not open as uid %u: 0x%08x\n", ia_name(), (unsigned)geteuid(), (unsigned)r);
        return 2;
    }
    if (dat_pz_create(ia, &pz) != DAT_SUCCESS) {
        fprintf(stderr, "dat_pz_create failed\n");
        return 1;
    }
    int bad = 0;
    const char *m = attr(ia, "DAT2_MEMLOCK");
    struct rlimit after;
    getrlimit(RLIMIT_MEMLOCK, &after);
    DAT_RETURN big = lmr(ia, pz, 1024 * KIB);
    if (which == 1 && verbs) {
        if (big != RC_MEMORY) {
            fprintf(stderr, "a 1 MiB LMR under a 64 KiB limit returned 0x%08x, expected 0x%08x\n", (unsigned)big,
                    RC_MEMORY);
            bad = 1;
        }
        if (!m || !strstr(m, "64 KiB")) {
            fprintf(stderr, "DAT2_MEMLOCK is \"%s\", which does not name the 64 KiB limit\n", m ? m : "(none)");
            bad = 1;
        }
        DAT_RETURN small = lmr(ia, pz, 16 * KIB);
        if (small != DAT_SUCCESS) {
            fprintf(stderr, "a 16 KiB LMR under a 64 KiB limit returned 0x%08x\n", (unsigned)small);
            bad = 1;
        }
    } else if (big != DAT_SUCCESS) {
        fprintf(stderr, "part %d: a 1 MiB LMR returned 0x%08x\n", which, (unsigned)big);
        bad = 1;
    }
    if (which == 2 && verbs && after.rlim_cur != RLIM_INFINITY) {
        fprintf(stderr, "the soft limit is %llu KiB after the IA opened, expected the hard limit (unlimited)\n",
                (unsigned long long)after.rlim_cur / KIB);
        bad = 1;
    }
    if (which == 2 && verbs && (!m || !strstr(m, "soft unlimited"))) {
        fprintf(stderr, "DAT2_MEMLOCK is \"%s\" after the raise\n", m ? m : "(none)");
        bad = 1;
    }
    dat_pz_free(pz);
    dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return bad;
}

void case_memlock_limit(void)
{
    int verbs = strncmp(ia_name(), "dat2-verbs-", 11) == 0;
    int skipped = 0;
    for (int which = 1; which <= 2; which++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(part(which, verbs));
        int status = 0;
        if (!EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait failed"))
            return;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        if (code == 2) {
            harness_note("part %d skipped (its reason is above)", which);
            skipped++;
            continue;
        }
        EXPECT(code == 0, "part %d (%s): the child %s (its reason is above)", which,
               which == 1 ? "soft = hard = 64 KiB" : "soft 64 KiB, hard unlimited",
               WIFEXITED(status) ? "failed" : "died");
    }
    if (skipped == 2)
        harness_skip("neither part could run here (see the log)");
}
