/*
 * What the fake DAT provider (fakeprov.c) and its test driver (fptest.c) share.
 *
 * The provider keeps a journal of every provider entry point the DAT library
 * called: the entry point's name, its arguments widened to 64 bits, up to two
 * objects it handed back, and one string argument. The test driver reads the
 * journal through the fake_* functions below, which it looks up with dlsym after
 * dlopen()ing the provider itself (that also keeps the provider mapped when the
 * library dlclose()s it, so the journal survives the last dat_ia_close).
 */
#ifndef FAKEPROV_H
#define FAKEPROV_H

#include <stdint.h>

#define FAKE_MAX_ARGS 16

struct fake_call {
	char fn[32];              /* entry point, e.g. "ep_post_send" */
	int n;                    /* how many of a[] are used */
	uint64_t a[FAKE_MAX_ARGS];
	uint64_t out[2];          /* objects created by this call, if any */
	char s[112];              /* string argument (IA name, instance data) */
};

/* Exported by the provider. */
typedef int (*fake_ncalls_fn)(void);
typedef const struct fake_call *(*fake_call_at_fn)(int);
typedef void (*fake_reset_fn)(void);
/* The DAT entry point called after `skip` others returns `code`, doing nothing. */
typedef void (*fake_fail_later_fn)(int skip, uint32_t code);
/* The provider's DAT_PROVIDER, for forging objects that look real. */
typedef void *(*fake_provider_fn)(void);

/* Pointer-sized values in the journal. */
#define U(x) ((uint64_t)(uintptr_t)(x))
/* Out-pointers are journalled as 1 (given) or 0 (NULL). */
#define NN(x) ((uint64_t)((x) != 0))

#endif
