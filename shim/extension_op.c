/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: the variadic entry point dat_extension_op.
 *
 * Only C can accept "..." and pass a real va_list on, so this is the one exported function
 * written in C. The Rust side (src/api/ext.rs) checks the handle, resolves the provider and keeps
 * the registry's books; this file only moves the arguments. It includes no DAT header: the few
 * types it needs are spelled out below and must match src/api/ext.rs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef uint32_t dat2_return;
typedef dat2_return (*dat2_extended_op_fn)(void *handle, int op, va_list args);

/* Mirrors ExtCall in src/api/ext.rs. */
struct dat2_ext_call {
    dat2_extended_op_fn func;
    void *handle;
    void **ia_out;
    uint32_t mode;
};

#define DAT2_OPEN_EXTENSION_BASE 0x1000
#define DAT2_OPEN_QUERY_OP 0x1000

__attribute__((visibility("hidden"))) dat2_return
dat2_ext_begin(void *handle, int op, const char *name, void **ia_out, struct dat2_ext_call *call);
__attribute__((visibility("hidden"))) dat2_return
dat2_ext_end(const struct dat2_ext_call *call, dat2_return status);

__attribute__((visibility("default"))) dat2_return dat_extension_op(void *handle, int op, ...);

dat2_return dat_extension_op(void *handle, int op, ...)
{
    struct dat2_ext_call call = { NULL, NULL, NULL, 0 };
    const char *name = NULL;
    void **ia_out = NULL;
    dat2_return status;
    va_list args;

    va_start(args, op);
    if (op & DAT2_OPEN_EXTENSION_BASE) {
        /* An open op names its provider first; the provider gets the rest. */
        name = va_arg(args, const char *);
        if (op == DAT2_OPEN_QUERY_OP) {
            /* Its next argument is where the provider returns its IA: note it, so that the
             * registry can recognise that IA in the matching close op. */
            va_list peek;
            va_copy(peek, args);
            ia_out = va_arg(peek, void **);
            va_end(peek);
        }
    }
    status = dat2_ext_begin(handle, op, name, ia_out, &call);
    if (status == 0) {
        status = call.func(call.handle, op, args);
        status = dat2_ext_end(&call, status);
    }
    va_end(args);
    return status;
}
