/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The program c-tests/secure/run.sh starts twice as user nobody: as an ordinary program and
 * as a set-user-ID root copy, with DAT_OVERRIDE, DAT_DBG_TYPE and DAT_DBG_DEST set by the
 * caller. It only opens "ofa-v2-ib0", as the program of issue 21 did, and prints what the
 * script checks, each line starting with "sectest ":
 *
 *   sectest secure N euid N     getauxval(AT_SECURE) and the effective uid
 *   sectest libdat2 PATH        the libdat2 the loader mapped (one line per copy)
 *   sectest open 0xRC           what dat_ia_open("ofa-v2-ib0") returned
 *
 * Whether the override was honoured the script learns from the marker file the library named
 * in its dat.conf writes when it is loaded, and whether anything was logged from the lines
 * that do not start with "sectest ".
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>
#include <dat2/udat.h>

static int show_libdat2(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (info->dlpi_name && strstr(info->dlpi_name, "libdat2.so"))
        printf("sectest libdat2 %s\n", info->dlpi_name);
    return 0;
}

int main(void)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_RETURN rc;

    printf("sectest secure %lu euid %u\n", getauxval(AT_SECURE), (unsigned)geteuid());
    dl_iterate_phdr(show_libdat2, NULL);
    fflush(stdout);
    rc = dat_ia_open("ofa-v2-ib0", 8, &evd, &ia);
    fflush(stdout);
    printf("sectest open %#x\n", (unsigned)rc);
    if (rc == DAT_SUCCESS)
        dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
    return 0;
}
