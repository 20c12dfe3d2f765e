/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: list the IA names the DAT registry knows, then try to open each one and say
 * what happened. Build: cc list_providers.c $(pkg-config --cflags --libs dat2) */
#include <stdio.h>
#include <stdlib.h>
#include <dat2/udat.h>

int main(void)
{
    DAT_COUNT count = 0;
    DAT_RETURN rc = dat_registry_list_providers(0, &count, NULL);
    if (DAT_GET_TYPE(rc) != DAT_INVALID_PARAMETER && rc != DAT_SUCCESS) {
        fprintf(stderr, "dat_registry_list_providers: %#x\n", rc);
        return 1;
    }
    printf("%d provider(s) registered\n", (int)count);
    if (count == 0)
        return 0;
    DAT_PROVIDER_INFO *infos = calloc((size_t)count, sizeof *infos);
    DAT_PROVIDER_INFO **list = calloc((size_t)count, sizeof *list);
    if (!infos || !list)
        return 1;
    for (DAT_COUNT i = 0; i < count; i++)
        list[i] = &infos[i];
    rc = dat_registry_list_providers(count, &count, list);
    if (rc != DAT_SUCCESS) {
        fprintf(stderr, "dat_registry_list_providers: %#x\n", rc);
        return 1;
    }
    for (DAT_COUNT i = 0; i < count; i++) {
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
        const char *major = "", *minor = "";
        rc = dat_ia_openv(infos[i].ia_name, 8, &async_evd, &ia, infos[i].dapl_version_major,
                          infos[i].dapl_version_minor, infos[i].is_thread_safe);
        if (rc == DAT_SUCCESS) {
            printf("  %-28s DAT %u.%u %-13s opens\n", infos[i].ia_name,
                   infos[i].dapl_version_major, infos[i].dapl_version_minor,
                   infos[i].is_thread_safe ? "threadsafe" : "nonthreadsafe");
            dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        } else {
            dat_strerror(rc, &major, &minor);
            printf("  %-28s DAT %u.%u %-13s does not open: %s %s\n", infos[i].ia_name,
                   infos[i].dapl_version_major, infos[i].dapl_version_minor,
                   infos[i].is_thread_safe ? "threadsafe" : "nonthreadsafe", major, minor);
        }
    }
    free(list);
    free(infos);
    return 0;
}
