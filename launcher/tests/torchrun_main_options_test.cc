// Every option of torchrun's current command line, as PyTorch main declares it in
// torch/distributed/run.py (read at cyyever/pytorch@00d947a63c3f6a7da87dc14149ce46123f737d81,
// a fork that tracks main; PyTorch PRs #191265 and #191289 of July 2026 are the newest options
// in it; Debian sid's python3-torch 2.14.1 declares the same list), must be an option of
// ddprun, and the migration table in docs/user-guide.md must say what ddprun does with it.
// When torchrun adds an option, add it here (tests/compat/torchrun_main_compat_test.cc
// also asks a real torchrun's parser, where one is installed).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher/cli.h"
#include "launcher/torchrun_options.h"
#include "tests/support/child_process.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct TorchrunOption {
  std::vector<std::string> spellings;  // as run.py's add_argument lists them
  std::string value;                   // a valid value; empty: a flag
};

// run.py's parser, in its order (-h/--help is argparse's own).
const std::vector<TorchrunOption> kTorchrunMainOptions = {
    {{"--nnodes"}, "1"},
    {{"--nproc-per-node", "--nproc_per_node"}, "2"},
    {{"--rdzv-backend", "--rdzv_backend"}, "static"},
    {{"--rdzv-endpoint", "--rdzv_endpoint"}, "localhost:29400"},
    {{"--rdzv-id", "--rdzv_id"}, "job7"},
    {{"--rdzv-conf", "--rdzv_conf"}, "join_timeout=60"},
    {{"--standalone"}, ""},
    {{"--max-restarts", "--max_restarts"}, "3"},
    {{"--monitor-interval", "--monitor_interval"}, "0.1"},
    {{"--start-method", "--start_method"}, "spawn"},
    {{"--event-log-handler", "--event_log_handler"}, "console"},
    {{"--role"}, "trainer"},
    {{"-m", "--module"}, ""},
    {{"--no-python", "--no_python"}, ""},
    {{"--run-path", "--run_path"}, ""},
    {{"--log-dir", "--log_dir"}, "/tmp/logs"},
    {{"-r", "--redirects"}, "3"},
    {{"-t", "--tee"}, "0:3"},
    {{"--log-line-prefix-template", "--log_line_prefix_template"}, "[${hostname}:${rank}]: "},
    {{"--local-ranks-filter", "--local_ranks_filter"}, "0"},
    {{"--duplicate-stdout-filters", "--duplicate_stdout_filters"}, "loss,,step"},
    {{"--duplicate-stderr-filters", "--duplicate_stderr_filters"}, "NCCL,CUDA error"},
    {{"--node-rank", "--node_rank"}, "0"},
    {{"--master-addr", "--master_addr"}, "127.0.0.1"},
    {{"--master-port", "--master_port"}, "29500"},
    {{"--local-addr", "--local_addr"}, "10.0.0.7"},
    {{"--logs-specs", "--logs_specs"}, "my_logs_specs"},
    {{"--numa-binding", "--numa_binding"}, "exclusive"},
    {{"--signals-to-handle", "--signals_to_handle"}, "SIGTERM,SIGUSR1"},
    {{"--shutdown-timeout", "--shutdown_timeout"}, "60"},
    {{"--virtual-local-rank", "--virtual_local_rank"}, ""},
    {{"--print-completion", "--print_completion"}, "zsh"},
};

LaunchEnvironment ShellEnvironment() {
  LaunchEnvironment env;
  env.vars["PATH"] = "/usr/bin:/bin";
  env.cwd = "/tmp";
  return env;
}

DeviceCounts Devices() {
  DeviceCounts devices;
  devices.count_gpus = []() -> absl::StatusOr<int> { return 0; };
  devices.cpu_count = 4;
  return devices;
}

// The command line a user would type with `spelling`: the option, then a program.
std::vector<std::string> CommandWith(const std::string& spelling, const TorchrunOption& option) {
  std::vector<std::string> args;
  args.push_back(option.value.empty() ? spelling : spelling + "=" + option.value);
  if (spelling == "-r" || spelling == "-t") args = {spelling, option.value};  // as argparse
  if (spelling == "-m" || spelling == "--module") return {args[0], "json.tool"};
  if (spelling == "--local-ranks-filter" || spelling == "--local_ranks_filter" ||
      spelling == "-t" || spelling == "--tee") {
    args.push_back("--nproc-per-node=2");
  }
  args.insert(args.end(), {"--no-python", "/bin/true"});
  return args;
}

TEST(TorchrunMainOptions, EveryOneIsAnOptionOfDdprun) {
  for (const TorchrunOption& option : kTorchrunMainOptions) {
    for (const std::string& spelling : option.spellings) {
      absl::StatusOr<CliOutcome> outcome =
          ParseCommandLine(CommandWith(spelling, option), Devices(), ShellEnvironment());
      const std::string error = outcome.ok() ? "" : std::string(outcome.status().message());
      EXPECT_THAT(error, Not(HasSubstr("unknown option"))) << spelling;
      EXPECT_THAT(error, Not(HasSubstr("not expected"))) << spelling;
      if (spelling == "--logs-specs" || spelling == "--logs_specs") {
        // Accepted, and refused with the reason: ddprun cannot load a Python plug-in.
        EXPECT_THAT(error, HasSubstr("names a Python LogsSpecs plug-in")) << spelling;
      } else {
        EXPECT_EQ(error, "") << spelling;
      }
    }
  }
}

TEST(TorchrunMainOptions, TheLauncherKnowsTheSameListForAbbreviationsAndHelp) {
  std::vector<std::string> names;
  for (const TorchrunOption& option : kTorchrunMainOptions) {
    names.push_back(option.spellings.size() > 1 && option.spellings[0].size() == 2
                        ? option.spellings[1]  // -m, --module
                        : option.spellings[0]);
  }
  EXPECT_EQ(names, TorchrunOptionNames());
}

TEST(TorchrunMainOptions, PrintCompletionPrintsAndExitsLikeHelp) {
  for (const std::string shell : {"bash", "zsh", "tcsh"}) {
    absl::StatusOr<CliOutcome> outcome =
        ParseCommandLine({"--print-completion", shell}, Devices(), ShellEnvironment());
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(outcome->action, CliOutcome::Action::kPrint);
    EXPECT_THAT(outcome->text, HasSubstr("--nproc-per-node")) << shell;
  }
  absl::StatusOr<CliOutcome> fish =
      ParseCommandLine({"--print-completion=fish"}, Devices(), ShellEnvironment());
  ASSERT_FALSE(fish.ok());
  EXPECT_EQ(fish.status().message(),
            "--print-completion='fish' is not valid: expected bash, zsh, tcsh");
}

TEST(TorchrunMainOptions, TheMigrationTableSaysWhatDdprunDoesWithEach) {
  const std::string guide =
      testing::ReadFile(std::string(DDPRUN_SOURCE_DIR) + "/docs/user-guide.md");
  const size_t table = guide.find("### Options");
  ASSERT_NE(table, std::string::npos);
  const std::string options = guide.substr(table, guide.find("### `--rdzv-conf` keys") - table);
  for (const TorchrunOption& option : kTorchrunMainOptions) {
    EXPECT_THAT(options, HasSubstr("`" + option.spellings.back() + "`"))
        << option.spellings.back() << " is not in the migration table of docs/user-guide.md";
  }
}

}  // namespace
}  // namespace ddprun
