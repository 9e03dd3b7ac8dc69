#include "launcher/option_prefixes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A few of ddprun's options, declared as cli.cc declares them.
const std::vector<KnownOption>& Known() {
  static const auto* known = new std::vector<KnownOption>{
      {{"-h", "--help"}, false, true},
      {{"--help-all"}, false, false},
      {{"--nnodes"}, true, true},
      {{"--nproc-per-node", "--nproc_per_node"}, true, true},
      {{"--max-restarts", "--max_restarts"}, true, true},
      {{"--max-node-failures", "--max_node_failures"}, true, false},
      {{"--max-node-flaps", "--max_node_flaps"}, true, false},
      {{"--node-rank", "--node_rank"}, true, true},
      {{"--no-python", "--no_python"}, false, true},
      {{"--node-cooldown", "--node_cooldown"}, true, false},
      {{"-r", "--redirects"}, true, true},
      {{"--rdzv-endpoint", "--rdzv_endpoint"}, true, true},
      {{"--rdzv-id", "--rdzv_id"}, true, true},
      {{"--standalone"}, false, true},
      {{"--local-addr", "--local_addr"}, true, true},
      {{"--local-ranks-filter", "--local_ranks_filter"}, true, true},
      {{"--local-rank", "--local_rank"}, true, false, "read LOCAL_RANK"},
      {{"--use-env", "--use_env"}, false, false, "drop it"},
  };
  return *known;
}

std::vector<std::string> Expand(const std::vector<std::string>& args) {
  absl::StatusOr<std::vector<std::string>> out = ExpandOptionPrefixes(args, Known());
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<std::string>{};
}

std::string Refusal(const std::vector<std::string>& args) {
  absl::StatusOr<std::vector<std::string>> out = ExpandOptionPrefixes(args, Known());
  return out.ok() ? "" : std::string(out.status().message());
}

// Issue 48: `--local-rank=1`, which scripts written for torch.distributed.launch pass, was
// taken for a prefix of --local-ranks-filter (rank 0's output left the console). A
// launch-era option, or a prefix naming only it, is refused with its hint; a prefix of
// ours that is longer, or shared with one of torchrun's options, is still ours.
TEST(ExpandOptionPrefixes, ALaunchEraOptionIsRefusedNotTakenForAPrefixOfOurs) {
  for (const std::string& given :
       {"--local-rank=1", "--local_rank", "--use-env", "--use_env", "--use", "--use_e"}) {
    EXPECT_THAT(Refusal({given, "1", "train.py"}),
                HasSubstr(" is an option of torch.distributed.launch, not of torchrun or ddprun"))
        << given;
  }
  EXPECT_THAT(Refusal({"--local-rank=1", "train.py"}), HasSubstr("read LOCAL_RANK"));
  EXPECT_THAT(Expand({"--local-ranks=0", "train.py"}),
              ElementsAre("--local-ranks-filter=0", "train.py"));
  EXPECT_THAT(Expand({"--local-r=0", "train.py"}),
              ElementsAre("--local-ranks-filter=0", "train.py"));
  EXPECT_THAT(Expand({"train.py", "--local-rank=1"}), ElementsAre("train.py", "--local-rank=1"))
      << "the script's own arguments are its own";
  EXPECT_NE(ClosestOption("--local-rnk", Known()), "--local-rank") << "never suggested";
}

TEST(ExpandOptionPrefixes, AUniquePrefixBecomesTheOption) {
  EXPECT_THAT(Expand({"--max_restart=2", "--nproc_per_nod", "8", "t.py"}),
              ElementsAre("--max-restarts=2", "--nproc-per-node", "8", "t.py"));
  EXPECT_THAT(Expand({"--stand", "t.py"}), ElementsAre("--standalone", "t.py"));
}

TEST(ExpandOptionPrefixes, ExactSpellingsAndShortOptionsStayAsTheyAre) {
  EXPECT_THAT(Expand({"--nnodes", "2", "--nproc_per_node=4", "-r", "3", "t.py"}),
              ElementsAre("--nnodes", "2", "--nproc_per_node=4", "-r", "3", "t.py"));
}

TEST(ExpandOptionPrefixes, DashAndUnderscoreAreDifferentCharactersAsInArgparse) {
  // --max-r is a prefix of --max-restarts only; --max_r of --max_restarts only.
  EXPECT_THAT(Expand({"--max-r=1", "t.py"}), ElementsAre("--max-restarts=1", "t.py"));
  EXPECT_THAT(Expand({"--max_r=1", "t.py"}), ElementsAre("--max-restarts=1", "t.py"));
}

TEST(ExpandOptionPrefixes, SeveralSpellingsOfOneOptionAreThatOption) {
  // argparse calls --nproc ambiguous (two strings); they are one option.
  EXPECT_THAT(Expand({"--nproc=2", "t.py"}), ElementsAre("--nproc-per-node=2", "t.py"));
}

TEST(ExpandOptionPrefixes, TorchrunsOptionWinsOverDdprunsOwn) {
  // torchrun has --max-restarts only: a torchrun script's --max- means it.
  EXPECT_THAT(Expand({"--max-=1", "t.py"}), ElementsAre("--max-restarts=1", "t.py"));
  EXPECT_THAT(Expand({"--h"}), ElementsAre("--help"));
}

TEST(ExpandOptionPrefixes, AnAmbiguousPrefixNamesTheCandidates) {
  EXPECT_EQ(Refusal({"--no", "t.py"}),
            "ambiguous option: --no could match --node-rank, --no-python, --node-cooldown; "
            "write more of its name");
  EXPECT_THAT(Refusal({"--max-node-f=1", "t.py"}),
              HasSubstr("--max-node-f could match --max-node-failures, --max-node-flaps"));
}

TEST(ExpandOptionPrefixes, NothingAfterTheScriptOrADoubleDashIsTouched) {
  EXPECT_THAT(Expand({"--nnodes", "1", "t.py", "--no", "--max_r=3"}),
              ElementsAre("--nnodes", "1", "t.py", "--no", "--max_r=3"));
  EXPECT_THAT(Expand({"--", "--no"}), ElementsAre("--", "--no"));
  // A value that looks like an option is a value: --rdzv-id takes it.
  EXPECT_THAT(Expand({"--rdzv_i", "--no", "t.py"}), ElementsAre("--rdzv-id", "--no", "t.py"));
}

TEST(ExpandOptionPrefixes, AnUnknownOptionIsLeftForTheParserToName) {
  EXPECT_THAT(Expand({"--bogus", "--max_r=1"}), ElementsAre("--bogus", "--max_r=1"));
}

TEST(ClosestOption, NamesTheOptionATypoMeant) {
  EXPECT_EQ(ClosestOption("--nproc-per-nodes=2", Known()), "--nproc-per-node");
  EXPECT_EQ(ClosestOption("--maxrestarts", Known()), "--max-restarts");
  EXPECT_EQ(ClosestOption("--max_restartz", Known()), "--max-restarts");
  EXPECT_EQ(ClosestOption("--bogus", Known()), "");
  EXPECT_EQ(ClosestOption("-x", Known()), "");
}

}  // namespace
}  // namespace ddprun
