#include "launcher/cli_values.h"

#include <signal.h>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

DeviceCounts DevicesWith(int gpus, int cpus) {
  DeviceCounts devices;
  devices.count_gpus = [gpus]() -> absl::StatusOr<int> { return gpus; };
  devices.cpu_count = cpus;
  return devices;
}

// ---------------------------------------------------------------------------- --nnodes

TEST(ParseNnodesTest, SingleCountGivesEqualMinAndMax) {
  absl::StatusOr<NodeRange> range = ParseNnodes("1");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->min_nodes, 1);
  EXPECT_EQ(range->max_nodes, 1);

  range = ParseNnodes("4");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->min_nodes, 4);
  EXPECT_EQ(range->max_nodes, 4);
}

TEST(ParseNnodesTest, RangeGivesMinAndMax) {
  absl::StatusOr<NodeRange> range = ParseNnodes("2:5");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->min_nodes, 2);
  EXPECT_EQ(range->max_nodes, 5);

  range = ParseNnodes("1:1");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->min_nodes, 1);
  EXPECT_EQ(range->max_nodes, 1);
}

class ParseNnodesBadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParseNnodesBadTest, IsInvalidAndNamesOptionAndValue) {
  const std::string value = GetParam();
  absl::StatusOr<NodeRange> range = ParseNnodes(value);
  ASSERT_FALSE(range.ok()) << "accepted --nnodes=" << value;
  EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(range.status().message()), HasSubstr("--nnodes"));
  EXPECT_THAT(std::string(range.status().message()), HasSubstr("'" + value + "'"));
}

INSTANTIATE_TEST_SUITE_P(BadValues, ParseNnodesBadTest,
                         ::testing::Values("0", "3:2", "x", "", "-1", "0:2", "1:", ":2", "1:2:3",
                                           " 1", "+1", "1.5"));

// ---------------------------------------------------------------------------- --nproc-per-node

TEST(ParseNprocPerNodeTest, PositiveInteger) {
  absl::StatusOr<int> n = ParseNprocPerNode("1", DevicesWith(0, 8));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  n = ParseNprocPerNode("16", DevicesWith(0, 8));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 16);
}

TEST(ParseNprocPerNodeTest, CpuUsesCpuCount) {
  absl::StatusOr<int> n = ParseNprocPerNode("cpu", DevicesWith(4, 8));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 8);
}

TEST(ParseNprocPerNodeTest, CpuIsAtLeastOne) {
  absl::StatusOr<int> n = ParseNprocPerNode("cpu", DevicesWith(0, 0));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
}

TEST(ParseNprocPerNodeTest, GpuUsesGpuCount) {
  absl::StatusOr<int> n = ParseNprocPerNode("gpu", DevicesWith(4, 8));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 4);
}

TEST(ParseNprocPerNodeTest, GpuWithNoGpuIsAnError) {
  absl::StatusOr<int> n = ParseNprocPerNode("gpu", DevicesWith(0, 8));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("--nproc-per-node=gpu"));
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("no GPU"));
}

TEST(ParseNprocPerNodeTest, AutoUsesGpusWhenThereAreSome) {
  absl::StatusOr<int> n = ParseNprocPerNode("auto", DevicesWith(2, 8));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2);
}

TEST(ParseNprocPerNodeTest, AutoWithNoGpuFallsBackToCpuCount) {
  absl::StatusOr<int> n = ParseNprocPerNode("auto", DevicesWith(0, 6));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 6);
}

TEST(ParseNprocPerNodeTest, GpuCountFailureIsReported) {
  DeviceCounts devices;
  devices.count_gpus = []() -> absl::StatusOr<int> { return absl::InternalError("probe crashed"); };
  devices.cpu_count = 4;
  for (const std::string value : {"gpu", "auto"}) {
    absl::StatusOr<int> n = ParseNprocPerNode(value, devices);
    ASSERT_FALSE(n.ok()) << value;
    EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(n.status().message()), HasSubstr("--nproc-per-node=" + value));
    EXPECT_THAT(std::string(n.status().message()), HasSubstr("probe crashed"));
  }
}

TEST(ParseNprocPerNodeTest, NumberAndCpuDoNotCountGpus) {
  int calls = 0;
  DeviceCounts devices;
  devices.count_gpus = [&calls]() -> absl::StatusOr<int> {
    ++calls;
    return 1;
  };
  devices.cpu_count = 2;
  ASSERT_TRUE(ParseNprocPerNode("3", devices).ok());
  ASSERT_TRUE(ParseNprocPerNode("cpu", devices).ok());
  EXPECT_EQ(calls, 0);
}

class ParseNprocBadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParseNprocBadTest, IsInvalidAndNamesOptionAndValue) {
  const std::string value = GetParam();
  absl::StatusOr<int> n = ParseNprocPerNode(value, DevicesWith(2, 8));
  ASSERT_FALSE(n.ok()) << "accepted --nproc-per-node=" << value;
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("--nproc-per-node"));
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("'" + value + "'"));
}

INSTANTIATE_TEST_SUITE_P(BadValues, ParseNprocBadTest,
                         ::testing::Values("-1", "abc", "0", "", "GPU", "2x", " 2", "+2",
                                           "99999999999"));

// ---------------------------------------------------------------------------- -r / -t

TEST(ParseStdSpecTest, SingleValueAppliesToAllRanks) {
  for (int streams = 0; streams <= 3; ++streams) {
    absl::StatusOr<StdSpec> spec = ParseStdSpec("--redirects", std::to_string(streams));
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->all_ranks, streams);
    EXPECT_THAT(spec->per_rank, IsEmpty());
    EXPECT_EQ(spec->ForRank(5), streams);
  }
}

TEST(ParseStdSpecTest, PerRankList) {
  absl::StatusOr<StdSpec> spec = ParseStdSpec("--tee", "0:1,1:2,3:3");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->all_ranks, kStdNone);
  EXPECT_THAT(spec->per_rank, ElementsAre(Pair(0, 1), Pair(1, 2), Pair(3, 3)));
  EXPECT_EQ(spec->ForRank(0), kStdOut);
  EXPECT_EQ(spec->ForRank(1), kStdErr);
  EXPECT_EQ(spec->ForRank(2), kStdNone);
  EXPECT_EQ(spec->ForRank(3), kStdBoth);
}

TEST(ParseStdSpecTest, MultiDigitRankIsAccepted) {
  absl::StatusOr<StdSpec> spec = ParseStdSpec("--redirects", "12:3");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->per_rank, ElementsAre(Pair(12, 3)));
  EXPECT_EQ(spec->ForRank(12), kStdBoth);
}

TEST(ParseStdSpecTest, DuplicateRankNamesTheRank) {
  absl::StatusOr<StdSpec> spec = ParseStdSpec("--redirects", "0:1,0:2");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("--redirects"));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("'0:1,0:2'"));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("0 is given twice"));
}

class ParseStdSpecBadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParseStdSpecBadTest, IsInvalidAndNamesOptionAndValue) {
  const std::string value = GetParam();
  for (const std::string option : {"--redirects", "--tee"}) {
    absl::StatusOr<StdSpec> spec = ParseStdSpec(option, value);
    ASSERT_FALSE(spec.ok()) << "accepted " << option << "=" << value;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(option));
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr("'" + value + "'"));
  }
}

INSTANTIATE_TEST_SUITE_P(BadValues, ParseStdSpecBadTest,
                         ::testing::Values("4", "-1", "0:4", "0:1,0:2", "", "x", "0:", ":1", "0:1,",
                                           "-1:1", "0:1:2", "0:-1", "a:1"));

// ---------------------------------------------------------------------------- --rdzv-conf

TEST(ParseRdzvConfTest, EmptyIsNoSettings) {
  absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf("");
  ASSERT_TRUE(conf.ok()) << conf.status();
  EXPECT_THAT(*conf, IsEmpty());
}

TEST(ParseRdzvConfTest, KeyValuePairs) {
  absl::StatusOr<std::map<std::string, std::string>> conf =
      ParseRdzvConf("join_timeout=600,last_call_timeout=30");
  ASSERT_TRUE(conf.ok()) << conf.status();
  EXPECT_THAT(*conf, ElementsAre(Pair("join_timeout", "600"), Pair("last_call_timeout", "30")));
}

TEST(ParseRdzvConfTest, ValueMayContainEquals) {
  absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf("a=b=c");
  ASSERT_TRUE(conf.ok()) << conf.status();
  EXPECT_THAT(*conf, ElementsAre(Pair("a", "b=c")));
}

class ParseRdzvConfBadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParseRdzvConfBadTest, IsInvalidAndNamesOptionAndValue) {
  const std::string value = GetParam();
  absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf(value);
  ASSERT_FALSE(conf.ok()) << "accepted --rdzv-conf=" << value;
  EXPECT_EQ(conf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(conf.status().message()), HasSubstr("--rdzv-conf"));
  EXPECT_THAT(std::string(conf.status().message()), HasSubstr("'" + value + "'"));
}

INSTANTIATE_TEST_SUITE_P(BadValues, ParseRdzvConfBadTest,
                         ::testing::Values("a", "a=", "=b", "a=1,a=2", "a=1,", ",a=1", "="));

TEST(ParseRdzvConfTest, RepeatedKeyIsNamed) {
  absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf("a=1,a=2");
  ASSERT_FALSE(conf.ok());
  EXPECT_THAT(std::string(conf.status().message()), HasSubstr("'a' is repeated"));
}

TEST(ParseRdzvConfTest, MalformedItemIsNamed) {
  absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf("x=1,oops");
  ASSERT_FALSE(conf.ok());
  EXPECT_THAT(std::string(conf.status().message()), HasSubstr("'oops' is not key=value"));
}

// ---------------------------------------------------------------------------- --signals-to-handle

TEST(ParseSignalListTest, NamesInOrder) {
  absl::StatusOr<std::vector<int>> signals = ParseSignalList("SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_THAT(*signals, ElementsAre(SIGTERM, SIGINT, SIGHUP, SIGQUIT));
}

TEST(ParseSignalListTest, SigPrefixCaseAndBlanksAreOptional) {
  absl::StatusOr<std::vector<int>> signals = ParseSignalList("usr1, SIGUSR2 ,sigterm");
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_THAT(*signals, ElementsAre(SIGUSR1, SIGUSR2, SIGTERM));
}

TEST(ParseSignalListTest, DuplicatesAreDropped) {
  absl::StatusOr<std::vector<int>> signals = ParseSignalList("SIGTERM,TERM,SIGINT");
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_THAT(*signals, ElementsAre(SIGTERM, SIGINT));
}

class ParseSignalListBadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParseSignalListBadTest, IsInvalidAndNamesOptionAndValue) {
  const std::string value = GetParam();
  absl::StatusOr<std::vector<int>> signals = ParseSignalList(value);
  ASSERT_FALSE(signals.ok()) << "accepted --signals-to-handle=" << value;
  EXPECT_EQ(signals.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(signals.status().message()), HasSubstr("--signals-to-handle"));
  EXPECT_THAT(std::string(signals.status().message()), HasSubstr("'" + value + "'"));
}

INSTANTIATE_TEST_SUITE_P(BadValues, ParseSignalListBadTest,
                         ::testing::Values("SIGFOO", "SIGTERM,NOPE", "", ",", "SIGKILL", "SIGSTOP",
                                           "SIGCHLD", "SIGSEGV", "15"));

// ---------------------------------------------------------------------------- --local-ranks-filter

TEST(ParseLocalRanksFilterTest, RanksBelowNproc) {
  absl::StatusOr<std::set<int>> ranks = ParseLocalRanksFilter("0,2", 4);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_THAT(*ranks, UnorderedElementsAre(0, 2));

  ranks = ParseLocalRanksFilter("3, 1,1", 4);
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_THAT(*ranks, UnorderedElementsAre(1, 3));
}

class ParseLocalRanksFilterBadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParseLocalRanksFilterBadTest, IsInvalidAndNamesOptionAndValue) {
  const std::string value = GetParam();
  absl::StatusOr<std::set<int>> ranks = ParseLocalRanksFilter(value, 4);
  ASSERT_FALSE(ranks.ok()) << "accepted --local-ranks-filter=" << value;
  EXPECT_EQ(ranks.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ranks.status().message()), HasSubstr("--local-ranks-filter"));
  EXPECT_THAT(std::string(ranks.status().message()), HasSubstr("'" + value + "'"));
  EXPECT_THAT(std::string(ranks.status().message()), HasSubstr("0 to 3"));
}

INSTANTIATE_TEST_SUITE_P(BadValues, ParseLocalRanksFilterBadTest,
                         ::testing::Values("4", "-1", "x", "", "0,", "0,,1", "1:2"));

// ---------------------------------------------------------------------------- numbers

TEST(ParseNonNegativeIntTest, AcceptsZeroAndPositive) {
  absl::StatusOr<int> n = ParseNonNegativeInt("--max-restarts", "0");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0);
  n = ParseNonNegativeInt("--max-restarts", "42");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 42);
}

TEST(ParseNonNegativeIntTest, RejectsOthersNamingOptionAndValue) {
  for (const std::string value : {"-1", "", "x", "1.5", " 1", "+1", "1 "}) {
    absl::StatusOr<int> n = ParseNonNegativeInt("--node-rank", value);
    ASSERT_FALSE(n.ok()) << "accepted '" << value << "'";
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(n.status().message()), HasSubstr("--node-rank"));
    EXPECT_THAT(std::string(n.status().message()), HasSubstr("'" + value + "'"));
  }
}

TEST(ParseSecondsTest, WholeAndFractionalSeconds) {
  absl::StatusOr<absl::Duration> d = ParseSeconds("--shutdown-timeout", "30");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, absl::Seconds(30));
  d = ParseSeconds("--monitor-interval", "0.25");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, absl::Milliseconds(250));
  d = ParseSeconds("--shutdown-timeout", "0");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, absl::ZeroDuration());
}

TEST(ParseSecondsTest, PositiveExcludesZero) {
  absl::StatusOr<absl::Duration> d = ParseSeconds("--monitor-interval", "0", /*positive=*/true);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("--monitor-interval"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("'0'"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("> 0"));
}

TEST(ParseSecondsTest, RejectsOthersNamingOptionAndValue) {
  for (const std::string value : {"-1", "", "x", "nan", "inf", "1e10", "5s"}) {
    absl::StatusOr<absl::Duration> d = ParseSeconds("--shutdown-timeout", value);
    ASSERT_FALSE(d.ok()) << "accepted '" << value << "'";
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("--shutdown-timeout"));
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("'" + value + "'"));
  }
}

TEST(ParseSignalListTest, PythonAliasNamesAreAccepted) {
  absl::StatusOr<std::vector<int>> signals = ParseSignalList("SIGIOT,SIGPOLL");
  ASSERT_TRUE(signals.ok()) << signals.status();
  EXPECT_THAT(*signals, ::testing::ElementsAre(SIGABRT, SIGIO));
}

TEST(ParseSecondsTest, SurroundingBlanksAreRejectedLikeWholeNumbers) {
  EXPECT_FALSE(ParseSeconds("--shutdown-timeout", " 5").ok());
  EXPECT_FALSE(ParseSeconds("--shutdown-timeout", "5 ").ok());
}

TEST(ParseEndpointTest, HostPortForms) {
  auto plain = ParseEndpoint("node1", 29400);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->host, "node1");
  EXPECT_EQ(plain->port, 29400);
  auto with_port = ParseEndpoint("10.0.0.1:1234", 29400);
  ASSERT_TRUE(with_port.ok());
  EXPECT_EQ(with_port->host, "10.0.0.1");
  EXPECT_EQ(with_port->port, 1234);
  auto v6 = ParseEndpoint("[::1]:0", 29400);
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  auto v6_default = ParseEndpoint("[fe80::1]", 29400);
  ASSERT_TRUE(v6_default.ok());
  EXPECT_EQ(v6_default->port, 29400);
}

TEST(ParseEndpointTest, BadFormsNameTheOption) {
  for (const char* bad :
       {"", ":80", "host:", "host:x", "host:70000", "::1", "[::1", "[]:80", "[::1]80", "host:-1"}) {
    auto endpoint = ParseEndpoint(bad, 29400);
    ASSERT_FALSE(endpoint.ok()) << bad;
    EXPECT_THAT(std::string(endpoint.status().message()), ::testing::HasSubstr("--rdzv-endpoint"));
  }
}

}  // namespace
}  // namespace ddprun
