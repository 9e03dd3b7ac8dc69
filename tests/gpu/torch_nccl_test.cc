// On a machine with an NVIDIA GPU and PyTorch: the compat DDP script with the NCCL backend
// (device_ids=[LOCAL_RANK]) under `ddprun --standalone --nproc-per-node=gpu`, once straight
// through and once with a worker crashing in its first attempt and restarted on the GPU;
// both end with the same parameters on every rank. PYTHON_EXEC names the Python that holds
// PyTorch (python3 from PATH when unset), as it does for ddprun. Label `gpu`.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/compat/ddp_results.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kTrain = kSourceDir + "/tests/compat/ddp_train.py";

std::string Python() {
  const char* python = ::getenv("PYTHON_EXEC");
  return python != nullptr && *python != '\0' ? python : "python3";
}

// The GPUs PyTorch sees (-1 when it cannot say), after printing its versions.
int TorchGpuCount() {
  ProcessResult r =
      RunProcess({"/usr/bin/env", Python(), "-c",
                  "import torch\n"
                  "try: nccl = '.'.join(map(str, torch.cuda.nccl.version()))\n"
                  "except Exception as e: nccl = f'none ({e})'\n"
                  "print(torch.__version__, torch.version.cuda, nccl, torch.cuda.device_count())"},
                 {}, absl::Seconds(120));
  int count = -1;
  const std::string out(absl::StripTrailingAsciiWhitespace(r.out));
  const size_t last = out.rfind(' ');
  if (r.exit_code != 0 || last == std::string::npos ||
      !absl::SimpleAtoi(out.substr(last + 1), &count)) {
    ADD_FAILURE() << Python() << " cannot import torch or count GPUs (set PYTHON_EXEC): " << r.out
                  << r.err;
    return -1;
  }
  std::printf("[ measure ] PyTorch, its CUDA, its NCCL, GPUs it sees: %s\n", out.c_str());
  std::fflush(stdout);
  return count;
}

ProcessResult TrainOnGpus(const TempDir& out, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      kDdprun,     "--standalone", "--nproc-per-node=gpu", "--max-restarts=1", kTrain, out.path(),
      "--backend", "nccl"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const absl::Time start = absl::Now();
  // Inside tests/gpu/run.sh's limit for the program, so that the output is kept.
  ProcessResult r = RunProcess(argv, {{"PYTHON_EXEC", Python()}}, absl::Seconds(90));
  std::printf("[ measure ] ddprun DDP (NCCL)%s: %.1f s from start to exit %d\n",
              extra.empty() ? "" : " with a crash and a restart",
              absl::ToDoubleSeconds(absl::Now() - start), r.exit_code);
  std::fflush(stdout);
  return r;
}

TEST(GpuTorch, DdpWithNcclTrainsAndARestartedJobEndsWhereAnUncrashedOneDoes) {
  const int gpus = TorchGpuCount();
  ASSERT_GT(gpus, 0) << "PyTorch sees no GPU";
  TempDir straight, crashed;
  ProcessResult a = TrainOnGpus(straight, {});
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const std::string digest = ExpectTrained(straight, gpus);

  const int crash_rank = gpus - 1;
  ProcessResult b = TrainOnGpus(crashed, {"--crash", absl::StrCat(crash_rank, ":5")});
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_THAT(b.out + b.err, HasSubstr(absl::StrCat("rank ", crash_rank, ": crashing at step 5")));
  EXPECT_EQ(ExpectTrained(crashed, gpus), digest)
      << "the restarted job ended with other parameters";
  for (int rank = 0; rank < gpus; ++rank) {
    std::map<std::string, std::string> launch = Launch(crashed, rank);
    EXPECT_EQ(launch["TORCHELASTIC_RESTART_COUNT"], "1") << "rank " << rank;
    EXPECT_THAT(launch["DEVICE"], StartsWith(absl::StrCat("cuda:", rank, " "))) << "rank " << rank;
    std::printf("[ measure ] rank %d trained on %s\n", rank, launch["DEVICE"].c_str());
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace ddprun::testing
