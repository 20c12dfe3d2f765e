/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2's VM tests: does the DAT registry of the libdat2 this runs against list an IA?
 *
 *   ia-listed NAME   exit 0 when NAME is listed, 1 when it is not, 2 when listing fails
 *   ia-listed        print every listed IA name, one a line
 *
 * The VM tests use it to tell "this IA does not exist yet" (its cases are skipped) from
 * "this IA exists but does not work" (its cases fail). Opening the IA could not tell them
 * apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dat2/udat.h>

int main(int argc, char **argv)
{
    DAT_COUNT count = 0;
    /* With a zero-length list the registry only counts its entries. */
    DAT_RETURN rc = dat_registry_list_providers(0, &count, NULL);
    if (rc != DAT_SUCCESS && DAT_GET_TYPE(rc) != DAT_INVALID_PARAMETER) {
        fprintf(stderr, "ia-listed: dat_registry_list_providers: 0x%08x\n", (unsigned)rc);
        return 2;
    }
    if (count <= 0)
        return argc > 1 ? 1 : 0;
    DAT_PROVIDER_INFO *info = calloc((size_t)count, sizeof *info);
    DAT_PROVIDER_INFO **slots = calloc((size_t)count, sizeof *slots);
    if (info == NULL || slots == NULL) {
        fprintf(stderr, "ia-listed: out of memory\n");
        return 2;
    }
    for (DAT_COUNT i = 0; i < count; i++)
        slots[i] = &info[i];
    DAT_COUNT got = 0;
    rc = dat_registry_list_providers(count, &got, slots);
    if (rc != DAT_SUCCESS) {
        fprintf(stderr, "ia-listed: dat_registry_list_providers: 0x%08x\n", (unsigned)rc);
        return 2;
    }
    int found = 0;
    for (DAT_COUNT i = 0; i < got && i < count; i++) {
        if (argc > 1)
            found |= strcmp(info[i].ia_name, argv[1]) == 0;
        else
            printf("%s\n", info[i].ia_name);
    }
    free(slots);
    free(info);
    return argc > 1 && !found ? 1 : 0;
}
