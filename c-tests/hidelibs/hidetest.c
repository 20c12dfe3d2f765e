/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2's hidelibs tests (see run.sh): a program linked against our libdat2 that
 * either tries to load a library by name or opens an IA, and says what happened.
 *
 *   hidetest dlopen LIB    exit 0 when dlopen(LIB) succeeds, 1 when it fails
 *   hidetest open IA       exit 0 when dat_ia_open(IA) succeeds (the IA is closed again),
 *                          1 when it returns a DAT error, 2 when it returns something that
 *                          is neither success nor an error
 * Each prints one line: what it did and the result. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <dat2/udat.h>

static int try_dlopen(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        printf("dlopen %s: failed: %s\n", lib, why ? why : "(no dlerror)");
        return 1;
    }
    printf("dlopen %s: loaded\n", lib);
    dlclose(h);
    return 0;
}

static int try_open(char *ia_name)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_RETURN rc = dat_ia_open(ia_name, 8, &async, &ia);
    const char *major = "?", *minor = "?";
    dat_strerror(rc, &major, &minor);
    printf("dat_ia_open %s: 0x%08x %s %s\n", ia_name, (unsigned)rc, major, minor);
    fflush(stdout);
    if (rc == DAT_SUCCESS) {
        DAT_RETURN closed = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        if (closed != DAT_SUCCESS) {
            printf("dat_ia_close: 0x%08x\n", (unsigned)closed);
            return 2;
        }
        return 0;
    }
    return ((DAT_UINT32)rc & DAT_CLASS_ERROR) ? 1 : 2;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "dlopen") == 0)
        return try_dlopen(argv[2]);
    if (argc == 3 && strcmp(argv[1], "open") == 0)
        return try_open(argv[2]);
    fprintf(stderr, "usage: %s dlopen LIB | open IA\n", argv[0]);
    return 3;
}
