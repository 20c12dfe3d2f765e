/*
 * The provider library libdat2prov.so.2 (dat2's built-in providers as a DAT provider library)
 * loaded through dat.conf by a libdat2: Debian's or ours (run.sh runs every case against both,
 * as "debian:..." and "dat2:..."). The dat.conf given through DAT_OVERRIDE names the library
 * in four entries (run.sh):
 *   dat2prov-a, dat2prov-b   "soft 127.0.0.1 0": two IAs of the library, one process
 *   dat2prov-default         "soft": the soft device's default ia_params
 *   dat2prov-bogus           "bogus 1 2": no such device
 *
 * Cases (the common runner, c-tests/common/harness.h):
 *   twice    both entries open in one process, an EP of each connected to the other, a
 *            message and an RDMA write across; each IA's objects dispatch through its own
 *            provider table (the first word of a handle)
 *   fini     dat_registry_remove_provider is called when the last IA of an entry closes:
 *            while open, registering the entry's key again is refused (ALREADY_REGISTERED);
 *            after the close it is accepted, and the entry opens again after that (the
 *            library is loaded again, or kept, and registers again)
 *   stale    a freed EVD, PZ and LMR used again: DAT_INVALID_HANDLE, not a crash, also
 *            through Debian's library (freed handles keep pointing at our table; each
 *            use in a child process of its own)
 *   params   "soft" alone opens on the default address; an unknown device is not
 *            registered: DAT_PROVIDER_NOT_FOUND
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define WAIT_US 10000000u

struct side {
    DAT_IA_HANDLE ia;
    DAT_PZ_HANDLE pz;
    DAT_EVD_HANDLE conn, dto, cr;
    DAT_EP_HANDLE ep;
    DAT_LMR_HANDLE lmr;
    DAT_LMR_CONTEXT lkey;
    DAT_RMR_CONTEXT rkey;
    char buf[4096];
};

static int open_ia(const char *name, DAT_IA_HANDLE *ia)
{
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    return EXPECT_RC(dat_ia_open((DAT_NAME_PTR)name, 8, &async, ia), DAT_SUCCESS);
}

static int side_open(struct side *s, const char *name)
{
    DAT_VLEN reg_len;
    DAT_VADDR reg_addr;
    DAT_REGION_DESCRIPTION region;

    memset(s, 0, sizeof *s);
    if (!open_ia(name, &s->ia))
        return 0;
    region.for_va = s->buf;
    return EXPECT_RC(dat_pz_create(s->ia, &s->pz), DAT_SUCCESS) &&
           EXPECT_RC(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &s->conn), DAT_SUCCESS) &&
           EXPECT_RC(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &s->dto), DAT_SUCCESS) &&
           EXPECT_RC(dat_evd_create(s->ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &s->cr), DAT_SUCCESS) &&
           EXPECT_RC(dat_ep_create(s->ia, s->pz, s->dto, s->dto, s->conn, NULL, &s->ep), DAT_SUCCESS) &&
           EXPECT_RC(dat_lmr_create(s->ia, DAT_MEM_TYPE_VIRTUAL, region, sizeof s->buf, s->pz, DAT_MEM_PRIV_ALL_FLAG,
                                    DAT_VA_TYPE_VA, &s->lmr, &s->lkey, &s->rkey, &reg_len, &reg_addr),
                     DAT_SUCCESS);
}

/* Waits for one event on evd; returns its number (0 when none came). */
static DAT_EVENT_NUMBER wait_event(int line, DAT_EVD_HANDLE evd, DAT_EVENT *ev)
{
    DAT_COUNT more;
    DAT_RETURN r = dat_evd_wait(evd, WAIT_US, 1, ev, &more);
    if (r != DAT_SUCCESS) {
        harness_fail(line, "dat_evd_wait: 0x%x", (unsigned)r);
        return 0;
    }
    return ev->event_number;
}

/* The first word of a handle: the DAT_PROVIDER the host library dispatches through. */
static const void *provider_of(const void *handle)
{
    return *(void *const *)handle;
}

/* Connects a's EP to b's (b listens on a service point of its own IA); 1 on success. */
static int connect_sides(struct side *a, struct side *b)
{
    DAT_IA_ATTR attr;
    DAT_PSP_HANDLE psp;
    DAT_CONN_QUAL qual = 0;
    DAT_EVENT ev;
    if (!EXPECT_RC(dat_ia_query(b->ia, NULL, DAT_IA_FIELD_ALL, &attr, 0, NULL), DAT_SUCCESS) ||
        !EXPECT_RC(dat_psp_create_any(b->ia, &qual, b->cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS))
        return 0;
    int ok = EXPECT_RC(dat_ep_connect(a->ep, attr.ia_address_ptr, qual, WAIT_US, 0, NULL, DAT_QOS_BEST_EFFORT,
                                      DAT_CONNECT_DEFAULT_FLAG),
                       DAT_SUCCESS) &&
             EXPECT(wait_event(__LINE__, b->cr, &ev) == DAT_CONNECTION_REQUEST_EVENT, "no connection request") &&
             EXPECT_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, b->ep, 0, NULL), DAT_SUCCESS) &&
             EXPECT(wait_event(__LINE__, b->conn, &ev) == DAT_CONNECTION_EVENT_ESTABLISHED, "b: not established") &&
             EXPECT(wait_event(__LINE__, a->conn, &ev) == DAT_CONNECTION_EVENT_ESTABLISHED, "a: not established");
    EXPECT_RC(dat_psp_free(psp), DAT_SUCCESS);
    return ok;
}

static void close_ia(DAT_IA_HANDLE ia)
{
    if (ia)
        EXPECT_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
}

/* The key of a dat.conf entry of the test's file (u2.0, nonthreadsafe). */
static DAT_PROVIDER_INFO info_of(const char *name)
{
    DAT_PROVIDER_INFO info;
    memset(&info, 0, sizeof info);
    snprintf(info.ia_name, sizeof info.ia_name, "%s", name);
    info.dapl_version_major = 2;
    info.dapl_version_minor = 0;
    info.is_thread_safe = DAT_FALSE;
    return info;
}

/* Whether the library's registration of `name` is gone: registering the key again is
 * accepted (and undone at once), not refused as already registered. */
static DAT_RETURN register_again(const char *name)
{
    static DAT_PROVIDER dummy; /* never called: removed before anything opens the key */
    DAT_PROVIDER_INFO info = info_of(name);
    dummy.device_name = "dummy";
    DAT_RETURN r = dat_registry_add_provider(&dummy, &info);
    if (r == DAT_SUCCESS)
        EXPECT_RC(dat_registry_remove_provider(&dummy, &info), DAT_SUCCESS);
    return r;
}

static void case_twice(void)
{
    static struct side a, b;
    DAT_EVENT ev;
    if (side_open(&a, "dat2prov-a") && side_open(&b, "dat2prov-b")) {
        EXPECT(provider_of(a.pz) != provider_of(b.pz), "both IAs' PZs dispatch through one table %p",
               provider_of(a.pz));
        EXPECT(provider_of(a.pz) == provider_of(a.ep) && provider_of(a.ep) == provider_of(a.lmr),
               "the objects of one IA dispatch through different tables");
        DAT_LMR_TRIPLET recv = {(DAT_VADDR)(uintptr_t)b.buf, 64, b.lkey};
        DAT_LMR_TRIPLET send = {(DAT_VADDR)(uintptr_t)a.buf, 64, a.lkey};
        DAT_LMR_TRIPLET write = {(DAT_VADDR)(uintptr_t)(b.buf + 1024), 128, b.lkey};
        DAT_RMR_TRIPLET target = {(DAT_VADDR)(uintptr_t)(a.buf + 2048), 128, a.rkey};
        DAT_DTO_COOKIE cookie = {.as_64 = 7};
        memset(b.buf + 1024, 'w', 128);
        snprintf(a.buf, 64, "over two entries of one provider library");
        if (EXPECT_RC(dat_ep_post_recv(b.ep, 1, &recv, cookie, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
            connect_sides(&a, &b) &&
            EXPECT_RC(dat_ep_post_send(a.ep, 1, &send, cookie, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
            EXPECT(wait_event(__LINE__, a.dto, &ev) == DAT_DTO_COMPLETION_EVENT, "a: no send completion") &&
            EXPECT(wait_event(__LINE__, b.dto, &ev) == DAT_DTO_COMPLETION_EVENT, "b: no receive completion") &&
            EXPECT(ev.event_data.dto_completion_event_data.transfered_length == 64, "received %u bytes, expected 64",
                   (unsigned)ev.event_data.dto_completion_event_data.transfered_length) &&
            EXPECT(strcmp(b.buf, "over two entries of one provider library") == 0, "received \"%.40s\"", b.buf) &&
            EXPECT_RC(dat_ep_post_rdma_write(b.ep, 1, &write, cookie, &target, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS) &&
            EXPECT(wait_event(__LINE__, b.dto, &ev) == DAT_DTO_COMPLETION_EVENT, "b: no write completion") &&
            EXPECT(ev.event_data.dto_completion_event_data.status == DAT_DTO_SUCCESS, "write status %d",
                   (int)ev.event_data.dto_completion_event_data.status)) {
            EXPECT(a.buf[2048] == 'w' && a.buf[2048 + 127] == 'w', "the RDMA write did not land in a's buffer");
        }
    }
    close_ia(a.ia);
    close_ia(b.ia);
    EXPECT_RC(register_again("dat2prov-a"), DAT_SUCCESS);
    EXPECT_RC(register_again("dat2prov-b"), DAT_SUCCESS);
}

static void case_fini(void)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL, ia2 = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz;
    for (int round = 0; round < 2; round++) {
        if (!open_ia("dat2prov-a", &ia))
            return;
        /* Two IAs of the entry: the first close keeps the registration. */
        if (round == 1 && !open_ia("dat2prov-a", &ia2))
            return;
        EXPECT_RC(register_again("dat2prov-a"), DAT_CLASS_ERROR | DAT_PROVIDER_ALREADY_REGISTERED);
        if (EXPECT_RC(dat_pz_create(ia, &pz), DAT_SUCCESS))
            EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
        if (ia2) {
            close_ia(ia2);
            ia2 = DAT_HANDLE_NULL;
            EXPECT_RC(register_again("dat2prov-a"), DAT_CLASS_ERROR | DAT_PROVIDER_ALREADY_REGISTERED);
        }
        close_ia(ia);
        /* The last close of the entry finalised the library: its key is free. */
        EXPECT_RC(register_again("dat2prov-a"), DAT_SUCCESS);
    }
}

enum stale_kind { STALE_EVD, STALE_PZ, STALE_LMR };
static const char *const stale_names[] = {"evd_free", "pz_query", "lmr_free"};

static void use_stale(void *arg)
{
    enum stale_kind k = *(enum stale_kind *)arg;
    static struct side s;
    if (!side_open(&s, "dat2prov-a"))
        return;
    DAT_RETURN r = 0;
    switch (k) {
    case STALE_EVD:
        EXPECT_RC(dat_evd_free(s.cr), DAT_SUCCESS);
        r = dat_evd_free(s.cr);
        break;
    case STALE_PZ: {
        DAT_PZ_HANDLE pz;
        DAT_PZ_PARAM param;
        EXPECT_RC(dat_pz_create(s.ia, &pz), DAT_SUCCESS);
        EXPECT_RC(dat_pz_free(pz), DAT_SUCCESS);
        r = dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param);
        break;
    }
    case STALE_LMR:
        EXPECT_RC(dat_lmr_free(s.lmr), DAT_SUCCESS);
        r = dat_lmr_free(s.lmr);
        break;
    }
    harness_check(stale_names[k], DAT_GET_TYPE(r) == DAT_INVALID_HANDLE, "returned 0x%x, expected DAT_INVALID_HANDLE",
                  (unsigned)r);
    close_ia(s.ia);
}

static void case_stale(void)
{
    for (enum stale_kind k = STALE_EVD; k <= STALE_LMR; k++)
        harness_isolated(stale_names[k], use_stale, &k);
}

static void case_params(void)
{
    DAT_IA_HANDLE ia;
    DAT_IA_ATTR attr;
    if (open_ia("dat2prov-default", &ia)) {
        if (EXPECT_RC(dat_ia_query(ia, NULL, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL), DAT_SUCCESS)) {
            const struct sockaddr_in *sin = (const struct sockaddr_in *)attr.ia_address_ptr;
            EXPECT(sin->sin_family == AF_INET && sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK),
                   "\"soft\" alone: the IA is not on 127.0.0.1 (family %d)", sin->sin_family);
        }
        close_ia(ia);
    }
    ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async = DAT_HANDLE_NULL;
    DAT_RETURN r = dat_ia_open((DAT_NAME_PTR) "dat2prov-bogus", 8, &async, &ia);
    EXPECT(DAT_GET_TYPE(r) == DAT_PROVIDER_NOT_FOUND, "an unknown device opened: 0x%x", (unsigned)r);
    if (r == DAT_SUCCESS)
        close_ia(ia);
}

static const struct harness_case cases[] = {
    {"twice", case_twice, 0},
    {"fini", case_fini, 0},
    {"stale", case_stale, 0},
    {"params", case_params, 0},
};
static const struct harness_group group = {"plugin", cases, sizeof cases / sizeof cases[0], NULL, NULL};

int main(int argc, char **argv)
{
    return harness_main(argc, argv, &group);
}
