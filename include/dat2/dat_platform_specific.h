/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Part of dat2: basic scalar types and platform glue (POSIX/Linux only).
 */
#ifndef _DAT_PLATFORM_SPECIFIC_H_
#define _DAT_PLATFORM_SPECIFIC_H_

/* Suggested buffer alignment; a build may predefine its own value. */
#ifndef DAT_OPTIMAL_ALIGNMENT
#define DAT_OPTIMAL_ALIGNMENT 256
#endif

#include <sys/types.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdio.h>

typedef u_int32_t DAT_UINT32;
typedef u_int64_t DAT_UINT64;
typedef unsigned long long DAT_UVERYLONG;
typedef DAT_UINT64 DAT_PADDR;
typedef void *DAT_PVOID;
typedef int DAT_COUNT;

/* 64-bit constants: used only when <stdint.h> has not provided it. */
#ifndef UINT64_C
#define UINT64_C(c) c##ULL
#endif

/* Conversions between IA handles and unsigned long. */
#define DAT_IA_HANDLE_TO_UL(a) (unsigned long)(a)
#define DAT_UL_TO_IA_HANDLE(a) (DAT_IA_HANDLE)(a)

/* Communicator triple used by the connection service point calls. */
typedef struct dat_comm {
    int domain;
    int type;
    int protocol;
} DAT_COMM;

typedef int DAT_FD;

/* Addresses are the operating system's own socket address structures. */
typedef struct sockaddr DAT_SOCK_ADDR;
typedef struct sockaddr_in6 DAT_SOCK_ADDR6;

#define DAT_AF_INET AF_INET
#define DAT_AF_INET6 AF_INET6

/* Calling convention and export markers: nothing special on this platform. */
#define DAT_API
#define DAT_EXPORT extern

/* Parameter direction markers, purely informative. */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef INOUT
#define INOUT
#endif

#endif /* _DAT_PLATFORM_SPECIFIC_H_ */
