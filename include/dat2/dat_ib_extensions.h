/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Part of dat2: the InfiniBand extension interface (atomics, RDMA write
 * with immediate data, unreliable datagrams, counters, fast provider
 * query, collectives). The dat_ib_xxx() calls are macros over
 * dat_extension_op(); extended completions arrive as DAT_IB_DTO_EVENT and
 * the other DAT_IB_EVENT_NUMBER events, with a DAT_IB_EXTENSION_EVENT_DATA
 * stored in DAT_EVENT.event_extension_data.
 */
#ifndef _DAT_IB_EXTENSIONS_H_
#define _DAT_IB_EXTENSIONS_H_

#include <netinet/in.h> /* struct sockaddr_in6, for DAT_IB_ADDR_HANDLE */
#include <dat2/udat.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Interface revision (2.0.9): 201 atomics and immediate data, 202 UD,
 * 203 counters, 204-205 UD reject/error events, 206 collectives,
 * 207 more IA counters, 208 open/close query, 209 UD CM and AH free. */
#define DAT_IB_EXTENSION_VERSION 209

/* Names of provider-specific attributes advertising the extensions. */
#define DAT_IB_ATTR_COUNTERS      "DAT_COUNTERS"
#define DAT_IB_ATTR_FETCH_AND_ADD "DAT_IB_FETCH_AND_ADD"
#define DAT_IB_ATTR_CMP_AND_SWAP  "DAT_IB_CMP_AND_SWAP"
#define DAT_IB_ATTR_IMMED_DATA    "DAT_IB_IMMED_DATA"
#define DAT_IB_ATTR_UD            "DAT_IB_UD"

#define DAT_IB_COLL_SET_CLOCK      "DAT_COLL_SET_CLOCK"
#define DAT_IB_COLL_READ_CLOCK     "DAT_COLL_READ_CLOCK"
#define DAT_IB_COLL_BROADCAST      "DAT_COLL_BROADCAST"
#define DAT_IB_COLL_BARRIER        "DAT_COLL_BARRIER"
#define DAT_IB_COLL_SCATTER        "DAT_COLL_SCATTER"
#define DAT_IB_COLL_SCATTERV       "DAT_COLL_SCATTERV"
#define DAT_IB_COLL_GATHER         "DAT_COLL_GATHER"
#define DAT_IB_COLL_GATHERV        "DAT_COLL_GATHERV"
#define DAT_IB_COLL_ALLGATHER      "DAT_COLL_ALLGATHER"
#define DAT_IB_COLL_ALLGATHERV     "DAT_COLL_ALLGATHERV"
#define DAT_IB_COLL_ALLTOALL       "DAT_COLL_ALLTOALL"
#define DAT_IB_COLL_ALLTOALLV      "DAT_COLL_ALLTOALLV"
#define DAT_IB_COLL_REDUCE         "DAT_COLL_REDUCE"
#define DAT_IB_COLL_ALLREDUCE      "DAT_COLL_ALLREDUCE"
#define DAT_IB_COLL_REDUCE_SCATTER "DAT_COLL_REDUCE_SCATTER"
#define DAT_IB_COLL_SCAN           "DAT_COLL_SCAN"

typedef DAT_HANDLE DAT_IB_COLLECTIVE_HANDLE;

/* Event numbers of the IB extension range. */
typedef enum dat_ib_event_number {
    DAT_IB_DTO_EVENT = DAT_IB_EXTENSION_RANGE_BASE,    /* 0x40000 */
    DAT_IB_UD_CONNECTION_REQUEST_EVENT = DAT_IB_EXTENSION_RANGE_BASE + 1,
    DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED = DAT_IB_EXTENSION_RANGE_BASE + 2,
    DAT_IB_UD_CONNECTION_REJECT_EVENT = DAT_IB_EXTENSION_RANGE_BASE + 3,
    DAT_IB_UD_CONNECTION_ERROR_EVENT = DAT_IB_EXTENSION_RANGE_BASE + 4,
    DAT_IB_COLLECTIVE_EVENT = DAT_IB_EXTENSION_RANGE_BASE + 5
} DAT_IB_EVENT_NUMBER;

/* Operation codes passed to dat_extension_op(). */
typedef enum dat_ib_op {
    DAT_IB_FETCH_AND_ADD_OP = 0,
    DAT_IB_CMP_AND_SWAP_OP = 1,
    DAT_IB_RDMA_WRITE_IMMED_OP = 2,
    DAT_IB_UD_SEND_OP = 3,
    DAT_IB_QUERY_COUNTERS_OP = 4,
    DAT_IB_PRINT_COUNTERS_OP = 5,
    DAT_IB_COLLECTIVE_CREATE_MEMBER_OP = 6,
    DAT_IB_COLLECTIVE_FREE_MEMBER_OP = 7,
    DAT_IB_COLLECTIVE_CREATE_GROUP_OP = 8,
    DAT_IB_COLLECTIVE_FREE_GROUP_OP = 9,
    DAT_IB_COLLECTIVE_SET_CLOCK_OP = 10,
    DAT_IB_COLLECTIVE_READ_CLOCK_OP = 11,
    DAT_IB_COLLECTIVE_SCATTER_OP = 12,
    DAT_IB_COLLECTIVE_SCATTERV_OP = 13,
    DAT_IB_COLLECTIVE_GATHER_OP = 14,
    DAT_IB_COLLECTIVE_GATHERV_OP = 15,
    DAT_IB_COLLECTIVE_ALLGATHER_OP = 16,
    DAT_IB_COLLECTIVE_ALLGATHERV_OP = 17,
    DAT_IB_COLLECTIVE_ALLTOALL_OP = 18,
    DAT_IB_COLLECTIVE_ALLTOALLV_OP = 19,
    DAT_IB_COLLECTIVE_REDUCE_OP = 20,
    DAT_IB_COLLECTIVE_ALLREDUCE_OP = 21,
    DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP = 22,
    DAT_IB_COLLECTIVE_SCAN_OP = 23,
    DAT_IB_COLLECTIVE_BROADCAST_OP = 24,
    DAT_IB_COLLECTIVE_BARRIER_OP = 25,
    DAT_IB_START_COUNTERS_OP = 26,
    DAT_IB_STOP_COUNTERS_OP = 27,
    DAT_IB_UD_CM_FREE_OP = 28,
    DAT_IB_UD_AH_FREE_OP = 29,
    /* These two name a provider instead of an object handle, so the
     * registry has to take part; hence the OPEN/CLOSE base values. */
    DAT_IB_OPEN_QUERY_OP = DAT_OPEN_EXTENSION_BASE,
    DAT_IB_CLOSE_QUERY_OP = DAT_CLOSE_EXTENSION_BASE
} DAT_IB_OP;

/* DAT_IB_EXTENSION_EVENT_DATA.type: which extended operation completed or
 * what an extended event carries. */
typedef enum dat_ib_ext_type {
    DAT_IB_FETCH_AND_ADD = 0,
    DAT_IB_CMP_AND_SWAP = 1,
    DAT_IB_RDMA_WRITE_IMMED = 2,
    DAT_IB_RDMA_WRITE_IMMED_DATA = 3,
    DAT_IB_RECV_IMMED_DATA = 4,
    DAT_IB_UD_CONNECT_REQUEST = 5,
    DAT_IB_UD_REMOTE_AH = 6,
    DAT_IB_UD_PASSIVE_REMOTE_AH = 7,
    DAT_IB_UD_SEND = 8,
    DAT_IB_UD_RECV = 9,
    DAT_IB_UD_CONNECT_REJECT = 10,
    DAT_IB_UD_CONNECT_ERROR = 11,
    DAT_IB_COLLECTIVE_CREATE_STATUS = 12,
    DAT_IB_COLLECTIVE_CREATE_DATA = 13,
    DAT_IB_COLLECTIVE_CLOCK_SET_STATUS = 14,
    DAT_IB_COLLECTIVE_SCATTER_STATUS = 15,
    DAT_IB_COLLECTIVE_SCATTERV_STATUS = 16,
    DAT_IB_COLLECTIVE_GATHER_STATUS = 17,
    DAT_IB_COLLECTIVE_GATHERV_STATUS = 18,
    DAT_IB_COLLECTIVE_ALLGATHER_STATUS = 19,
    DAT_IB_COLLECTIVE_ALLGATHERV_STATUS = 20,
    DAT_IB_COLLECTIVE_ALLTOALL_STATUS = 21,
    DAT_IB_COLLECTIVE_ALLTOALLV_STATUS = 22,
    DAT_IB_COLLECTIVE_REDUCE_STATUS = 23,
    DAT_IB_COLLECTIVE_ALLREDUCE_STATUS = 24,
    DAT_IB_COLLECTIVE_REDUCE_SCATTER_STATUS = 25,
    DAT_IB_COLLECTIVE_SCAN_STATUS = 26,
    DAT_IB_COLLECTIVE_BROADCAST_STATUS = 27,
    DAT_IB_COLLECTIVE_BARRIER_STATUS = 28
} DAT_IB_EXT_TYPE;

/* DAT_IB_EXTENSION_EVENT_DATA.status. */
typedef enum dat_ib_status {
    DAT_OP_SUCCESS = DAT_SUCCESS,
    DAT_IB_OP_ERR = 1,
    DAT_IB_COLL_COMP_ERR = 2
} DAT_IB_STATUS;

/* Extra DAT_RETURN types, from the extension type range. */
typedef enum dat_ib_return {
    DAT_IB_ERR = DAT_EXTENSION_BASE,
    DAT_IB_COLLECTIVE_ERR = DAT_EXTENSION_BASE + 1
} DAT_IB_RETURN;

/* Extra DAT_DTOS values reported in DTO completions. */
typedef enum dat_ib_dtos {
    DAT_IB_DTO_RDMA_WRITE_IMMED = DAT_DTO_EXTENSION_BASE,
    DAT_IB_DTO_RECV_IMMED = DAT_DTO_EXTENSION_BASE + 1,
    DAT_IB_DTO_FETCH_ADD = DAT_DTO_EXTENSION_BASE + 2,
    DAT_IB_DTO_CMP_SWAP = DAT_DTO_EXTENSION_BASE + 3,
    DAT_IB_DTO_RECV_MSG_IMMED = DAT_DTO_EXTENSION_BASE + 4,
    DAT_IB_DTO_SEND_UD = DAT_DTO_EXTENSION_BASE + 5,
    DAT_IB_DTO_RECV_UD = DAT_DTO_EXTENSION_BASE + 6,
    DAT_IB_DTO_RECV_UD_IMMED = DAT_DTO_EXTENSION_BASE + 7,
    DAT_IB_DTO_COLLECTIVES = DAT_DTO_EXTENSION_BASE + 8
} DAT_IB_DTOS;

/* Extra DAT_HANDLE_TYPE values. */
typedef enum dat_ib_handle_type {
    DAT_IB_HANDLE_TYPE_EXT = DAT_HANDLE_TYPE_EXTENSION_BASE,
    DAT_IB_HANDLE_TYPE_COLLECTIVE = DAT_HANDLE_TYPE_EXTENSION_BASE + 1
} DAT_IB_HANDLE_TYPE;

/* Extra DAT_EVD_FLAGS value: an EVD for extended events. */
typedef enum dat_ib_evd_extension_flags {
    DAT_IB_EVD_EXTENSION_FLAG = DAT_EVD_EXTENSION_BASE
} DAT_IB_EVD_EXTENSION_FLAGS;

/* Extra DAT_MEM_PRIV_FLAGS value: target of remote atomics. */
typedef enum dat_ib_mem_priv_flags {
    DAT_IB_MEM_PRIV_REMOTE_ATOMIC = DAT_MEM_PRIV_EXTENSION_BASE
} DAT_IB_MEM_PRIV_FLAGS;

/* Unreliable datagram destination: verbs address handle, queue pair
 * number, and the peer's address for reference. */
typedef struct dat_ib_addr_handle {
    struct ibv_ah *ah;
    DAT_UINT32 qpn;
    DAT_SOCK_ADDR6 ia_addr;
} DAT_IB_ADDR_HANDLE;

typedef struct dat_ib_immed_data {
    DAT_UINT32 data;
} DAT_IB_IMMED_DATA;

typedef struct dat_ib_collective_event_data {
    DAT_HANDLE handle;
    DAT_CONTEXT context;
} DAT_IB_COLLECTIVE_EVENT_DATA;

/*
 * Payload of an extended event, overlaid on event_extension_data (so at
 * most 64 bytes). For UD connection events remote_ah is the peer and
 * context holds the CM object to release with dat_ib_ud_cm_free().
 */
typedef struct dat_ib_extension_event_data {
    DAT_IB_EXT_TYPE type;
    DAT_IB_STATUS status;
    union {
        DAT_IB_IMMED_DATA immed;
    } val;
    union {
        DAT_IB_ADDR_HANDLE remote_ah;
        DAT_IB_COLLECTIVE_EVENT_DATA coll;
    };
    DAT_CONTEXT context;
} DAT_IB_EXTENSION_EVENT_DATA;

/* Extra DAT_SERVICE_TYPE value for endpoints. */
typedef enum dat_ib_service_type {
    DAT_IB_SERVICE_TYPE_UD = DAT_SERVICE_TYPE_EXTENSION_BASE
} DAT_IB_SERVICE_TYPE;

/* ---------------------------------------------------------------------
 * Counters (64-bit each). The *_ALL_COUNTERS value, last in each list,
 * selects the whole set.
 */

typedef enum dat_ia_counters {
    DCNT_IA_PZ_CREATE = 0,
    DCNT_IA_PZ_FREE = 1,
    DCNT_IA_LMR_CREATE = 2,
    DCNT_IA_LMR_FREE = 3,
    DCNT_IA_RMR_CREATE = 4,
    DCNT_IA_RMR_FREE = 5,
    DCNT_IA_PSP_CREATE = 6,
    DCNT_IA_PSP_CREATE_ANY = 7,
    DCNT_IA_PSP_FREE = 8,
    DCNT_IA_RSP_CREATE = 9,
    DCNT_IA_RSP_FREE = 10,
    DCNT_IA_EVD_CREATE = 11,
    DCNT_IA_EVD_FREE = 12,
    DCNT_IA_EP_CREATE = 13,
    DCNT_IA_EP_FREE = 14,
    DCNT_IA_SRQ_CREATE = 15,
    DCNT_IA_SRQ_FREE = 16,
    DCNT_IA_SP_CR = 17,
    DCNT_IA_SP_CR_ACCEPTED = 18,
    DCNT_IA_SP_CR_REJECTED = 19,
    DCNT_IA_MEM_ALLOC = 20,
    DCNT_IA_MEM_ALLOC_DATA = 21,
    DCNT_IA_MEM_FREE = 22,
    DCNT_IA_ASYNC_ERROR = 23,
    DCNT_IA_ASYNC_QP_ERROR = 24,
    DCNT_IA_ASYNC_CQ_ERROR = 25,
    /* connection manager */
    DCNT_IA_CM_LISTEN = 26,
    DCNT_IA_CM_REQ_TX = 27,
    DCNT_IA_CM_REQ_RX = 28,
    DCNT_IA_CM_REP_TX = 29,
    DCNT_IA_CM_REP_RX = 30,
    DCNT_IA_CM_RTU_TX = 31,
    DCNT_IA_CM_RTU_RX = 32,
    DCNT_IA_CM_USER_REJ_TX = 33,
    DCNT_IA_CM_USER_REJ_RX = 34,
    DCNT_IA_CM_ACTIVE_EST = 35,
    DCNT_IA_CM_PASSIVE_EST = 36,
    DCNT_IA_CM_AH_REQ_TX = 37,
    DCNT_IA_CM_AH_REQ_RX = 38,
    DCNT_IA_CM_AH_RESOLVED = 39,
    DCNT_IA_CM_DREQ_TX = 40,
    DCNT_IA_CM_DREQ_RX = 41,
    DCNT_IA_CM_DREP_TX = 42,
    DCNT_IA_CM_DREP_RX = 43,
    DCNT_IA_CM_MRA_TX = 44,
    DCNT_IA_CM_MRA_RX = 45,
    DCNT_IA_CM_REQ_FULLQ_POLL = 46,
    DCNT_IA_CM_ERR = 47,
    DCNT_IA_CM_ERR_REQ_FULLQ = 48,
    DCNT_IA_CM_ERR_REQ_DUP = 49,
    DCNT_IA_CM_ERR_REQ_RETRY = 50,
    DCNT_IA_CM_ERR_REP_DUP = 51,
    DCNT_IA_CM_ERR_REP_RETRY = 52,
    DCNT_IA_CM_ERR_RTU_DUP = 53,
    DCNT_IA_CM_ERR_RTU_RETRY = 54,
    DCNT_IA_CM_ERR_REFUSED = 55,
    DCNT_IA_CM_ERR_RESET = 56,
    DCNT_IA_CM_ERR_TIMEOUT = 57,
    DCNT_IA_CM_ERR_REJ_TX = 58,
    DCNT_IA_CM_ERR_REJ_RX = 59,
    DCNT_IA_CM_ERR_DREQ_DUP = 60,
    DCNT_IA_CM_ERR_DREQ_RETRY = 61,
    DCNT_IA_CM_ERR_DREP_DUP = 62,
    DCNT_IA_CM_ERR_DREP_RETRY = 63,
    DCNT_IA_CM_ERR_MRA_DUP = 64,
    DCNT_IA_CM_ERR_MRA_RETRY = 65,
    DCNT_IA_CM_ERR_UNEXPECTED = 66,
    /* link */
    DCNT_IA_LNK_ERR_RCV = 67,
    DCNT_IA_LNK_ERR_RCV_REM_PHYS = 68,
    DCNT_IA_LNK_ERR_RCV_CONSTRAINT = 69,
    DCNT_IA_LNK_ERR_XMT_DISCARDS = 70,
    DCNT_IA_LNK_ERR_XMT_CONTRAINT = 71,
    DCNT_IA_LNK_ERR_INTEGRITY = 72,
    DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN = 73,
    DCNT_IA_LNK_WARN_RCV_SW_RELAY = 74,
    DCNT_IA_LNK_WARN_XMT_WAIT = 75,
    /* device diagnostics */
    DCNT_IA_DIAG_ERR_RQ_RAE = 76,
    DCNT_IA_DIAG_ERR_RQ_OOS = 77,
    DCNT_IA_DIAG_ERR_RQ_RIRE = 78,
    DCNT_IA_DIAG_ERR_RQ_UDSDPRD = 79,
    DCNT_IA_DIAG_ERR_SQ_RAE = 80,
    DCNT_IA_DIAG_ERR_SQ_OOS = 81,
    DCNT_IA_DIAG_ERR_SQ_RIRE = 82,
    DCNT_IA_DIAG_ERR_SQ_RREE = 83,
    DCNT_IA_DIAG_ERR_SQ_TREE = 84,
    DCNT_IA_ALL_COUNTERS = 85
} DAT_IA_COUNTERS;

typedef enum dat_ep_counters {
    DCNT_EP_CONNECT = 0,
    DCNT_EP_DISCONNECT = 1,
    DCNT_EP_POST_SEND = 2,
    DCNT_EP_POST_SEND_DATA = 3,
    DCNT_EP_POST_SEND_UD = 4,
    DCNT_EP_POST_SEND_UD_DATA = 5,
    DCNT_EP_POST_RECV = 6,
    DCNT_EP_POST_RECV_DATA = 7,
    DCNT_EP_POST_WRITE = 8,
    DCNT_EP_POST_WRITE_DATA = 9,
    DCNT_EP_POST_WRITE_IMM = 10,
    DCNT_EP_POST_WRITE_IMM_DATA = 11,
    DCNT_EP_POST_READ = 12,
    DCNT_EP_POST_READ_DATA = 13,
    DCNT_EP_POST_CMP_SWAP = 14,
    DCNT_EP_POST_FETCH_ADD = 15,
    DCNT_EP_RECV = 16,
    DCNT_EP_RECV_DATA = 17,
    DCNT_EP_RECV_UD = 18,
    DCNT_EP_RECV_UD_DATA = 19,
    DCNT_EP_RECV_IMM = 20,
    DCNT_EP_RECV_IMM_DATA = 21,
    DCNT_EP_RECV_RDMA_IMM = 22,
    DCNT_EP_RECV_RDMA_IMM_DATA = 23,
    DCNT_EP_ALL_COUNTERS = 24
} DAT_EP_COUNTERS;

typedef enum dat_evd_counters {
    DCNT_EVD_WAIT = 0,
    DCNT_EVD_WAIT_BLOCKED = 1,
    DCNT_EVD_WAIT_NOTIFY = 2,
    DCNT_EVD_DEQUEUE = 3,
    DCNT_EVD_DEQUEUE_FOUND = 4,
    DCNT_EVD_DEQUEUE_NOT_FOUND = 5,
    DCNT_EVD_DEQUEUE_POLL = 6,
    DCNT_EVD_DEQUEUE_POLL_FOUND = 7,
    DCNT_EVD_CONN_CALLBACK = 8,
    DCNT_EVD_DTO_CALLBACK = 9,
    DCNT_EVD_ALL_COUNTERS = 10
} DAT_EVD_COUNTERS;

/* Counter groups sampled by dat_ib_start_counter()/dat_ib_stop_counter(). */
typedef enum dat_ia_counter_type {
    DCNT_IA_CM = 0,
    DCNT_IA_LNK = 1,
    DCNT_IA_DIAG = 2
} DAT_IA_COUNTER_TYPE;

/* ---------------------------------------------------------------------
 * Collectives
 */

/* Element type of reduction buffers. */
typedef enum dat_ib_collective_data_type {
    DAT_IB_COLLECTIVE_TYPE_INT8 = 0,
    DAT_IB_COLLECTIVE_TYPE_UINT8 = 1,
    DAT_IB_COLLECTIVE_TYPE_INT16 = 2,
    DAT_IB_COLLECTIVE_TYPE_UINT16 = 3,
    DAT_IB_COLLECTIVE_TYPE_INT32 = 4,
    DAT_IB_COLLECTIVE_TYPE_UINT32 = 5,
    DAT_IB_COLLECTIVE_TYPE_INT64 = 6,
    DAT_IB_COLLECTIVE_TYPE_UINT64 = 7,
    DAT_IB_COLLECTIVE_TYPE_FLOAT = 8,
    DAT_IB_COLLECTIVE_TYPE_DOUBLE = 9,
    DAT_IB_COLLECTIVE_TYPE_LONG_DOUBLE = 10,
    DAT_IB_COLLECTIVE_TYPE_SHORT_INT = 11,
    DAT_IB_COLLECTIVE_TYPE_2INT = 12,
    DAT_IB_COLLECTIVE_TYPE_FLOAT_INT = 13,
    DAT_IB_COLLECTIVE_TYPE_LONG_INT = 14,
    DAT_IB_COLLECTIVE_TYPE_DOUBLE_INT = 15
} DAT_IB_COLLECTIVE_DATA_TYPE;

/* Reduction operator. */
typedef enum dat_ib_collective_reduce_data_op {
    DAT_IB_COLLECTIVE_REDUCE_OP_MAX = 0,
    DAT_IB_COLLECTIVE_REDUCE_OP_MIN = 1,
    DAT_IB_COLLECTIVE_REDUCE_OP_SUM = 2,
    DAT_IB_COLLECTIVE_REDUCE_OP_PROD = 3,
    DAT_IB_COLLECTIVE_REDUCE_OP_LAND = 4,
    DAT_IB_COLLECTIVE_REDUCE_OP_BAND = 5,
    DAT_IB_COLLECTIVE_REDUCE_OP_LOR = 6,
    DAT_IB_COLLECTIVE_REDUCE_OP_BOR = 7,
    DAT_IB_COLLECTIVE_REDUCE_OP_LXOR = 8,
    DAT_IB_COLLECTIVE_REDUCE_OP_BXOR = 9,
    DAT_IB_COLLECTIVE_REDUCE_OP_MAXLOC = 10,
    DAT_IB_COLLECTIVE_REDUCE_OP_MINLOC = 11
} DAT_IB_COLLECTIVE_REDUCE_DATA_OP;

typedef unsigned int DAT_IB_COLLECTIVE_RANK;
typedef unsigned int DAT_IB_COLLECTIVE_ID;
typedef void *DAT_IB_COLLECTIVE_MEMBER;

/* Process layout of a group; rank tables are indexed by global rank and
 * hold -1 for processes outside the node or not external. */
typedef struct dat_ib_collective_group {
    int local_size;        /* processes on this node */
    int local_rank;        /* this process within the node */
    int *local_ranks;      /* global rank of each local process */
    int external_size;     /* number of nodes (one external process each) */
    int external_rank;     /* this process among the external ones, or -1 */
    int *external_ranks;   /* global rank of each external process */
    int *intranode_table;  /* global rank -> local rank */
    int *internode_table;  /* global rank -> external rank */
    int is_comm_world;
} DAT_IB_COLLECTIVE_GROUP;

/* ---------------------------------------------------------------------
 * Name strings for extension status values
 */

/* Like dat_strerror() for the major string, knowing the IB return type. */
static __inline__ DAT_RETURN DAT_API
dat_strerror_extension(DAT_IB_RETURN value, const char **message)
{
    if (DAT_GET_TYPE(value) == DAT_IB_ERR) {
        *message = "DAT_IB_ERR";
        return DAT_SUCCESS;
    }
    return dat_strerror(value, message, NULL);
}

/* For DAT_IB_EXTENSION_EVENT_DATA.status. */
static __inline__ DAT_RETURN DAT_API
dat_strerror_ext_status(DAT_IB_STATUS value, const char **message)
{
    if (value == DAT_OP_SUCCESS) {
        *message = " ";
        return DAT_SUCCESS;
    }
    if (value == DAT_IB_OP_ERR) {
        *message = "DAT_IB_OP_ERR";
        return DAT_SUCCESS;
    }
    *message = "unknown extension status";
    return DAT_INVALID_PARAMETER;
}

/* ---------------------------------------------------------------------
 * Extension calls. Each returns the DAT_RETURN of dat_extension_op().
 * Arguments are converted to the types the provider reads them as;
 * cookie arguments are passed as given.
 */

/* 64-bit atomic add at the remote address; the old remote value lands in
 * the local buffer: ep, add, local, cookie, remote, flags. */
#define dat_ib_post_fetch_and_add(ep, add, local, cookie, remote, flags) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_FETCH_AND_ADD_OP, (DAT_UINT64)(add), \
        (DAT_LMR_TRIPLET *)(local), (cookie), (DAT_RMR_TRIPLET *)(remote), \
        (DAT_COMPLETION_FLAGS)(flags))

/* 64-bit atomic compare-and-swap; the old remote value lands in the local
 * buffer: ep, compare, swap, local, cookie, remote, flags. */
#define dat_ib_post_cmp_and_swap(ep, cmp, swap, local, cookie, remote, \
                                 flags) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_CMP_AND_SWAP_OP, (DAT_UINT64)(cmp), \
        (DAT_UINT64)(swap), (DAT_LMR_TRIPLET *)(local), (cookie), \
        (DAT_RMR_TRIPLET *)(remote), (DAT_COMPLETION_FLAGS)(flags))

/* RDMA write that also consumes a receive at the peer and hands it 32 bits
 * of immediate data: ep, segment count, local, cookie, remote, immediate
 * data, flags. */
#define dat_ib_post_rdma_write_immed(ep, nseg, local, cookie, remote, \
                                     immed, flags) \
    dat_extension_op((DAT_EP_HANDLE)(ep), \
        (DAT_IB_OP)DAT_IB_RDMA_WRITE_IMMED_OP, (DAT_COUNT)(nseg), \
        (DAT_LMR_TRIPLET *)(local), (cookie), (DAT_RMR_TRIPLET *)(remote), \
        (DAT_UINT32)(immed), (DAT_COMPLETION_FLAGS)(flags))

/* Datagram send: ep, segment count, local, destination, cookie, flags. */
#define dat_ib_post_send_ud(ep, nseg, local, dest, cookie, flags) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_UD_SEND_OP, \
        (DAT_COUNT)(nseg), (DAT_LMR_TRIPLET *)(local), \
        (DAT_IB_ADDR_HANDLE *)(dest), (cookie), \
        (DAT_COMPLETION_FLAGS)(flags))

/* Datagram receives are ordinary receives. */
#define dat_ib_post_recv_ud dat_ep_post_recv

/* Release the CM object of a UD connection (from the event context)
 * once its address handle has been saved: ep, CM context. */
#define dat_ib_ud_cm_free(ep, cm) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_UD_CM_FREE_OP, \
        (DAT_CONTEXT)(cm))

/* Destroy a UD address handle after its last send: ep, address handle. */
#define dat_ib_ud_ah_free(ep, ah) \
    dat_extension_op((DAT_EP_HANDLE)(ep), (DAT_IB_OP)DAT_IB_UD_AH_FREE_OP, \
        (DAT_IB_ADDR_HANDLE *)(ah))

/* Counters of an IA, EP or EVD: handle, counter (or *_ALL_COUNTERS),
 * ->values, reset afterwards (0/1). */
#define dat_ib_query_counters(h, counter, values, reset) \
    dat_extension_op((DAT_HANDLE)(h), (DAT_IB_OP)DAT_QUERY_COUNTERS_OP, \
        (int)(counter), (DAT_UINT64 *)(values), (int)(reset))

/* Have the provider print counters: handle, counter, reset. */
#define dat_ib_print_counters(h, counter, reset) \
    dat_extension_op((DAT_HANDLE)(h), (DAT_IB_OP)DAT_PRINT_COUNTERS_OP, \
        (int)(counter), (int)(reset))

/* Start or stop sampling a DAT_IA_COUNTER_TYPE group: IA, group. */
#define dat_ib_start_counter(h, group) \
    dat_extension_op((DAT_HANDLE)(h), (DAT_IB_OP)DAT_IB_START_COUNTERS_OP, \
        (DAT_IA_COUNTER_TYPE)(group))

#define dat_ib_stop_counter(h, group) \
    dat_extension_op((DAT_HANDLE)(h), (DAT_IB_OP)DAT_IB_STOP_COUNTERS_OP, \
        (DAT_IA_COUNTER_TYPE)(group))

/* Open a provider by IA name just to query it, without a full IA open:
 * name, ->handle, IA mask, ->IA attributes, provider mask, ->provider
 * attributes. Release the handle with dat_ib_close_query(). */
#define dat_ib_open_query(name, h, ia_mask, ia_attr, pr_mask, pr_attr) \
    dat_extension_op((DAT_HANDLE)(NULL), (DAT_IB_OP)DAT_IB_OPEN_QUERY_OP, \
        (const DAT_NAME_PTR)(name), (DAT_HANDLE *)(h), \
        (DAT_IA_ATTR_MASK)(ia_mask), (DAT_IA_ATTR *)(ia_attr), \
        (DAT_PROVIDER_ATTR_MASK)(pr_mask), (DAT_PROVIDER_ATTR *)(pr_attr))

#define dat_ib_close_query(h) \
    dat_extension_op((DAT_HANDLE)(h), (DAT_IB_OP)DAT_IB_CLOSE_QUERY_OP)

/* Collective membership: IA, progress callback, ->member address,
 * ->its size. Members are exchanged out of band and passed to
 * dat_ib_collective_create_group(). */
#define dat_ib_collective_create_member(ia, progress, member, size) \
    dat_extension_op((DAT_IA_HANDLE)(ia), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_CREATE_MEMBER_OP, (void *)(progress), \
        (DAT_IB_COLLECTIVE_MEMBER *)(member), (DAT_UINT32 *)(size))

#define dat_ib_collective_free_member(ia, member) \
    dat_extension_op((DAT_IA_HANDLE)(ia), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_FREE_MEMBER_OP, \
        (DAT_IB_COLLECTIVE_MEMBER)(member))

/* Create a group (every member calls this; completion on the EVD):
 * members in rank order, group size, own rank, group id, layout, EVD,
 * PZ, context. Note the EVD is the dispatch handle. */
#define dat_ib_collective_create_group(members, size, self, id, info, \
                                       evd, pz, ctx) \
    dat_extension_op((DAT_EVD_HANDLE)(evd), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_CREATE_GROUP_OP, \
        (DAT_IB_COLLECTIVE_MEMBER *)(members), (DAT_COUNT)(size), \
        (DAT_IB_COLLECTIVE_RANK)(self), (DAT_IB_COLLECTIVE_ID)(id), \
        (DAT_IB_COLLECTIVE_GROUP *)(info), (DAT_PZ_HANDLE)(pz), \
        (DAT_CONTEXT)(ctx))

#define dat_ib_collective_free_group(coll) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_FREE_GROUP_OP)

/* Network clock of a group: set (asynchronous) and read. */
#define dat_ib_collective_set_clock(coll, value, ctx) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_SET_CLOCK_OP, (DAT_UINT64)(value), \
        (DAT_CONTEXT)(ctx))

#define dat_ib_collective_read_clock(coll, value) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_READ_CLOCK_OP, (DAT_UINT64 *)(value))

/* Data movement. Buffers are DAT_PVOID, byte counts DAT_COUNT (arrays of
 * them for the "v" forms), root a rank; all complete on the group EVD
 * unless the flags suppress it. */
#define dat_ib_collective_scatter(coll, sbuf, slen, rbuf, rlen, root, ctx, \
                                  flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_SCATTER_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT)(rlen), \
        (DAT_IB_COLLECTIVE_RANK)(root), (DAT_CONTEXT)(ctx), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_scatterv(coll, sbuf, slens, sdispls, rbuf, rlen, \
                                   root, ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_SCATTERV_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT *)(slens), (DAT_COUNT *)(sdispls), (DAT_PVOID)(rbuf), \
        (DAT_COUNT)(rlen), (DAT_IB_COLLECTIVE_RANK)(root), \
        (DAT_CONTEXT)(ctx), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_gather(coll, sbuf, slen, rbuf, rlen, root, ctx, \
                                 flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_GATHER_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT)(rlen), \
        (DAT_IB_COLLECTIVE_RANK)(root), (DAT_CONTEXT)(ctx), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_gatherv(coll, sbuf, slen, rbufs, rlens, rdispls, \
                                  root, ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_GATHERV_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbufs), (DAT_COUNT *)(rlens), \
        (DAT_COUNT *)(rdispls), (DAT_IB_COLLECTIVE_RANK)(root), \
        (DAT_CONTEXT)(ctx), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allgather(coll, sbuf, slen, rbuf, rlen, ctx, \
                                    flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLGATHER_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT)(rlen), \
        (DAT_CONTEXT)(ctx), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allgatherv(coll, sbuf, slen, rbuf, rlens, \
                                     rdispls, ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLGATHERV_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT *)(rlens), \
        (DAT_COUNT *)(rdispls), (DAT_CONTEXT)(ctx), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_alltoall(coll, sbuf, slen, rbuf, rlen, ctx, \
                                   flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLTOALL_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT)(rlen), \
        (DAT_CONTEXT)(ctx), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_alltoallv(coll, sbuf, slens, sdispls, rbuf, \
                                    rlens, rdispls, ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLTOALLV_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT *)(slens), (DAT_COUNT *)(sdispls), (DAT_PVOID)(rbuf), \
        (DAT_COUNT *)(rlens), (DAT_COUNT *)(rdispls), (DAT_CONTEXT)(ctx), \
        (DAT_COMPLETION_FLAGS)(flags))

/* Reductions: op is a DAT_IB_COLLECTIVE_REDUCE_DATA_OP, type a
 * DAT_IB_COLLECTIVE_DATA_TYPE. */
#define dat_ib_collective_reduce(coll, sbuf, slen, rbuf, rlen, op, type, \
                                 root, ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_REDUCE_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT)(rlen), \
        (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), \
        (DAT_IB_COLLECTIVE_DATA_TYPE)(type), (DAT_IB_COLLECTIVE_RANK)(root), \
        (DAT_CONTEXT)(ctx), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_allreduce(coll, sbuf, slen, rbuf, rlen, op, type, \
                                    ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_ALLREDUCE_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT)(rlen), \
        (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), \
        (DAT_IB_COLLECTIVE_DATA_TYPE)(type), (DAT_CONTEXT)(ctx), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_reduce_scatter(coll, sbuf, slen, rbuf, rlens, op, \
                                         type, ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT *)(rlens), \
        (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), \
        (DAT_IB_COLLECTIVE_DATA_TYPE)(type), (DAT_CONTEXT)(ctx), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_scan(coll, sbuf, slen, rbuf, rlen, op, type, ctx, \
                               flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_SCAN_OP, (DAT_PVOID)(sbuf), \
        (DAT_COUNT)(slen), (DAT_PVOID)(rbuf), (DAT_COUNT)(rlen), \
        (DAT_IB_COLLECTIVE_REDUCE_DATA_OP)(op), \
        (DAT_IB_COLLECTIVE_DATA_TYPE)(type), (DAT_CONTEXT)(ctx), \
        (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_broadcast(coll, buf, len, root, ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_BROADCAST_OP, (DAT_PVOID)(buf), \
        (DAT_COUNT)(len), (DAT_IB_COLLECTIVE_RANK)(root), \
        (DAT_CONTEXT)(ctx), (DAT_COMPLETION_FLAGS)(flags))

#define dat_ib_collective_barrier(coll, ctx, flags) \
    dat_extension_op((DAT_IB_COLLECTIVE_HANDLE)(coll), \
        (DAT_IB_OP)DAT_IB_COLLECTIVE_BARRIER_OP, (DAT_CONTEXT)(ctx), \
        (DAT_COMPLETION_FLAGS)(flags))

/* Earlier names. */
#define DAT_ATTR_COUNTERS DAT_IB_ATTR_COUNTERS
#define DAT_QUERY_COUNTERS_OP DAT_IB_QUERY_COUNTERS_OP
#define DAT_PRINT_COUNTERS_OP DAT_IB_PRINT_COUNTERS_OP
#define dat_query_counters dat_ib_query_counters
#define dat_print_counters dat_ib_print_counters

#ifdef __cplusplus
}
#endif

#endif /* _DAT_IB_EXTENSIONS_H_ */
