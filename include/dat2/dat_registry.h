/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Part of dat2: the registry interface for provider libraries.
 *
 * The registry loads a provider library named in dat.conf, resolves its
 * dat_provider_init()/dat_provider_fini() entry points and calls them; the
 * provider announces each IA it serves with dat_registry_add_provider().
 * Include <dat2/udat.h> before this header.
 */
#ifndef _DAT_REGISTRY_H_
#define _DAT_REGISTRY_H_

#if !defined(_UDAT_H_)
#error "include <dat2/udat.h> before <dat2/dat_registry.h>"
#endif

#include <dat2/udat_redirection.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Provider table, registry key (IA name, API version, thread safety). */
extern DAT_RETURN DAT_API dat_registry_add_provider(const DAT_PROVIDER *,
    const DAT_PROVIDER_INFO *);
extern DAT_RETURN DAT_API dat_registry_remove_provider(const DAT_PROVIDER *,
    const DAT_PROVIDER_INFO *);

/* Entry points a loadable provider library exports, and their types:
 * init gets the registry key and the dat.conf instance data string. */
#define DAT_PROVIDER_INIT_FUNC_NAME dat_provider_init
#define DAT_PROVIDER_FINI_FUNC_NAME dat_provider_fini
#define DAT_PROVIDER_INIT_FUNC_STR "dat_provider_init"
#define DAT_PROVIDER_FINI_FUNC_STR "dat_provider_fini"

typedef void (DAT_API *DAT_PROVIDER_INIT_FUNC)(const DAT_PROVIDER_INFO *,
    const char *);
typedef void (DAT_API *DAT_PROVIDER_FINI_FUNC)(const DAT_PROVIDER_INFO *);

/* Whether two IAs back each other up (high availability). */
typedef enum dat_ha_relationship {
    DAT_HA_FALSE = 0,
    DAT_HA_TRUE = 1,
    DAT_HA_UNKNOWN = 2,
    DAT_HA_CONFLICTING = 3,  /* the two IAs disagree */
    DAT_HA_EXTENSION_BASE = 4
} DAT_HA_RELATIONSHIP;

/* First IA name, second IA name, ->relationship. */
extern DAT_RETURN DAT_API dat_registry_providers_related(const DAT_NAME_PTR,
    const DAT_NAME_PTR, DAT_HA_RELATIONSHIP *);

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REGISTRY_H_ */
