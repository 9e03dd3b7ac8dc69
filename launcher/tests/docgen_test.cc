// ddprun(1) and the bash completion, as built (launcher/docgen.cc): every option that
// --help shows is in both, the page renders without groff warnings, and the completion
// completes names, values and the script's files.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_replace.h"
#include "launcher/cli.h"
#include "launcher/completion.h"
#include "launcher/option_docs.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::ddprun::testing::ProcessResult;
using ::ddprun::testing::ReadFile;
using ::ddprun::testing::RunProcess;
using ::ddprun::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// What the completion offers for the words typed so far (the last one being completed).
std::string Complete(const std::string& words) {
  ProcessResult r = RunProcess(
      {"/bin/bash", "-c",
       "source \"$0\"; COMP_WORDS=($1); [[ \"$1\" == *' ' ]] && COMP_WORDS+=(''); "
       "COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _ddprun; printf '%s\\n' \"${COMPREPLY[@]}\"",
       BASH_COMPLETION, words});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(DocgenTest, TheManPageHasEveryOptionWithItsVariableAndHelp) {
  const std::string page = ReadFile(MAN_PAGE);
  ASSERT_FALSE(page.empty());
  const std::vector<OptionDoc> options = DescribeOptions();
  ASSERT_GT(options.size(), 25u);
  for (const OptionDoc& option : options) {
    for (const std::string& name : option.names) {
      EXPECT_THAT(page, HasSubstr(absl::StrReplaceAll(name, {{"-", "\\-"}}))) << name;
    }
    if (!option.env.empty()) {
      EXPECT_THAT(page, HasSubstr(option.env));
    }
  }
  EXPECT_THAT(page, HasSubstr("75       the rendezvous failed"));  // the footer of --help
}

TEST(DocgenTest, TheManPageRendersWithoutWarnings) {
  // -P-cbou: plain text, no overstrike for bold and underline.
  ProcessResult r = RunProcess({"/usr/bin/groff", "-man", "-Tascii", "-P-cbou", "-ww", MAN_PAGE});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("--nproc-per-node=VALUE, --nproc_per_node=VALUE"));
  EXPECT_THAT(r.out, HasSubstr("--standalone\n"));  // a flag: no value
}

TEST(DocgenTest, BashCompletesOptionsValuesAndTheScriptsFiles) {
  const std::string names = Complete("ddprun --nproc");
  EXPECT_THAT(names, HasSubstr("--nproc-per-node\n"));
  EXPECT_THAT(names, HasSubstr("--nproc_per_node\n"));
  EXPECT_THAT(Complete("ddprun --rdzv-backend "), HasSubstr("c10d\nstatic\n"));
  EXPECT_THAT(Complete("ddprun --nproc_per_node "), HasSubstr("gpu\ncpu\nauto\n"));
  EXPECT_EQ(Complete("ddprun --master-port "), "\n");  // a number: nothing to offer
  // From the training script on, the words are the script's: no ddprun options.
  EXPECT_THAT(Complete("ddprun --nnodes 2 train.py --n"), Not(HasSubstr("--nnodes")));
  // The commands, and their own options.
  EXPECT_THAT(Complete("ddprun st"), HasSubstr("status\nstop\n"));
  EXPECT_THAT(Complete("ddprun status --"), HasSubstr("--json\n"));
  EXPECT_THAT(Complete("ddprun stop --r"),
              HasSubstr("--rdzv-endpoint\n--rdzv-id\n--rdzv-conf\n--reason\n"));
  EXPECT_THAT(Complete("ddprun stop --"), Not(HasSubstr("--nproc-per-node")));
}

TEST(DocgenTest, PrintCompletionPrintsAWorkingBashCompletion) {
  // What `ddprun --print-completion bash` prints, sourced as a user would.
  TempDir dir;
  const std::string script = dir.Write("ddprun.bash", *CompletionScript("bash"));
  ProcessResult r =
      RunProcess({"/bin/bash", "-c",
                  "source \"$0\"; COMP_WORDS=(ddprun --numa-binding ''); COMP_CWORD=2; _ddprun; "
                  "printf '%s\\n' \"${COMPREPLY[@]}\"",
                  script});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "node\nsocket\nexclusive\ncore-complex\n");
  EXPECT_FALSE(CompletionScript("fish").has_value());
}

// What zsh shows on Tab after `words`, from an interactive zsh with the installed _ddprun.
std::string ZshComplete(const std::string& words) {
  const std::string dir =
      std::string(ZSH_COMPLETION).substr(0, std::string(ZSH_COMPLETION).rfind('/'));
  ProcessResult r = RunProcess(
      {"/usr/bin/zsh", "-f", std::string(DDPRUN_SOURCE_DIR) + "/tests/integration/zsh_complete.zsh",
       words, dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(DocgenTest, ZshCompletesOptionsAndTheirValues) {
  EXPECT_THAT(ZshComplete("ddprun --rdzv-backend "), AllOf(HasSubstr("c10d"), HasSubstr("static")));
  EXPECT_THAT(ZshComplete("ddprun --numa-binding="),
              AllOf(HasSubstr("core-complex"), HasSubstr("exclusive")));
  EXPECT_THAT(ZshComplete("ddprun --nproc"), HasSubstr("--nproc-per-node"));
  EXPECT_THAT(ZshComplete("ddprun --log-line"), HasSubstr("--log-line-prefix-template"));
  EXPECT_THAT(ZshComplete("ddprun stop --r"), HasSubstr("--reason"));
  EXPECT_THAT(ZshComplete("ddprun status --j"), HasSubstr("--json"));
}

TEST(DocgenTest, TcshAcceptsItsCompletion) {
  TempDir dir;
  const std::string script = dir.Write("ddprun.tcsh", *CompletionScript("tcsh"));
  ProcessResult r =
      RunProcess({"/usr/bin/tcsh", "-f", "-c", "source " + script + "; complete ddprun"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("n/--numa-binding/(node socket exclusive core-complex)/"));
  EXPECT_THAT(r.out, HasSubstr("nproc-per-node"));
}

}  // namespace
}  // namespace ddprun
