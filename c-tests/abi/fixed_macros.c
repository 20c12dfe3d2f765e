/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Part of dat2: checks the macros whose Debian definitions cannot be used
 * (they do not compile, or refer to names that do not exist), so the ABI
 * comparison skips them. Ours must pass the right operation code and
 * arguments. Built against our headers only.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/dat_ib_extensions.h>

static int failures;

#define CHECK(cond) do { \
    if (!(cond)) { \
        printf("check failed: %s (line %d)\n", #cond, __LINE__); \
        failures++; \
    } \
} while (0)

/* What the last dat_extension_op() call received. */
static struct {
    DAT_HANDLE handle;
    DAT_EXTENDED_OP op;
    unsigned long long arg[10];
    int nargs;
} last;

/* Stands in for the library: records the arguments, reading each with the
 * width a provider reads it with. */
DAT_RETURN dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
{
    va_list ap;
    int i;

    memset(&last, 0, sizeof last);
    last.handle = handle;
    last.op = op;
    va_start(ap, op);
    switch (op) {
    case DAT_IB_START_COUNTERS_OP:
    case DAT_IB_STOP_COUNTERS_OP:
        last.arg[0] = (unsigned)va_arg(ap, int);
        last.nargs = 1;
        break;
    case DAT_IB_COLLECTIVE_SET_CLOCK_OP:
        last.arg[0] = va_arg(ap, DAT_UINT64);
        last.arg[1] = va_arg(ap, DAT_CONTEXT).as_64;
        last.nargs = 2;
        break;
    case DAT_IB_COLLECTIVE_READ_CLOCK_OP:
        last.arg[0] = (unsigned long long)(size_t)va_arg(ap, DAT_UINT64 *);
        last.nargs = 1;
        break;
    case DAT_IB_COLLECTIVE_GATHERV_OP:
        last.arg[0] = (size_t)va_arg(ap, DAT_PVOID);
        last.arg[1] = (unsigned)va_arg(ap, DAT_COUNT);
        last.arg[2] = (size_t)va_arg(ap, DAT_PVOID);
        last.arg[3] = (size_t)va_arg(ap, DAT_COUNT *);
        last.arg[4] = (size_t)va_arg(ap, DAT_COUNT *);
        last.arg[5] = va_arg(ap, DAT_IB_COLLECTIVE_RANK);
        last.arg[6] = va_arg(ap, DAT_CONTEXT).as_64;
        last.arg[7] = (unsigned)va_arg(ap, int);
        last.nargs = 8;
        break;
    case DAT_IB_COLLECTIVE_ALLTOALLV_OP:
        for (i = 0; i < 6; i++)
            last.arg[i] = (size_t)va_arg(ap, void *);
        last.arg[6] = va_arg(ap, DAT_CONTEXT).as_64;
        last.arg[7] = (unsigned)va_arg(ap, int);
        last.nargs = 8;
        break;
    default:
        break;
    }
    va_end(ap);
    return DAT_SUCCESS;
}

static DAT_IA_HANDLE ha_ia;
static const char *ha_name;
static DAT_BOOLEAN *ha_answer;

static DAT_RETURN ha_related(DAT_IA_HANDLE ia, const DAT_NAME_PTR name,
                             DAT_BOOLEAN *answer)
{
    ha_ia = ia;
    ha_name = name;
    ha_answer = answer;
    *answer = DAT_TRUE;
    return DAT_SUCCESS;
}

int main(void)
{
    DAT_HANDLE coll = (DAT_HANDLE)0x1000;
    DAT_UINT64 clock = 0;
    DAT_CONTEXT ctx;
    DAT_COUNT lens[2], displs[2];
    char sbuf[8], rbuf[8];

    ctx.as_64 = 0xc0ffee;

    dat_ib_collective_set_clock(coll, 0x123456789ULL, ctx);
    CHECK(last.handle == coll);
    CHECK(last.op == DAT_IB_COLLECTIVE_SET_CLOCK_OP);
    CHECK(last.arg[0] == 0x123456789ULL);
    CHECK(last.arg[1] == 0xc0ffee);

    dat_ib_collective_read_clock(coll, &clock);
    CHECK(last.op == DAT_IB_COLLECTIVE_READ_CLOCK_OP);
    CHECK(last.arg[0] == (unsigned long long)(size_t)&clock);

    dat_ib_collective_gatherv(coll, sbuf, 8, rbuf, lens, displs, 3, ctx,
                              DAT_COMPLETION_SUPPRESS_FLAG);
    CHECK(last.op == DAT_IB_COLLECTIVE_GATHERV_OP);
    CHECK(last.arg[0] == (size_t)sbuf);
    CHECK(last.arg[1] == 8);
    CHECK(last.arg[2] == (size_t)rbuf);
    CHECK(last.arg[3] == (size_t)lens);
    CHECK(last.arg[4] == (size_t)displs);
    CHECK(last.arg[5] == 3);
    CHECK(last.arg[6] == 0xc0ffee);
    CHECK(last.arg[7] == DAT_COMPLETION_SUPPRESS_FLAG);

    dat_ib_collective_alltoallv(coll, sbuf, lens, displs, rbuf, lens + 1,
                                displs + 1, ctx, DAT_COMPLETION_DEFAULT_FLAG);
    CHECK(last.op == DAT_IB_COLLECTIVE_ALLTOALLV_OP);
    CHECK(last.arg[0] == (size_t)sbuf);
    CHECK(last.arg[1] == (size_t)lens);
    CHECK(last.arg[2] == (size_t)displs);
    CHECK(last.arg[3] == (size_t)rbuf);
    CHECK(last.arg[4] == (size_t)(lens + 1));
    CHECK(last.arg[5] == (size_t)(displs + 1));
    CHECK(last.arg[6] == 0xc0ffee);
    CHECK(last.arg[7] == DAT_COMPLETION_DEFAULT_FLAG);

    dat_ib_start_counter(coll, DCNT_IA_LNK);
    CHECK(last.op == DAT_IB_START_COUNTERS_OP);
    CHECK(last.arg[0] == DCNT_IA_LNK);
    dat_ib_stop_counter(coll, DCNT_IA_DIAG);
    CHECK(last.op == DAT_IB_STOP_COUNTERS_OP);
    CHECK(last.arg[0] == DCNT_IA_DIAG);

    {
        /* An object whose first word is its provider table. */
        DAT_PROVIDER prov;
        DAT_PROVIDER *object = &prov;
        DAT_IA_HANDLE ia = (DAT_IA_HANDLE)&object;
        DAT_BOOLEAN answer = DAT_FALSE;
        char other[] = "other-ia";

        memset(&prov, 0, sizeof prov);
        prov.ia_ha_related_func = ha_related;
        CHECK(DAT_IA_HA_RELATED(ia, other, &answer) == DAT_SUCCESS);
        CHECK(ha_ia == ia);
        CHECK(ha_name == other);
        CHECK(ha_answer == &answer);
        CHECK(answer == DAT_TRUE);
    }

    if (failures)
        return 1;
    printf("fixed macros ok\n");
    return 0;
}
