// sdk-collectives: how long the worker SDK's store collectives take, from inside a job.
//
//   ddprun --standalone --nproc-per-node=8 --no-python build/bench/sdk_collectives [--iters N]
//
// Every rank times Context creation and --iters (default 200) rounds of Barrier, Broadcast
// (64 B from rank 0) and AllGather (64 B each); rank 0 prints the median and p99 of each,
// and which store served them (rank 0's, or the ddprun master's in a multi-node job).

#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddp/worker/context.h"

namespace {

int Fail(const absl::Status& status) {
  fprintf(stderr, "sdk-collectives: %s\n", std::string(status.message()).c_str());
  return 1;
}

struct Stats {
  double median_us;
  double p99_us;
};

Stats Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 200;
  if (argc == 3 && std::string(argv[1]) == "--iters") iters = std::max(1, atoi(argv[2]));
  const absl::Time start = absl::Now();
  absl::StatusOr<ddp::worker::Context> ctx = ddp::worker::Context::FromEnv();
  if (!ctx.ok()) return Fail(ctx.status());
  // The first call waits for the store (rank 0's may still be starting): part of set-up.
  if (absl::Status s = ctx->Barrier("warm-up"); !s.ok()) return Fail(s);
  const double setup_ms = absl::ToDoubleMilliseconds(absl::Now() - start);

  const std::string blob(64, 'x');
  std::vector<double> barrier, broadcast, all_gather;
  for (int i = 0; i < iters; ++i) {
    absl::Time t = absl::Now();
    if (absl::Status s = ctx->Barrier("b"); !s.ok()) return Fail(s);
    barrier.push_back(absl::ToDoubleMicroseconds(absl::Now() - t));
    t = absl::Now();
    absl::StatusOr<std::string> b = ctx->Broadcast("c", 0, blob);
    if (!b.ok()) return Fail(b.status());
    broadcast.push_back(absl::ToDoubleMicroseconds(absl::Now() - t));
    t = absl::Now();
    absl::StatusOr<std::vector<std::string>> g = ctx->AllGather("g", blob);
    if (!g.ok()) return Fail(g.status());
    all_gather.push_back(absl::ToDoubleMicroseconds(absl::Now() - t));
  }
  if (ctx->rank() == 0) {
    printf("# %d ranks, store %s (%s), %d iterations\n", ctx->world_size(),
           ctx->store().address().c_str(),
           ctx->env().store_addr.empty() ? "served by rank 0" : "the ddprun master's", iters);
    printf("%-24s %10.2f ms\n", "context + first barrier", setup_ms);
    for (const auto& [name, samples] :
         {std::pair<const char*, std::vector<double>*>{"barrier", &barrier},
          {"broadcast 64 B", &broadcast},
          {"all_gather 64 B", &all_gather}}) {
      const Stats s = Summarize(*samples);
      printf("%-24s median %8.1f us   p99 %8.1f us\n", name, s.median_us, s.p99_us);
    }
  }
  return 0;
}
