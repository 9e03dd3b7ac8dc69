// Every bad input: exit status 2, one line on stderr that names the option and the value,
// nothing started, never a crash or stack trace.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct BadInput {
  std::string name;
  std::vector<std::string> args;
  std::string must_mention;
};

void PrintTo(const BadInput& input, std::ostream* os) { *os << input.name; }

class CliErrors : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliErrors, ExitTwoWithOneLineNamingTheProblem) {
  std::vector<std::string> argv = {kDdprun};
  argv.insert(argv.end(), GetParam().args.begin(), GetParam().args.end());
  ProcessResult r = RunProcess(argv, {{"PYTHON_EXEC", std::nullopt}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, StartsWith("ddprun: error: "));
  EXPECT_EQ(CountLinesContaining(r.err, ""), 2) << "more than one line:\n" << r.err;  // line + ""
  EXPECT_THAT(r.err, HasSubstr(GetParam().must_mention));
}

const std::string kScript = DDPRUN_SOURCE_DIR "/tests/integration/data/noop.py";
const std::string kNotExecutable = DDPRUN_SOURCE_DIR "/tests/integration/data/noop.py";

INSTANTIATE_TEST_SUITE_P(
    BadInputs, CliErrors,
    ::testing::Values(
        BadInput{"nnodes_zero", {"--nnodes=0", kScript}, "--nnodes='0'"},
        BadInput{"nnodes_reversed", {"--nnodes=3:2", kScript}, "--nnodes='3:2'"},
        BadInput{"nnodes_text", {"--nnodes", "x", kScript}, "--nnodes='x'"},
        BadInput{"nproc_negative", {"--nproc-per-node=-1", kScript}, "--nproc-per-node='-1'"},
        BadInput{"nproc_text", {"--nproc_per_node", "abc", kScript}, "--nproc-per-node='abc'"},
        BadInput{"gpu_without_gpus", {"--nproc-per-node=gpu", kScript}, "no GPU is visible"},
        BadInput{"rdzv_conf_no_equals", {"--rdzv-conf=join_timeout", kScript}, "--rdzv-conf="},
        BadInput{
            "rdzv_conf_empty_value", {"--rdzv-conf", "a=1,b=", kScript}, "'b=' is not key=value"},
        BadInput{
            "unknown_option", {"--no-such-option", kScript}, "unknown option '--no-such-option'"},
        BadInput{"unknown_option_near_one",
                 {"--nproc-per-nodes=2", kScript},
                 "unknown option '--nproc-per-nodes=2'; did you mean --nproc-per-node?"},
        BadInput{"ambiguous_prefix", {"--no", kScript}, "ambiguous option: --no could match"},
        BadInput{"launch_local_rank",
                 {"--local-rank=1", kScript},
                 "--local-rank is an option of torch.distributed.launch, not of torchrun or "
                 "ddprun: ddprun, like torchrun, gives each worker its local rank in LOCAL_RANK"},
        BadInput{"launch_local_rank_underscore",
                 {"--local_rank", "0", kScript},
                 "--local_rank is an option of torch.distributed.launch"},
        BadInput{"launch_use_env", {"--use_env", kScript}, "always passes the local rank"},
        BadInput{"missing_script", {"--nproc-per-node=2"}, "missing training_script"},
        BadInput{"script_not_found", {"/no/such/train.py"}, "'/no/such/train.py' is not a file"},
        BadInput{"no_python_missing", {"--no-python", "/no/such/prog"}, "does not exist"},
        BadInput{"no_python_not_executable", {"--no-python", kNotExecutable}, "is not executable"},
        BadInput{
            "no_python_not_on_path", {"--no-python", "no-such-program-xyz"}, "not found on PATH"},
        BadInput{"module_and_no_python", {"-m", "--no-python", "x"}, "cannot be used together"},
        BadInput{"preload_not_a_module", {"--preload=torch,x y", kScript}, "--preload='torch,x y'"},
        BadInput{"preload_empty_entry", {"--preload=torch,", kScript}, "--preload='torch,'"},
        BadInput{"preload_without_python",
                 {"--preload=torch", "--no-python", "/bin/true"},
                 "--preload and --no-python cannot be used together"},
        BadInput{"max_restarts_text", {"--max-restarts=many", kScript}, "--max-restarts='many'"},
        BadInput{"redirects_out_of_range", {"-r", "4", kScript}, "--redirects='4'"},
        BadInput{"tee_bad_map", {"--tee=0:1,x", kScript}, "--tee='0:1,x'"},
        BadInput{
            "filter_out_of_range", {"--local-ranks-filter=3", kScript}, "--local-ranks-filter='3'"},
        BadInput{"bad_signal", {"--signals-to-handle=SIGFOO", kScript}, "SIGFOO"},
        BadInput{"bad_timeout", {"--shutdown-timeout=-1", kScript}, "--shutdown-timeout='-1'"},
        BadInput{
            "bad_backend", {"--rdzv-backend=zookeeper", kScript}, "--rdzv-backend='zookeeper'"},
        BadInput{"bad_start_method", {"--start-method=thread", kScript}, "--start-method='thread'"},
        BadInput{"bad_master_port", {"--master-port=70000", kScript}, "--master-port='70000'"},
        BadInput{"missing_value", {"--nnodes"}, "option --nnodes needs a value"},
        BadInput{"multi_node_c10d_without_endpoint",
                 {"--nnodes=2", "--rdzv-backend=c10d", kScript},
                 "needs --rdzv-endpoint"},
        BadInput{"unparsable_rdzv_conf_value",
                 {"--rdzv-conf=join_timeout=soon", kScript},
                 "--rdzv-conf join_timeout='soon'"}),
    [](const ::testing::TestParamInfo<BadInput>& info) { return info.param.name; });

TEST(CliErrorsEnv, BadPetDefaultIsNamed) {
  ProcessResult r = RunProcess({kDdprun, kScript}, {{"PET_NPROC_PER_NODE", "zero"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--nproc-per-node='zero'"));
}

TEST(CliErrorsEnv, BadLogLevelIsNamed) {
  ProcessResult r = RunProcess({kDdprun, kScript}, {{"LOGLEVEL", "LOUD"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("LOGLEVEL='LOUD'"));
}

// torchrun ignores --rdzv-conf keys it does not read (another backend's, a stray quote): a
// command line that carries one runs, with one line naming the key and the nearest one.
TEST(CliCompat, AnUnknownRdzvConfKeyIsIgnoredWithOneLineAndTheJobRuns) {
  ProcessResult r = RunProcess({kDdprun, "--rdzv-conf=joint_timeout=5,'read_timeout=60", kScript});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(CountLinesContaining(r.err,
                                 "--rdzv-conf key 'joint_timeout' is not known with "
                                 "--rdzv-backend=static: ignored, as torchrun ignores "
                                 "keys it does not read; did you mean join_timeout?"),
            1)
      << r.err;
  EXPECT_EQ(CountLinesContaining(r.err, "--rdzv-conf key ''read_timeout' is not known"), 1)
      << r.err;
}

TEST(CliErrorsEnv, MissingPythonIsNamed) {
  ProcessResult r = RunProcess({kDdprun, kScript}, {{"PYTHON_EXEC", "/no/python3"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'/no/python3'"));
  EXPECT_THAT(r.err, HasSubstr("PYTHON_EXEC"));
}

TEST(CliInfo, HelpAllListsEveryOptionWithDefaultAndEnv) {
  ProcessResult r = RunProcess({kDdprun, "--help-all"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--nnodes",
                             "--nproc-per-node, --nproc_per_node",
                             "--rdzv-backend",
                             "--rdzv-endpoint",
                             "--rdzv-id",
                             "--rdzv-conf",
                             "--standalone",
                             "--max-restarts",
                             "--monitor-interval",
                             "--start-method",
                             "--role",
                             "-m, --module",
                             "--no-python",
                             "--run-path",
                             "--log-dir",
                             "-r, --redirects",
                             "-t, --tee",
                             "--local-ranks-filter",
                             "--node-rank",
                             "--master-addr",
                             "--master-port",
                             "--local-addr",
                             "--signals-to-handle",
                             "--shutdown-timeout",
                             "--exit-barrier-timeout",
                             "PET_NPROC_PER_NODE",
                             "Exit status"}) {
    EXPECT_THAT(r.out, HasSubstr(option));
  }
}

// Launch scripts written for torchrun carry argparse's abbreviations.
TEST(CliInfo, TorchrunsAbbreviationsRunTheJob) {
  ProcessResult r = RunProcess({kDdprun, "--nproc_per_nod", "2", "--max_restart=0", "--no_pyt",
                                "/bin/sh", "-c", "echo world=$WORLD_SIZE"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(CountLinesContaining(r.out, "world=2"), 2) << r.out;
}

TEST(CliInfo, HelpIsShortAndWrappedToTheTerminal) {
  ProcessResult r = RunProcess({kDdprun, "--help"}, {{"COLUMNS", "80"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_LE(CountLinesContaining(r.out, ""), 82) << r.out;  // torchrun's --help: 82 lines
  EXPECT_THAT(r.out, HasSubstr("--help-all"));
  r = RunProcess({kDdprun, "--help"}, {{"COLUMNS", "60"}});
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    const bool one_word = line.find(' ', line.find_first_not_of(' ')) == absl::string_view::npos;
    if (!one_word) {
      EXPECT_LE(line.size(), 60u) << line;  // a path longer than that stays whole
    }
  }
}

TEST(CliInfo, HelpWorksWhateverLogLevelSays) {
  ProcessResult r = RunProcess({kDdprun, "--help"}, {{"LOGLEVEL", "LOUD"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--nproc-per-node"));
}

TEST(CliInfo, Version) {
  ProcessResult r = RunProcess({kDdprun, "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("ddprun "));
}

TEST(CliInfo, StartMethodIsAcceptedWithANotice) {
  ProcessResult r = RunProcess({kDdprun, "--start-method=fork", "--no-python", "/bin/true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--start-method=fork has no effect"));
}

}  // namespace
}  // namespace ddprun::testing
