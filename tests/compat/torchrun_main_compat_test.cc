// torchrun main's options against the real torchrun closest to main that Debian has (sid's
// python3-torch, 2.14, in the root scripts/torch2-root.sh makes; scripts/test.sh passes it as
// DDPRUN_TORCH2_ROOT): the same command line, run by both, gives the same lines, files and
// worker environment. Skipped when that torch predates these options.

#include <filesystem>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "tests/compat/compat_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

// The lines of `text` that contain `needle`, as a set: workers print in any order.
std::multiset<std::string> LinesWith(const std::string& text, const std::string& needle) {
  std::multiset<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.find(needle) != absl::string_view::npos) lines.emplace(line);
  }
  return lines;
}

class TorchrunMain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = WhyNoTorch2(); !why.empty()) GTEST_SKIP() << why;
    options_ = RunProcess({kTorch2Python, "-c",
                           "from torch.distributed.run import get_args_parser\n"
                           "for a in get_args_parser()._actions:\n"
                           "  for s in a.option_strings: print(s)\n"})
                   .out;
    if (options_.find("--log-line-prefix-template\n") == std::string::npos) {
      GTEST_SKIP() << "this torch's torchrun predates torchrun main's options (sid's 2.14 has "
                      "them)";
    }
  }

  // torchrun (python -m torch.distributed.run) and ddprun with the same arguments.
  static ProcessResult Torchrun(const std::vector<std::string>& args,
                                const std::map<std::string, std::optional<std::string>>& env = {}) {
    std::vector<std::string> argv = {kTorch2Python, "-m", "torch.distributed.run"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, env, absl::Seconds(120));
  }
  static ProcessResult Ddprun(const std::vector<std::string>& args,
                              const std::map<std::string, std::optional<std::string>>& env = {}) {
    std::vector<std::string> argv = {kDdprun};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, env, absl::Seconds(120));
  }

  std::string options_;
};

TEST_F(TorchrunMain, DdprunHasEveryOptionOfThisTorchrun) {
  const std::string help = RunProcess({kDdprun, "--help-all"}).out;
  int checked = 0;
  for (absl::string_view option : absl::StrSplit(options_, '\n', absl::SkipEmpty())) {
    ++checked;
    // --help lists each spelling followed by ',', ' ' or a newline.
    const std::string name(option);
    EXPECT_TRUE(help.find(name + ",") != std::string::npos ||
                help.find(name + " ") != std::string::npos ||
                help.find(name + "\n") != std::string::npos)
        << name << " is an option of torchrun, not of ddprun";
  }
  EXPECT_GT(checked, 50);
}

TEST_F(TorchrunMain, PrefixTemplatesGiveTheSameLines) {
  const std::vector<std::string> command = {
      "--standalone",
      "--nproc-per-node=2",
      "--tee=3",
      "--log-line-prefix-template=[${hostname}|$rank|${local_rank}|$role_name|$$|${nope}] ",
      "--no-python",
      "/bin/sh",
      "-c",
      "echo hello"};
  ProcessResult torchrun = Torchrun(command);
  ProcessResult ddprun = Ddprun(command);
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.err;
  ASSERT_EQ(ddprun.exit_code, 0) << ddprun.err;
  EXPECT_EQ(LinesWith(ddprun.out, "hello"), LinesWith(torchrun.out, "hello"));
  EXPECT_EQ(LinesWith(ddprun.out, "hello").size(), 2u);
  // torchrun's variable, and an empty option that falls back to it.
  const std::vector<std::string> from_env = {
      "--standalone", "--tee=3",   "--log-line-prefix-template=", "--no-python", "/bin/sh",
      "-c",           "echo hello"};
  const std::map<std::string, std::optional<std::string>> env = {
      {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<${role_name}:${rank}> "}};
  torchrun = Torchrun(from_env, env);
  ddprun = Ddprun(from_env, env);
  EXPECT_EQ(LinesWith(ddprun.out, "hello"), LinesWith(torchrun.out, "hello"));
  EXPECT_EQ(LinesWith(ddprun.out, "hello"), std::multiset<std::string>{"<default:0> hello"});
}

// The attempt's filtered file: torchrun's is under <log_dir>/<run_id>_<random>/attempt_0.
std::string FilteredFile(const std::string& log_dir, const std::string& name) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(log_dir)) {
    if (entry.path().filename() == name) return ReadFile(entry.path().string());
  }
  return "";
}

TEST_F(TorchrunMain, DuplicateFiltersWriteTheSameFilteredFiles) {
  TempDir torchrun_logs, ddprun_logs;
  auto command = [](const std::string& log_dir) {
    return std::vector<std::string>{
        "--standalone",
        "--nproc-per-node=3",
        "--tee=3",
        "--local-ranks-filter=0,2",
        "--log-dir=" + log_dir,
        "--duplicate-stdout-filters=loss,,,step",
        "--duplicate-stderr-filters=NCCL",
        "--no-python",
        "/bin/sh",
        "-c",
        "echo step $RANK; echo 'loss, 0.1'; echo other; echo NCCL WARN $RANK >&2; echo x >&2"};
  };
  ProcessResult torchrun = Torchrun(command(torchrun_logs.path()));
  ProcessResult ddprun = Ddprun(command(ddprun_logs.path()));
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.err;
  ASSERT_EQ(ddprun.exit_code, 0) << ddprun.err;
  for (const std::string file : {"filtered_stdout.log", "filtered_stderr.log"}) {
    const std::string theirs = FilteredFile(torchrun_logs.path(), file);
    const std::string ours = FilteredFile(ddprun_logs.path(), file);
    EXPECT_FALSE(theirs.empty()) << file;
    EXPECT_EQ(LinesWith(ours, ""), LinesWith(theirs, "")) << file;
  }
}

TEST_F(TorchrunMain, VirtualLocalRankGivesTheSameEnvironment) {
  const std::vector<std::string> command = {
      "--standalone", "--nproc-per-node=2",
      "--tee=3",      "--virtual-local-rank",
      "--no-python",  "/bin/sh",
      "-c",           "echo env RANK=$RANK LOCAL_RANK=$LOCAL_RANK CVD=$CUDA_VISIBLE_DEVICES"};
  const std::map<std::string, std::optional<std::string>> env = {{"CUDA_VISIBLE_DEVICES", "3,5"}};
  ProcessResult torchrun = Torchrun(command, env);
  ProcessResult ddprun = Ddprun(command, env);
  ASSERT_EQ(torchrun.exit_code, 0) << torchrun.err;
  ASSERT_EQ(ddprun.exit_code, 0) << ddprun.err;
  EXPECT_EQ(LinesWith(ddprun.out, "env "), LinesWith(torchrun.out, "env "));
  EXPECT_THAT(ddprun.out, HasSubstr("[default1]:env RANK=1 LOCAL_RANK=0 CVD=5"));
  // One device for two local ranks: both refuse (ddprun before anything starts, exit 2).
  const std::map<std::string, std::optional<std::string>> one = {{"CUDA_VISIBLE_DEVICES", "3"}};
  EXPECT_NE(Torchrun(command, one).exit_code, 0);
  EXPECT_EQ(Ddprun(command, one).exit_code, 2);
}

}  // namespace
}  // namespace ddprun::testing
