// ddp-allreduce: ncclAllReduce (sum of floats) from 8 B to 256 MiB across the ranks of a
// ddprun (or torchrun) job, every element checked, with timings in nccl-tests' terms:
//
//   ddprun --nproc-per-node=gpu --no-python ddp-allreduce [--iters N] [--warmup N]
//
// Rank 0 prints one row per size: bytes, elements, time per operation, algorithm bandwidth
// (bytes / time) and bus bandwidth (algbw * 2 (n - 1) / n, NCCL's own definition, which
// is comparable across rank counts), and how many elements were wrong on any rank.

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddp/worker/context.h"

namespace {

constexpr size_t kMinBytes = 8;
constexpr size_t kMaxBytes = 256u << 20;

int Fail(const std::string& message) {
  fprintf(stderr, "ddp-allreduce: %s\n", message.c_str());
  return 1;
}

#define CUDA_OR_FAIL(call)                                                             \
  do {                                                                                 \
    const cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) return Fail(absl::StrCat(#call, ": ", cudaGetErrorString(e_))); \
  } while (0)

// The communicator is non-blocking: a call that returns ncclInProgress must have finished
// (WaitReady) before the next NCCL call on it.
#define NCCL_OR_FAIL(call)                                                             \
  do {                                                                                 \
    const ncclResult_t r_ = (call);                                                    \
    if (r_ == ncclInProgress) {                                                        \
      if (absl::Status s_ = comm->WaitReady(absl::Seconds(120)); !s_.ok())             \
        return Fail(std::string(s_.message()));                                       \
    } else if (r_ != ncclSuccess) {                                                    \
      return Fail(absl::StrCat(#call, ": ", ncclGetErrorString(r_)));                  \
    }                                                                                  \
  } while (0)

int ParseCount(const char* flag, const char* value, int& out) {
  char* end = nullptr;
  const long n = strtol(value, &end, 10);
  if (end == value || *end != '\0' || n < 0 || n > 100000) {
    return Fail(absl::StrCat(flag, "='", value, "' is not valid: expected a whole number in 0-100000"));
  }
  out = static_cast<int>(n);
  return 0;
}

// Rank r contributes (r % 7) + 1: small whole numbers, so that every partial sum is exact in
// float up to millions of ranks and a missing or doubled rank still shows.
float Contribution(int rank) { return static_cast<float>(rank % 7 + 1); }

size_t CountWrong(const std::vector<float>& host, int world_size) {
  double expected = 0;
  for (int r = 0; r < world_size; ++r) expected += Contribution(r);
  size_t wrong = 0;
  for (float v : host) wrong += v != static_cast<float>(expected);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20;
  int warmup = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--iters" || arg == "--warmup") && i + 1 < argc) {
      if (ParseCount(argv[i], argv[i + 1], arg == "--iters" ? iters : warmup) != 0) return 2;
      ++i;
    } else if (arg == "-h" || arg == "--help") {
      printf("usage: ddprun --nproc-per-node=gpu --no-python ddp-allreduce [--iters N] [--warmup N]\n");
      return 0;
    } else {
      fprintf(stderr, "ddp-allreduce: unknown argument '%s'; see --help\n", arg.c_str());
      return 2;
    }
  }
  if (iters < 1) return Fail("--iters must be at least 1");

  absl::StatusOr<ddp::worker::Context> ctx = ddp::worker::Context::FromEnv();
  if (!ctx.ok()) return Fail(std::string(ctx.status().message()));
  absl::StatusOr<ddp::worker::NcclCommunicator> comm = ctx->InitNccl();
  if (!comm.ok()) return Fail(std::string(comm.status().message()));
  const int n = comm->size();
  const bool report = comm->rank() == 0;

  cudaStream_t stream;
  CUDA_OR_FAIL(cudaStreamCreate(&stream));
  float* send = nullptr;
  float* recv = nullptr;
  CUDA_OR_FAIL(cudaMalloc(&send, kMaxBytes));
  CUDA_OR_FAIL(cudaMalloc(&recv, kMaxBytes));
  cudaEvent_t start, stop;
  CUDA_OR_FAIL(cudaEventCreate(&start));
  CUDA_OR_FAIL(cudaEventCreate(&stop));
  const char* algo = getenv("NCCL_ALGO");
  if (report) {
    printf("# ddp-allreduce: %d ranks, float sum, %d warm-up + %d timed iterations, NCCL_ALGO=%s\n",
           n, warmup, iters, algo != nullptr ? algo : "(unset: NCCL chooses per size)");
    printf("%12s %12s %10s %10s %10s %8s\n", "size(B)", "count", "time(us)", "algbw(GB/s)",
           "busbw(GB/s)", "#wrong");
  }
  int failures = 0;
  for (size_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 2) {
    const size_t count = bytes / sizeof(float);
    const std::vector<float> mine(count, Contribution(comm->rank()));
    CUDA_OR_FAIL(cudaMemcpy(send, mine.data(), bytes, cudaMemcpyHostToDevice));
    for (int i = 0; i < warmup; ++i) {
      NCCL_OR_FAIL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm->get(), stream));
    }
    CUDA_OR_FAIL(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) {
      NCCL_OR_FAIL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm->get(), stream));
    }
    CUDA_OR_FAIL(cudaEventRecord(stop, stream));
    if (absl::Status s = comm->Synchronize(stream, absl::Seconds(120)); !s.ok()) {
      return Fail(std::string(s.message()));
    }
    float ms = 0;
    CUDA_OR_FAIL(cudaEventElapsedTime(&ms, start, stop));
    std::vector<float> host(count);
    CUDA_OR_FAIL(cudaMemcpy(host.data(), recv, bytes, cudaMemcpyDeviceToHost));
    const size_t wrong = CountWrong(host, n);
    absl::StatusOr<std::vector<std::string>> all_wrong =
        ctx->AllGather(absl::StrCat("wrong-", bytes), std::to_string(wrong));
    if (!all_wrong.ok()) return Fail(std::string(all_wrong.status().message()));
    size_t total_wrong = 0;
    for (const std::string& w : *all_wrong) total_wrong += strtoull(w.c_str(), nullptr, 10);
    failures += total_wrong > 0;
    const double us = ms * 1000.0 / iters;
    const double algbw = bytes / us / 1000.0;  // GB/s
    const double busbw = algbw * 2.0 * (n - 1) / n;
    if (report) {
      printf("%12zu %12zu %10.2f %10.2f %10.2f %8zu\n", bytes, count, us, algbw, busbw, total_wrong);
    }
  }
  cudaFree(send);
  cudaFree(recv);
  if (failures > 0) return Fail(absl::StrCat(failures, " sizes gave wrong sums"));
  if (report) printf("# every element of every size verified on every rank\n");
  return 0;
}
