// A worker that uses the SDK, for the launch tests.
//   sdk_test_worker collectives DIR   barrier, broadcast and all_gather; writes DIR/sdk.<RANK>
//   sdk_test_worker nccl              InitNccl; on failure prints the error and exits 1
//   sdk_test_worker heartbeat X       Heartbeat() every 20 ms for 4 s, then exit 0

#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_join.h"
#include "ddp/worker/context.h"

namespace {

int Fail(const absl::Status& status) {
  fprintf(stderr, "sdk_test_worker: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Collectives(ddp::worker::Context& ctx, const std::string& dir) {
  if (absl::Status s = ctx.Barrier("start"); !s.ok()) return Fail(s);
  absl::StatusOr<std::string> greeting = ctx.Broadcast(
      "greeting", ctx.world_size() - 1, "hello from rank " + std::to_string(ctx.rank()));
  if (!greeting.ok()) return Fail(greeting.status());
  absl::StatusOr<std::vector<std::string>> all = ctx.AllGather("ranks", std::to_string(ctx.rank()));
  if (!all.ok()) return Fail(all.status());
  if (absl::Status s = ctx.Barrier("end"); !s.ok()) return Fail(s);
  std::ofstream(dir + "/sdk." + std::to_string(ctx.rank()))
      << "world=" << ctx.world_size() << "\n"
      << "broadcast=" << *greeting << "\n"
      << "all_gather=" << absl::StrJoin(*all, ",") << "\n"
      << "store=" << ctx.store().address() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  absl::StatusOr<ddp::worker::Context> ctx = ddp::worker::Context::FromEnv();
  if (!ctx.ok()) return Fail(ctx.status());
  if (mode == "collectives" && argc == 3) return Collectives(*ctx, argv[2]);
  if (mode == "heartbeat" && argc == 3) {  // beat for 4 s, every 20 ms, then exit 0
    for (int i = 0; i < 200; ++i) {
      if (absl::Status s = ctx->Heartbeat(); !s.ok()) return Fail(s);
      usleep(20000);
    }
    return 0;
  }
#if DDP_WORKER_HAS_NCCL
  if (mode == "nccl") {
    absl::StatusOr<ddp::worker::NcclCommunicator> comm = ctx->InitNccl();
    if (!comm.ok()) return Fail(comm.status());
    printf("rank %d: communicator '%s' of %d ranks on device %d\n", comm->rank(),
           comm->name().c_str(), comm->size(), comm->device());
    return 0;
  }
#endif
  fprintf(stderr, "usage: sdk_test_worker collectives DIR | nccl\n");
  return 2;
}
