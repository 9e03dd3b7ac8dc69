#include "launcher/help_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "launcher/torchrun_options.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n'); }

TEST(Wrap, BreaksAtSpacesWithAHangingIndent) {
  EXPECT_EQ(Wrap("one two three four", 2, 4, 10), "  one two\n    three\n    four\n");
  // A word longer than the line stands alone on its line.
  EXPECT_EQ(Wrap("a verylongword b", 0, 0, 6), "a\nverylongword\nb\n");
}

TEST(HelpWidth, ColumnsThenTheTerminalThen80WithinBounds) {
  EXPECT_EQ(HelpWidth("72", 120), 72);
  EXPECT_EQ(HelpWidth("", 90), 90);
  EXPECT_EQ(HelpWidth("x", 0), 80);
  EXPECT_EQ(HelpWidth("20", 0), 40);
  EXPECT_EQ(HelpWidth("300", 0), 100);
}

TEST(FormatHelp, EveryLineFitsTheWidth) {
  for (int width : {40, 60, 80, 100}) {
    for (HelpScope scope : {HelpScope::kEveryday, HelpScope::kAll}) {
      const std::string help = FormatHelp(DescribeOptions(), scope, width);
      for (const std::string& line : Lines(help)) {
        // Only a single word longer than the line may pass it (a long --rdzv-conf key).
        if (line.find(' ', line.find_first_not_of(' ')) == std::string::npos) continue;
        EXPECT_LE(line.size(), static_cast<size_t>(width)) << width << ": " << line;
      }
    }
  }
}

TEST(FormatHelp, ShortHelpIsTorchrunsEverydayOptionsOnOneScreen) {
  const std::string help = FormatHelp(DescribeOptions(), HelpScope::kEveryday, 80);
  EXPECT_LT(Lines(help).size(), 82u) << help;  // torchrun's --help: 82 lines
  for (const char* option : {"--nproc-per-node", "--nnodes", "--rdzv-endpoint", "--max-restarts",
                             "-m, --module", "--no-python", "--standalone", "-r, --redirects",
                             "--node-rank", "--master-addr", "--master-port", "--help-all"}) {
    EXPECT_THAT(help, HasSubstr(option));
  }
  EXPECT_THAT(help, HasSubstr("Usage: ddprun [OPTIONS] training_script [args...]"));
  EXPECT_THAT(help, Not(HasSubstr("--max-node-flaps")));  // ddprun's own: --help-all
  // Hangs are caught only with a check on: it says so, and which; and what ddprun adds that
  // a torchrun user would not look for.
  for (const char* said : {"Hangs are caught only with a check on", "--worker-heartbeat-timeout",
                           "TORCHELASTIC_ENABLE_FILE_TIMER=1", "--preload=torch", "--metrics-port",
                           "ddprun status|stop"}) {
    EXPECT_THAT(absl::StrReplaceAll(help, {{"\n", " "}}), HasSubstr(said));
  }
  EXPECT_THAT(help, Not(HasSubstr("--nproc_per_node ")));
}

TEST(FormatHelp, HelpAllHasEverySpellingItsVariableAndTheExitStatuses) {
  const std::vector<OptionDoc> options = DescribeOptions();
  const std::string help = FormatHelp(options, HelpScope::kAll, 80);
  for (const OptionDoc& doc : options) {
    for (const std::string& name : doc.names) EXPECT_THAT(help, HasSubstr(name));
    if (!doc.env.empty()) EXPECT_THAT(help, HasSubstr(doc.env));
  }
  for (const std::string& name : TorchrunOptionNames()) EXPECT_THAT(help, HasSubstr(name));
  EXPECT_THAT(help, HasSubstr("Exit status"));
  EXPECT_THAT(help, HasSubstr("Node health:"));
}

}  // namespace
}  // namespace ddprun
