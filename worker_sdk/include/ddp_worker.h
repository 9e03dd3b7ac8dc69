/* ddp_worker.h: the worker SDK's C API, for C programs and other languages' FFIs.
 *
 *   ddp_worker* w;
 *   if (ddp_worker_init(&w) != 0) { fprintf(stderr, "%s\n", ddp_worker_last_error()); return 1; }
 *   printf("rank %d of %d\n", ddp_worker_rank(w), ddp_worker_world_size(w));
 *   ddp_worker_barrier(w, "start", 60.0);
 *   ddp_worker_finalize(w);
 *
 * Functions returning int return 0 on success and -1 on failure (the accessors: -1 for a
 * NULL worker); ddp_worker_last_error() then says why (per thread, valid until this
 * thread's next call). No C++ exception crosses this API. Timeouts are in seconds; <= 0
 * means none. */
#ifndef DDP_WORKER_H_
#define DDP_WORKER_H_

#include <stddef.h>

#include "ddp/worker/config.h"

#if DDP_WORKER_HAS_NCCL
#include <nccl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddp_worker ddp_worker;

/* Reads the worker environment (RANK, WORLD_SIZE, ...) and connects to the store. On
 * failure *out is NULL. */
int ddp_worker_init(ddp_worker** out);

int ddp_worker_rank(const ddp_worker* w);
int ddp_worker_world_size(const ddp_worker* w);
int ddp_worker_local_rank(const ddp_worker* w);
int ddp_worker_local_world_size(const ddp_worker* w);

/* Tells the agent this worker is alive (ddprun --worker-heartbeat-timeout); a no-op when not
 * asked for. */
int ddp_worker_heartbeat(ddp_worker* w);

/* Returns once every rank has called it with the same name, or fails after timeout_seconds
 * naming the ranks that never arrived. */
int ddp_worker_barrier(ddp_worker* w, const char* name, double timeout_seconds);

#if DDP_WORKER_HAS_NCCL
/* A communicator over all ranks named `name` (NULL: "world"), on the device LOCAL_RANK.
 * The worker owns it: ddp_worker_finalize destroys it. It is non-blocking: after an NCCL
 * call that returns ncclInProgress, poll ncclCommGetAsyncError until it no longer says
 * ncclInProgress before the next call. The SDK's watchdog aborts it on an NCCL error or
 * SIGTERM; after that the handle must not be used. */
int ddp_worker_nccl_comm(ddp_worker* w, const char* name, double timeout_seconds, ncclComm_t* out);
#endif

/* Destroys communicators, disconnects, frees `w`. NULL is allowed. */
void ddp_worker_finalize(ddp_worker* w);

/* Why the last failed call on this thread failed ("" if none did). */
const char* ddp_worker_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DDP_WORKER_H_ */
