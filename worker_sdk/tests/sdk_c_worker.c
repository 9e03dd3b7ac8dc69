/* The C API from C: init, accessors, a barrier, finalize. Prints one line per rank. */
#include <stdio.h>

#include "ddp_worker.h"

int main(void) {
  ddp_worker* w = NULL;
  if (ddp_worker_init(&w) != 0) {
    fprintf(stderr, "sdk_c_worker: %s\n", ddp_worker_last_error());
    return 1;
  }
  if (ddp_worker_barrier(w, "c-start", 60.0) != 0) {
    fprintf(stderr, "sdk_c_worker: %s\n", ddp_worker_last_error());
    ddp_worker_finalize(w);
    return 1;
  }
  printf("c worker: rank %d of %d (local %d of %d)\n", ddp_worker_rank(w), ddp_worker_world_size(w),
         ddp_worker_local_rank(w), ddp_worker_local_world_size(w));
  ddp_worker_finalize(w);
  return 0;
}
