// SPDX-License-Identifier: Apache-2.0
/* libinc's C API (libinc.so.0): collectives of an incin worker, for
 * programs and bindings that do not use C++ (the C++ API is
 * userspace/client/communicator.h; this API sits on it). docs/operations.md
 * "libinc's C API" shows a whole program.
 *
 *   inc_comm_config c;
 *   inc_comm_config_init(&c);
 *   c.am_address = "10.0.0.254:50051"; c.job_id = "job1";
 *   c.rank = r; c.world_size = n; c.iface = "eth0";
 *   inc_comm *comm;
 *   if (inc_comm_create(&c, &comm) != INC_OK) { puts(inc_last_error()); ... }
 *   inc_allreduce(comm, in, out, count, INC_FLOAT32, INC_SUM);
 *   inc_comm_destroy(comm);
 *
 * Collectives block, and every rank must call the same collectives in the
 * same order. One thread at a time per communicator. Exact for integers;
 * float sums are bit-for-bit identical on every rank and run to run.
 *
 * Stability: within soname libinc.so.0 functions and enum values are only
 * added, never changed or removed; inc_comm_config only grows at its end
 * (struct_size, set by inc_comm_config_init, says which fields a caller
 * knows).
 */
#ifndef INC_INC_H
#define INC_INC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INC_API_VERSION 1

typedef struct inc_comm inc_comm;

/* gRPC's canonical status codes, as incin uses them everywhere. */
typedef enum inc_status {
  INC_OK = 0,
  INC_CANCELLED = 1,
  INC_UNKNOWN = 2,
  INC_INVALID_ARGUMENT = 3,
  INC_DEADLINE_EXCEEDED = 4,
  INC_NOT_FOUND = 5,
  INC_ALREADY_EXISTS = 6,
  INC_PERMISSION_DENIED = 7,
  INC_RESOURCE_EXHAUSTED = 8,
  INC_FAILED_PRECONDITION = 9,
  INC_ABORTED = 10,
  INC_OUT_OF_RANGE = 11,
  INC_UNIMPLEMENTED = 12,
  INC_INTERNAL = 13,
  INC_UNAVAILABLE = 14,
  INC_DATA_LOSS = 15,
  INC_UNAUTHENTICATED = 16,
} inc_status;

typedef enum inc_datatype {
  INC_INT32 = 1,
  INC_FLOAT32 = 2,
  INC_INT64 = 3,
  INC_FLOAT16 = 4,
  INC_BFLOAT16 = 5,
  INC_FLOAT64 = 6,
} inc_datatype;

typedef enum inc_op {
  INC_SUM = 1,
  INC_MIN = 2,
  INC_MAX = 3,
  INC_BAND = 4, /* bitwise AND, OR, exclusive OR: INC_INT32 and INC_INT64 only */
  INC_BOR = 5,
  INC_BXOR = 6,
} inc_op;

typedef struct inc_comm_config {
  size_t struct_size;         /* sizeof(inc_comm_config), set by inc_comm_config_init */
  const char* am_address;     /* host:port of incamd */
  const char* job_id;         /* the same on every rank of the job */
  const char* job_credential; /* from the launcher; NULL: INCIN_JOB_CREDENTIAL, if set */
  uint32_t rank;
  uint32_t world_size;
  const char* iface;        /* the worker's interface toward its switch */
  const char* transport;    /* "auto" (NULL), "xdp", "afxdp" or "verbs" */
  uint32_t join_timeout_ms; /* 0: 120000 */
  uint32_t max_retries;     /* also fail after this many timeouts of one message; 0: no such limit */
  /* How long one collective waits without progress for the slowest rank
   * (e.g. a framework's process-group timeout); 0: 300000. When it expires
   * the call fails with INC_DEADLINE_EXCEEDED, the AM fails the group's tree
   * and every other rank's collectives fail too (INC_ABORTED) instead of
   * going on alone. */
  uint32_t op_timeout_ms;
} inc_comm_config;

/* Every field to its default (NULL or 0) and struct_size to this header's. */
void inc_comm_config_init(inc_comm_config* config);

/* Joins the job's group at the AM (blocking until every rank joined and the
 * tree is programmed). mTLS to the AM comes from INCIN_TLS_CERT, INCIN_TLS_KEY
 * and INCIN_TLS_CA, or plaintext with INCIN_INSECURE=1. On success *comm is a
 * communicator to pass to inc_comm_destroy; on failure *comm is NULL and
 * inc_last_error() says why. */
inc_status inc_comm_create(const inc_comm_config* config, inc_comm** comm);
/* Leaves the group (the tree is dismantled when every rank left). NULL is
 * allowed. */
void inc_comm_destroy(inc_comm* comm);
uint32_t inc_comm_rank(const inc_comm* comm);
uint32_t inc_comm_size(const inc_comm* comm);
/* The communicator's counters and tree as one JSON object (the "libinc"
 * object of the MPI front end's summary: messages, retransmissions,
 * gathered_blocks, uncertified_blocks, srtt_us, ...; docs/operations.md
 * "Numbers"). Valid until the thread's next libinc call; "{}" for NULL. */
const char* inc_comm_status_json(const inc_comm* comm);

/* count elements of dtype per rank; send and recv may be the same buffer. */
inc_status inc_allreduce(inc_comm* comm, const void* send, void* recv, size_t count, inc_datatype dtype,
                         inc_op op);
/* recv is written on root only (may be NULL elsewhere). */
inc_status inc_reduce(inc_comm* comm, const void* send, void* recv, size_t count, inc_datatype dtype,
                      inc_op op, uint32_t root);
inc_status inc_broadcast(inc_comm* comm, void* buf, size_t count, inc_datatype dtype, uint32_t root);
inc_status inc_barrier(inc_comm* comm);
/* recv holds world_size x count elements, rank r's at r x count. */
inc_status inc_allgather(inc_comm* comm, const void* send, void* recv, size_t count, inc_datatype dtype);
/* send holds world_size x count elements; recv gets count, this rank's block. */
inc_status inc_reduce_scatter(inc_comm* comm, const void* send, void* recv, size_t count, inc_datatype dtype,
                              inc_op op);

/* Settings: the INCIN_* environment variables every incin front end reads
 * (docs/operations.md "Settings"), also under their previous names (INC_*,
 * INCMPI_*), which log one deprecation warning per name and process; when
 * both are set, the INCIN_ name wins. `name` is the INCIN_ name. Unset
 * settings give the table's default ("" or 0 when it has none). A bad value
 * or an unknown name: INC_INVALID_ARGUMENT, inc_last_error() says why.
 * inc_setting_string: *value is valid until the thread's next libinc call. */
inc_status inc_setting_string(const char* name, const char** value);
inc_status inc_setting_uint(const char* name, uint64_t* value);
inc_status inc_setting_bool(const char* name, int* value);
/* 1 when INCIN_REQUIRE_OFFLOAD asks that a collective that would fall back
 * (no group, a type, op or size the switch does not take, a failed tree)
 * fail with the reason instead; a value that does not parse counts as 1. */
int inc_require_offload(void);
/* The job a job credential (what a launcher puts in INCIN_JOB_CREDENTIAL)
 * names, so that a front end without a job id joins as the launcher's job.
 * Text that is no credential: INC_INVALID_ARGUMENT. *job is valid until the
 * thread's next libinc call. */
inc_status inc_credential_job(const char* credential, const char** job);

/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN" for a value not listed above. */
const char* inc_status_name(inc_status status);
/* Why this thread's last failed call failed ("" if none failed yet). Valid
 * until the thread's next libinc call. */
const char* inc_last_error(void);
/* The library's version, e.g. "0.1.0". */
const char* inc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* INC_INC_H */
