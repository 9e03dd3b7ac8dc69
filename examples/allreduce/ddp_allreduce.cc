// ddp-allreduce: ncclAllReduce (sum of floats) from 8 B to 1 GiB across the ranks of a
// ddprun (or torchrun) job, out of place and in place, every element checked, printed in
// nccl-tests' all_reduce_perf layout so that its figures can be set beside NCCL's own:
//
//   ddprun --nproc-per-node=gpu --no-python ddp-allreduce [--iters N] [--warmup N] [--max-bytes B]
//
// Rank 0 prints the devices of every rank, then one row per size: bytes, elements, and for
// each of out-of-place and in-place the time per operation, the algorithm bandwidth
// (bytes / time), the bus bandwidth (algbw * 2 (n - 1) / n, NCCL's definition, comparable
// across rank counts) and how many elements were wrong on any rank.

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ddp/worker/context.h"

namespace {

constexpr size_t kMinBytes = 8;
constexpr size_t kDefaultMaxBytes = size_t{1} << 30;
constexpr size_t kLargestMaxBytes = size_t{64} << 30;

int Fail(const std::string& message) {
  fprintf(stderr, "ddp-allreduce: %s\n", message.c_str());
  return 1;
}

#define CUDA_OR_FAIL(call)                                                                 \
  do {                                                                                     \
    const cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) return Fail(absl::StrCat(#call, ": ", cudaGetErrorString(e_))); \
  } while (0)

// The communicator is non-blocking: a call that returns ncclInProgress must have finished
// (WaitReady) before the next NCCL call on it.
#define NCCL_OR_FAIL(comm, call)                                            \
  do {                                                                      \
    const ncclResult_t r_ = (call);                                         \
    if (r_ == ncclInProgress) {                                             \
      if (absl::Status s_ = (comm).WaitReady(absl::Seconds(120)); !s_.ok()) \
        return Fail(std::string(s_.message()));                             \
    } else if (r_ != ncclSuccess) {                                         \
      return Fail(absl::StrCat(#call, ": ", ncclGetErrorString(r_)));       \
    }                                                                       \
  } while (0)

struct Options {
  int iters = 20;
  int warmup = 5;
  size_t max_bytes = kDefaultMaxBytes;
};

// 0 when parsed, else the exit code (2, after saying why).
int ParseOptions(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      printf(
          "usage: ddprun --nproc-per-node=gpu --no-python ddp-allreduce [--iters N] [--warmup N] "
          "[--max-bytes B]\n");
      exit(0);
    }
    if (arg != "--iters" && arg != "--warmup" && arg != "--max-bytes") {
      Fail(absl::StrCat("unknown argument '", arg, "'; see --help"));
      return 2;
    }
    if (i + 1 >= argc) {
      Fail(absl::StrCat(arg, " needs a value; see --help"));
      return 2;
    }
    const char* value = argv[++i];
    uint64_t n = 0;
    if (arg == "--max-bytes") {
      if (!absl::SimpleAtoi(value, &n) || n < kMinBytes || n > kLargestMaxBytes) {
        Fail(absl::StrCat("--max-bytes='", value,
                          "' is not valid: expected a whole number of bytes in ", kMinBytes, "-",
                          kLargestMaxBytes));
        return 2;
      }
      options.max_bytes = n;
      continue;
    }
    if (!absl::SimpleAtoi(value, &n) || n > 100000) {
      Fail(absl::StrCat(arg, "='", value, "' is not valid: expected a whole number in 0-100000"));
      return 2;
    }
    (arg == "--iters" ? options.iters : options.warmup) = static_cast<int>(n);
  }
  return 0;
}

// Rank r contributes (r % 7) + 1: small whole numbers, so that every partial sum is exact in
// float up to millions of ranks and a missing or doubled rank still shows.
float Contribution(int rank) { return static_cast<float>(rank % 7 + 1); }

size_t CountWrong(const std::vector<float>& host, size_t count, int world_size) {
  double expected = 0;
  for (int r = 0; r < world_size; ++r) expected += Contribution(r);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] != static_cast<float>(expected);
  return wrong;
}

// nccl-tests' line for a rank's device: "#  Rank  0 Pid  1234 on  host device  0 [0x18] NAME".
std::string DeviceLine(int rank, int device) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    snprintf(prop.name, sizeof prop.name, "?");
  char line[512];
  snprintf(line, sizeof line, "#  Rank %2d Pid %6d on %10s device %2d [0x%02x] %s", rank,
           static_cast<int>(getpid()), host, device, prop.pciBusID, prop.name);
  return line;
}

struct Timing {
  double us = 0;
  size_t wrong = 0;
};

// The device buffers and stream of one rank, and the timing of one size.
class AllReduceBench {
 public:
  AllReduceBench(ddp::worker::NcclCommunicator& comm, const Options& options)
      : comm_(comm), options_(options) {}
  ~AllReduceBench() {
    cudaFree(send_);
    cudaFree(recv_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int Setup() {
    CUDA_OR_FAIL(cudaStreamCreate(&stream_));
    CUDA_OR_FAIL(cudaMalloc(&send_, options_.max_bytes));
    CUDA_OR_FAIL(cudaMalloc(&recv_, options_.max_bytes));
    CUDA_OR_FAIL(cudaEventCreate(&start_));
    CUDA_OR_FAIL(cudaEventCreate(&stop_));
    host_.reserve(options_.max_bytes / sizeof(float));
    return 0;
  }

  // Times `iters` all-reduces of `bytes` (in place: recv into recv), then checks the result
  // of one that started from the contributions, element by element.
  int Measure(size_t bytes, bool in_place, Timing& out) {
    const size_t count = bytes / sizeof(float);
    host_.assign(count, Contribution(comm_.rank()));
    float* const source = in_place ? recv_ : send_;
    CUDA_OR_FAIL(cudaMemcpy(source, host_.data(), bytes, cudaMemcpyHostToDevice));
    if (!in_place) CUDA_OR_FAIL(cudaMemset(recv_, 0, bytes));  // no stale right answer
    for (int i = 0; i < options_.warmup; ++i) {
      NCCL_OR_FAIL(comm_,
                   ncclAllReduce(source, recv_, count, ncclFloat, ncclSum, comm_.get(), stream_));
    }
    CUDA_OR_FAIL(cudaEventRecord(start_, stream_));
    for (int i = 0; i < options_.iters; ++i) {
      NCCL_OR_FAIL(comm_,
                   ncclAllReduce(source, recv_, count, ncclFloat, ncclSum, comm_.get(), stream_));
    }
    CUDA_OR_FAIL(cudaEventRecord(stop_, stream_));
    if (int rc = Synchronize(); rc != 0) return rc;
    float ms = 0;
    CUDA_OR_FAIL(cudaEventElapsedTime(&ms, start_, stop_));
    out.us = ms * 1000.0 / options_.iters;
    if (in_place) {  // the timed operations summed their own results: start again
      CUDA_OR_FAIL(cudaMemcpy(recv_, host_.data(), bytes, cudaMemcpyHostToDevice));
      NCCL_OR_FAIL(comm_,
                   ncclAllReduce(recv_, recv_, count, ncclFloat, ncclSum, comm_.get(), stream_));
      if (int rc = Synchronize(); rc != 0) return rc;
    }
    CUDA_OR_FAIL(cudaMemcpy(host_.data(), recv_, bytes, cudaMemcpyDeviceToHost));
    out.wrong = CountWrong(host_, count, comm_.size());
    return 0;
  }

 private:
  int Synchronize() {
    if (absl::Status s = comm_.Synchronize(stream_, absl::Seconds(120)); !s.ok()) {
      return Fail(std::string(s.message()));
    }
    return 0;
  }

  ddp::worker::NcclCommunicator& comm_;
  const Options options_;
  cudaStream_t stream_ = nullptr;
  float* send_ = nullptr;
  float* recv_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::vector<float> host_;
};

void PrintHeader(const Options& options, int ranks, const std::vector<std::string>& devices) {
  const char* algo = getenv("NCCL_ALGO");
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  printf(
      "# ddp-allreduce: nranks %d minBytes %zu maxBytes %zu warmup iters: %d iters: %d "
      "validation: 1 NCCL %d NCCL_ALGO=%s\n",
      ranks, kMinBytes, options.max_bytes, options.warmup, options.iters, nccl_version,
      algo != nullptr ? algo : "(unset: NCCL chooses per size)");
  printf("#\n# Using devices\n");
  for (const std::string& line : devices) printf("%s\n", line.c_str());
  printf("#\n");
  printf("# %60s %34s\n", "out-of-place", "in-place");
  printf("# %10s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "type",
         "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  printf("# %10s %13s %9s %7s %7s %8s %7s %7s %6s %8s %7s %7s %6s\n", "(B)", "(elements)", "", "",
         "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (int rc = ParseOptions(argc, argv, options); rc != 0) return rc;
  if (options.iters < 1) return Fail("--iters must be at least 1");

  absl::StatusOr<ddp::worker::Context> ctx = ddp::worker::Context::FromEnv();
  if (!ctx.ok()) return Fail(std::string(ctx.status().message()));
  absl::StatusOr<ddp::worker::NcclCommunicator> comm = ctx->InitNccl();
  if (!comm.ok()) return Fail(std::string(comm.status().message()));
  const int n = comm->size();
  const bool report = comm->rank() == 0;
  absl::StatusOr<std::vector<std::string>> devices =
      ctx->AllGather("devices", DeviceLine(comm->rank(), comm->device()));
  if (!devices.ok()) return Fail(std::string(devices.status().message()));
  if (report) PrintHeader(options, n, *devices);

  AllReduceBench bench(*comm, options);
  if (int rc = bench.Setup(); rc != 0) return rc;
  int failures = 0;
  size_t total_wrong = 0;
  double busbw_sum = 0;
  int measurements = 0;
  for (size_t bytes = kMinBytes; bytes <= options.max_bytes; bytes *= 2) {
    Timing out_of_place, in_place;
    if (int rc = bench.Measure(bytes, /*in_place=*/false, out_of_place); rc != 0) return rc;
    if (int rc = bench.Measure(bytes, /*in_place=*/true, in_place); rc != 0) return rc;
    absl::StatusOr<std::vector<std::string>> all_wrong = ctx->AllGather(
        absl::StrCat("wrong-", bytes), absl::StrCat(out_of_place.wrong, " ", in_place.wrong));
    if (!all_wrong.ok()) return Fail(std::string(all_wrong.status().message()));
    size_t wrong[2] = {0, 0};
    for (const std::string& w : *all_wrong) {
      std::vector<std::string> parts = absl::StrSplit(w, ' ');
      for (size_t i = 0; i < 2 && i < parts.size(); ++i)
        wrong[i] += strtoull(parts[i].c_str(), nullptr, 10);
    }
    failures += wrong[0] + wrong[1] > 0;
    total_wrong += wrong[0] + wrong[1];
    if (!report) continue;
    printf("  %10zu %13zu %9s %7s %7d", bytes, bytes / sizeof(float), "float", "sum", -1);
    int column = 0;
    for (const Timing& t : {out_of_place, in_place}) {
      // On one rank NCCL may queue nothing at all (in place): no time, and no bandwidth.
      const double algbw = t.us > 0 ? bytes / t.us / 1000.0 : 0.0;  // GB/s
      const double busbw = algbw * 2.0 * (n - 1) / n;
      busbw_sum += busbw;
      ++measurements;
      printf(" %8.2f %7.2f %7.2f %6zu", t.us, algbw, busbw, wrong[column++]);
    }
    printf("\n");
  }
  if (report) {
    printf("# Out of bounds values : %zu %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
    printf("# Avg bus bandwidth    : %.4f\n#\n", measurements > 0 ? busbw_sum / measurements : 0.0);
  }
  if (failures > 0) return Fail(absl::StrCat(failures, " sizes gave wrong sums"));
  if (report) printf("# every element of every size verified on every rank\n");
  return 0;
}
