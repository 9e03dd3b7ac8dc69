// Joins the job, agrees on a value with every rank, prints it.
#include <iostream>

#include "ddp/worker/context.h"

int main() {
  absl::StatusOr<ddp::worker::Context> ctx = ddp::worker::Context::FromEnv();
  if (!ctx.ok()) {
    std::cerr << "consumer: " << ctx.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> word = ctx->Broadcast("word", 0, "agreed");
  if (!word.ok()) {
    std::cerr << "consumer: " << word.status().message() << "\n";
    return 1;
  }
  std::cout << "consumer rank " << ctx->rank() << " of " << ctx->world_size() << ": " << *word
            << " (sdk " << DDP_WORKER_VERSION << ")\n";
  return 0;
}
