/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Part of dat2: argument readers for the built-in providers' handle_extendedop_func
 * (src/builtin/ext.rs), which receives the va_list as an opaque pointer. On x86_64 a va_list
 * parameter is a pointer to the caller's state, so each call advances the caller's list.
 * Apart from extension_op.c: the provider library (libdat2prov.so.2, feature "plugin") has
 * these but not dat_extension_op, which is its host library's. */
#include <stdarg.h>
#include <stdint.h>

__attribute__((visibility("hidden"))) uint64_t dat2_va_u64(va_list args);
__attribute__((visibility("hidden"))) void *dat2_va_ptr(va_list args);
__attribute__((visibility("hidden"))) int dat2_va_int(va_list args);

uint64_t dat2_va_u64(va_list args)
{
    return va_arg(args, uint64_t);
}

void *dat2_va_ptr(va_list args)
{
    return va_arg(args, void *);
}

int dat2_va_int(va_list args)
{
    return va_arg(args, int);
}
