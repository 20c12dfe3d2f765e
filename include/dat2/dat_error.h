/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Part of dat2: DAT_RETURN status codes.
 *
 * A DAT_RETURN packs three fields into 32 bits:
 *   bits 31..30  class (error, warning or success)
 *   bits 29..16  type  (DAT_RETURN_TYPE)
 *   bits 15..0   subtype (DAT_RETURN_SUBTYPE), extra detail for the type
 * DAT_SUCCESS is zero. Callers should test DAT_GET_TYPE(), because some
 * providers return a bare type without the class bit.
 */
#ifndef _DAT_ERROR_H_
#define _DAT_ERROR_H_

#include <dat2/dat_platform_specific.h>

/* Class bits. */
#define DAT_CLASS_ERROR   0x80000000
#define DAT_CLASS_WARNING 0x40000000
#define DAT_CLASS_SUCCESS 0x00000000

/* Field masks. */
#define DAT_TYPE_MASK     0x3fff0000
#define DAT_SUBTYPE_MASK  0x0000ffff

/* Field accessors. */
#define DAT_IS_WARNING(status)  ((DAT_UINT32)(status) & DAT_CLASS_WARNING)
#define DAT_GET_TYPE(status)    ((DAT_UINT32)(status) & DAT_TYPE_MASK)
#define DAT_GET_SUBTYPE(status) ((DAT_UINT32)(status) & DAT_SUBTYPE_MASK)

/* Type field values (already shifted into bits 29..16). */
typedef enum dat_return_type {
    DAT_SUCCESS                     = 0x00000000,
    DAT_ABORT                       = 0x00010000,
    DAT_CONN_QUAL_IN_USE            = 0x00020000,
    DAT_INSUFFICIENT_RESOURCES      = 0x00030000,
    DAT_INTERNAL_ERROR              = 0x00040000,
    DAT_INVALID_HANDLE              = 0x00050000,
    DAT_INVALID_PARAMETER           = 0x00060000,
    DAT_INVALID_STATE               = 0x00070000,
    DAT_LENGTH_ERROR                = 0x00080000,
    DAT_MODEL_NOT_SUPPORTED         = 0x00090000,
    DAT_PROVIDER_NOT_FOUND          = 0x000a0000,
    DAT_PRIVILEGES_VIOLATION        = 0x000b0000,
    DAT_PROTECTION_VIOLATION        = 0x000c0000,
    DAT_QUEUE_EMPTY                 = 0x000d0000,
    DAT_QUEUE_FULL                  = 0x000e0000,
    DAT_TIMEOUT_EXPIRED             = 0x000f0000,
    DAT_PROVIDER_ALREADY_REGISTERED = 0x00100000,
    DAT_PROVIDER_IN_USE             = 0x00110000,
    DAT_INVALID_ADDRESS             = 0x00120000,
    DAT_INTERRUPTED_CALL            = 0x00130000,
    DAT_CONN_QUAL_UNAVAILABLE       = 0x00140000,
    DAT_RESERVED_LMR                = 0x00150000, /* kernel DAT only */
    DAT_PORT_IN_USE                 = 0x00160000,
    DAT_COMM_NOT_SUPPORTED          = 0x00170000,
#ifdef DAT_EXTENSIONS
    /* Types from here up to DAT_NOT_IMPLEMENTED belong to extensions. */
    DAT_EXTENSION_BASE              = 0x10000000,
#endif
    DAT_NOT_IMPLEMENTED             = 0x3fff0000
} DAT_RETURN_TYPE;

typedef DAT_UINT32 DAT_RETURN;

/* Older spelling. */
#define DAT_NAME_NOT_FOUND DAT_PROVIDER_NOT_FOUND

/* Subtype field values, grouped by the type they usually go with. */
typedef enum dat_return_subtype {
    DAT_NO_SUBTYPE                          = 0,
    DAT_SUB_INTERRUPTED                     = 1,

    /* DAT_INSUFFICIENT_RESOURCES */
    DAT_RESOURCE_MEMORY                     = 2,
    DAT_RESOURCE_DEVICE                     = 3,
    DAT_RESOURCE_TEP                        = 4,
    DAT_RESOURCE_TEVD                       = 5,
    DAT_RESOURCE_PROTECTION_DOMAIN          = 6,
    DAT_RESOURCE_MEMORY_REGION              = 7,
    DAT_RESOURCE_ERROR_HANDLER              = 8,
    DAT_RESOURCE_CREDITS                    = 9,
    DAT_RESOURCE_SRQ                        = 10,

    /* DAT_INVALID_HANDLE: which kind of handle, or which argument */
    DAT_INVALID_HANDLE_IA                   = 11,
    DAT_INVALID_HANDLE_EP                   = 12,
    DAT_INVALID_HANDLE_LMR                  = 13,
    DAT_INVALID_HANDLE_RMR                  = 14,
    DAT_INVALID_HANDLE_PZ                   = 15,
    DAT_INVALID_HANDLE_PSP                  = 16,
    DAT_INVALID_HANDLE_RSP                  = 17,
    DAT_INVALID_HANDLE_CR                   = 18,
    DAT_INVALID_HANDLE_CNO                  = 19,
    DAT_INVALID_HANDLE_EVD_CR               = 20,
    DAT_INVALID_HANDLE_EVD_REQUEST          = 21,
    DAT_INVALID_HANDLE_EVD_RECV             = 22,
    DAT_INVALID_HANDLE_EVD_CONN             = 23,
    DAT_INVALID_HANDLE_EVD_ASYNC            = 24,
    DAT_INVALID_HANDLE_SRQ                  = 25,
    DAT_INVALID_HANDLE_CSP                  = 26,
    DAT_INVALID_HANDLE1                     = 27,
    DAT_INVALID_HANDLE2                     = 28,
    DAT_INVALID_HANDLE3                     = 29,
    DAT_INVALID_HANDLE4                     = 30,
    DAT_INVALID_HANDLE5                     = 31,
    DAT_INVALID_HANDLE6                     = 32,
    DAT_INVALID_HANDLE7                     = 33,
    DAT_INVALID_HANDLE8                     = 34,
    DAT_INVALID_HANDLE9                     = 35,
    DAT_INVALID_HANDLE10                    = 36,

    /* DAT_INVALID_PARAMETER: which argument */
    DAT_INVALID_ARG1                        = 37,
    DAT_INVALID_ARG2                        = 38,
    DAT_INVALID_ARG3                        = 39,
    DAT_INVALID_ARG4                        = 40,
    DAT_INVALID_ARG5                        = 41,
    DAT_INVALID_ARG6                        = 42,
    DAT_INVALID_ARG7                        = 43,
    DAT_INVALID_ARG8                        = 44,
    DAT_INVALID_ARG9                        = 45,
    DAT_INVALID_ARG10                       = 46,

    /* DAT_INVALID_STATE: endpoint states */
    DAT_INVALID_STATE_EP_UNCONNECTED        = 47,
    DAT_INVALID_STATE_EP_ACTCONNPENDING     = 48,
    DAT_INVALID_STATE_EP_PASSCONNPENDING    = 49,
    DAT_INVALID_STATE_EP_TENTCONNPENDING    = 50,
    DAT_INVALID_STATE_EP_CONNECTED          = 51,
    DAT_INVALID_STATE_EP_DISCONNECTED       = 52,
    DAT_INVALID_STATE_EP_RESERVED           = 53,
    DAT_INVALID_STATE_EP_COMPLPENDING       = 54,
    DAT_INVALID_STATE_EP_DISCPENDING        = 55,
    DAT_INVALID_STATE_EP_PROVIDERCONTROL    = 56,
    DAT_INVALID_STATE_EP_NOTREADY           = 57,
    DAT_INVALID_STATE_EP_RECV_WATERMARK     = 58,
    DAT_INVALID_STATE_EP_PZ                 = 59,
    DAT_INVALID_STATE_EP_EVD_REQUEST        = 60,
    DAT_INVALID_STATE_EP_EVD_RECV           = 61,
    DAT_INVALID_STATE_EP_EVD_CONNECT        = 62,
    DAT_INVALID_STATE_EP_UNCONFIGURED       = 63,
    DAT_INVALID_STATE_EP_UNCONFRESERVED     = 64,
    DAT_INVALID_STATE_EP_UNCONFPASSIVE      = 65,
    DAT_INVALID_STATE_EP_UNCONFTENTATIVE    = 66,

    /* DAT_INVALID_STATE: CNO, EVD, IA, LMR, PZ and SRQ states */
    DAT_INVALID_STATE_CNO_IN_USE            = 67,
    DAT_INVALID_STATE_CNO_DEAD              = 68,
    DAT_INVALID_STATE_EVD_OPEN              = 69,
    DAT_INVALID_STATE_EVD_ENABLED           = 70,
    DAT_INVALID_STATE_EVD_DISABLED          = 71,
    DAT_INVALID_STATE_EVD_WAITABLE          = 72,
    DAT_INVALID_STATE_EVD_UNWAITABLE        = 73,
    DAT_INVALID_STATE_EVD_IN_USE            = 74,
    DAT_INVALID_STATE_EVD_CONFIG_NOTIFY     = 75,
    DAT_INVALID_STATE_EVD_CONFIG_SOLICITED  = 76,
    DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD  = 77,
    DAT_INVALID_STATE_EVD_WAITER            = 78,
    DAT_INVALID_STATE_EVD_ASYNC             = 79,
    DAT_INVALID_STATE_IA_IN_USE             = 80,
    DAT_INVALID_STATE_LMR_IN_USE            = 81,
    DAT_INVALID_STATE_LMR_FREE              = 82,
    DAT_INVALID_STATE_PZ_IN_USE             = 83,
    DAT_INVALID_STATE_PZ_FREE               = 84,
    DAT_INVALID_STATE_SRQ_OPERATIONAL       = 85,
    DAT_INVALID_STATE_SRQ_ERROR             = 86,
    DAT_INVALID_STATE_SRQ_IN_USE            = 87,
    DAT_INVALID_STATE_SRQ_SHUTDOWN          = 88,

    /* DAT_PRIVILEGES_VIOLATION */
    DAT_PRIVILEGES_READ                     = 89,
    DAT_PRIVILEGES_WRITE                    = 90,
    DAT_PRIVILEGES_RDMA_READ                = 91,
    DAT_PRIVILEGES_RDMA_WRITE               = 92,

    /* DAT_PROTECTION_VIOLATION */
    DAT_PROTECTION_READ                     = 93,
    DAT_PROTECTION_WRITE                    = 94,
    DAT_PROTECTION_RDMA_READ                = 95,
    DAT_PROTECTION_RDMA_WRITE               = 96,

    /* DAT_INVALID_ADDRESS */
    DAT_INVALID_ADDRESS_UNSUPPORTED         = 97,
    DAT_INVALID_ADDRESS_UNREACHABLE         = 98,
    DAT_INVALID_ADDRESS_MALFORMED           = 99,

    /* DAT_PROVIDER_NOT_FOUND */
    DAT_NAME_NOT_REGISTERED                 = 100,
    DAT_MAJOR_NOT_FOUND                     = 101,
    DAT_MINOR_NOT_FOUND                     = 102,
    DAT_THREAD_SAFETY_NOT_FOUND             = 103
} DAT_RETURN_SUBTYPE;

#endif /* _DAT_ERROR_H_ */
