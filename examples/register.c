/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: the main example. Opens the built-in software RDMA device (dat2-soft, no
 * dat.conf needed), registers memory of each of the three DAT memory types, prints what the
 * library returned, and frees everything.
 * Build: cc register.c $(pkg-config --cflags --libs dat2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dat2/udat.h>

#define CHECK(call)                                                                  \
    do {                                                                             \
        DAT_RETURN rc_ = (call);                                                     \
        if (rc_ != DAT_SUCCESS) {                                                    \
            const char *major_ = "", *minor_ = "";                                   \
            dat_strerror(rc_, &major_, &minor_);                                     \
            fprintf(stderr, "%s:%d: %s: %s %s (%#x)\n", __FILE__, __LINE__, #call,   \
                    major_, minor_, rc_);                                            \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static void show(const char *what, DAT_LMR_HANDLE lmr)
{
    DAT_LMR_PARAM p;
    CHECK(dat_lmr_query(lmr, DAT_LMR_FIELD_ALL, &p));
    printf("  %-15s lmr_context 0x%08x  rmr_context 0x%08x  [%#lx, +%lu)  privileges %#x\n", what,
           p.lmr_context, p.rmr_context, (unsigned long)p.registered_address,
           (unsigned long)p.registered_size, p.mem_priv);
}

int main(int argc, char **argv)
{
    char default_name[] = "dat2-soft";
    char *name = argc > 1 ? argv[1] : default_name;
    DAT_IA_HANDLE ia;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr;
    DAT_PROVIDER_ATTR prov_attr;
    CHECK(dat_ia_open(name, 8, &async_evd, &ia));
    CHECK(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &prov_attr));
    printf("opened %s: adapter %s (%s), max %d LMRs, memory types %#x\n", name,
           ia_attr.adapter_name, ia_attr.vendor_name, ia_attr.max_lmrs,
           prov_attr.lmr_mem_types_supported);

    DAT_PZ_HANDLE pz, pz2;
    CHECK(dat_pz_create(ia, &pz));
    CHECK(dat_pz_create(ia, &pz2));

    size_t len = 1 << 20;
    char *buf = malloc(len);
    if (!buf)
        return 1;
    memset(buf, 0, len);

    DAT_REGION_DESCRIPTION region;
    DAT_LMR_HANDLE local, remote, again, over, shared1, shared2;
    DAT_LMR_CONTEXT lkey;
    DAT_RMR_CONTEXT rkey;
    DAT_VLEN reg_len;
    DAT_VADDR reg_addr;

    region.for_va = buf;
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                         DAT_VA_TYPE_VA, &local, &lkey, &rkey, &reg_len, &reg_addr));
    show("virtual, local", local);
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, DAT_MEM_PRIV_ALL_FLAG,
                         DAT_VA_TYPE_VA, &remote, &lkey, &rkey, &reg_len, &reg_addr));
    show("virtual, remote", remote);
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, DAT_MEM_PRIV_ALL_FLAG,
                         DAT_VA_TYPE_VA, &again, &lkey, &rkey, &reg_len, &reg_addr));
    show("same again", again);

    region.for_lmr_handle = remote;
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_LMR, region, 0, pz2, DAT_MEM_PRIV_REMOTE_READ_FLAG,
                         DAT_VA_TYPE_VA, &over, &lkey, &rkey, &reg_len, &reg_addr));
    show("LMR over LMR", over);

    char cookie[DAT_LMR_COOKIE_SIZE];
    memset(cookie, 0, sizeof cookie);
    memcpy(cookie, "dat2 example region", 19);
    region.for_shared_memory.virtual_address = buf;
    region.for_shared_memory.shared_memory_id = &cookie;
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, region, len / 2, pz,
                         DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_VA_TYPE_VA, &shared1, &lkey, &rkey,
                         &reg_len, &reg_addr));
    show("shared #1", shared1);
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, region, len / 2, pz,
                         DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_VA_TYPE_VA, &shared2, &lkey, &rkey,
                         &reg_len, &reg_addr));
    show("shared #2", shared2);

    DAT_RETURN rc = dat_pz_free(pz);
    printf("dat_pz_free while LMRs use it: %#x (DAT_INVALID_STATE | PZ_IN_USE)\n", rc);

    CHECK(dat_lmr_free(shared2));
    CHECK(dat_lmr_free(shared1));
    CHECK(dat_lmr_free(over));
    CHECK(dat_lmr_free(again));
    CHECK(dat_lmr_free(remote));
    CHECK(dat_lmr_free(local));
    rc = dat_lmr_free(local);
    printf("dat_lmr_free of a freed LMR: %#x (DAT_INVALID_HANDLE | LMR)\n", rc);
    CHECK(dat_pz_free(pz2));
    CHECK(dat_pz_free(pz));
    CHECK(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG));
    free(buf);
    printf("all registrations released; IA closed\n");
    return 0;
}
