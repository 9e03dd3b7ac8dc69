#include "launcher/rdzv_conf_keys.h"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/backends.h"
#include "launcher/option_docs.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

// The first column's `key`s of the table under "### --rdzv-conf keys" in docs/cli.md, but for
// the rows of a backend this build lacks ("`etcd-v3` only: ..." without DDPRUN_ETCD).
std::set<std::string> KeysInDocs() {
  std::ifstream in(std::string(DDPRUN_SOURCE_DIR) + "/docs/cli.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t begin = doc.find("### --rdzv-conf keys");
  const size_t end = doc.find("\n### ", begin + 1);
  std::set<std::string> keys;
  for (absl::string_view line : absl::StrSplit(doc.substr(begin, end - begin), '\n')) {
    if (!absl::StartsWith(line, "| `")) continue;
    const std::vector<absl::string_view> columns = absl::StrSplit(line, " | ");
    if (columns.size() > 2 && absl::StartsWith(columns[2], "`")) {
      const absl::string_view backend = columns[2].substr(1, columns[2].find('`', 1) - 1);
      if (absl::StartsWith(columns[2].substr(backend.size() + 2), " only:") &&
          FindRendezvousBackend(std::string(backend)) == nullptr) {
        continue;
      }
    }
    absl::string_view first = line.substr(2, line.find(" |", 2) - 2);
    for (absl::string_view quoted : absl::StrSplit(first, ", ")) {
      keys.insert(std::string(absl::StripPrefix(absl::StripSuffix(quoted, "`"), "`")));
    }
  }
  return keys;
}

TEST(RdzvConfKeysTest, EveryKeyHasItsRowInDocsCliMdAndEveryRowIsAKey) {
  std::set<std::string> declared;
  for (const RdzvConfKey& key : RdzvConfKeys()) {
    EXPECT_TRUE(declared.insert(key.name).second) << key.name << " is declared twice";
  }
  for (const RendezvousBackend& backend : RendezvousBackends()) {
    if (!backend.listed) continue;  // another name for a listed one
    for (const RdzvConfKey& key : backend.rdzv_conf_keys) {
      EXPECT_TRUE(declared.insert(key.name).second) << key.name << " is declared twice";
    }
  }
  EXPECT_EQ(KeysInDocs(), declared);
}

TEST(RdzvConfKeysTest, TheRendezvousSettingsMarkedAsKeysAreKeysWithTheirDefaults) {
  std::map<std::string, std::string> defaults;
  for (const RdzvConfKey& key : RdzvConfKeys()) defaults[key.name] = key.default_value;
  EXPECT_EQ(defaults["join_timeout"], "600");
  EXPECT_EQ(defaults["last_call_timeout"], "30");
  EXPECT_EQ(defaults["keep_alive_interval"], "5");
  EXPECT_EQ(defaults["keep_alive_max_attempt"], "3");
  EXPECT_EQ(defaults.count("max_restarts"), 0u) << "an option, not a key";
}

TEST(RdzvConfKeysTest, TheSettingsTablesBoundsAreTheKeysBounds) {
  AgentConfig config;
  EXPECT_THAT(ApplyRdzvConf({{"keep_alive_max_attempt", "0"}}, config).message(),
              HasSubstr("keep_alive_max_attempt='0' is not valid: expected a whole number in "
                        "[1, 1048576]"));
  EXPECT_THAT(ApplyRdzvConf({{"keep_alive_interval", "0.0001"}}, config).message(),
              HasSubstr("expected seconds from 0.001 to 31536000 (1ms to 8760h)"));
  EXPECT_THAT(ApplyRdzvConf({{"join_timeout", "40000000"}}, config).message(),
              HasSubstr("join_timeout='40000000' is not valid: expected seconds from 0.001 to "
                        "31536000"));
  ASSERT_TRUE(ApplyRdzvConf({{"keep_alive_interval", "0.0015"}}, config).ok());
  EXPECT_EQ(config.rendezvous.keep_alive_interval, absl::Milliseconds(1))
      << "what the wire carries, so that the hosting agent and its joiners agree";
  ASSERT_TRUE(
      ApplyRdzvConf({{"keep_alive_max_attempt", "7"}, {"join_timeout", "1.5"}}, config).ok());
  EXPECT_EQ(config.rendezvous.keep_alive_max_attempt, 7);
  EXPECT_EQ(config.rendezvous.join_timeout, absl::Milliseconds(1500));
}

TEST(RdzvConfKeysTest, AnUnknownKeyFarFromAnyListsEveryKeyAndTorchrunsKeysAreAccepted) {
  AgentConfig config;
  std::vector<std::string> ignored;
  ASSERT_TRUE(ApplyRdzvConf({{"zzz_zzz_zzz", "5"}}, config, {}, &ignored).ok());
  ASSERT_EQ(ignored.size(), 1u);
  const std::string message = ignored[0];
  for (const RdzvConfKey& key : RdzvConfKeys()) {
    if (key.torchrun_only) {
      EXPECT_TRUE(ApplyRdzvConf({{key.name, "x"}}, config).ok()) << key.name;
    } else {
      EXPECT_THAT(message, HasSubstr(key.name));
    }
  }
  EXPECT_THAT(message,
              HasSubstr("read_timeout, is_host, token_file, tls_cert, tls_key and tls_ca"));
}

// An unknown key is ignored, as torchrun ignores keys it does not read, with one line that
// names it and the nearest known key (or, with none near, the known ones). A backend's own
// keys are known only with it.
TEST(RdzvConfKeysTest, AnUnknownKeyIsIgnoredWithALineAndABackendsOwnKeysAreKnownOnlyWithIt) {
  AgentConfig config;
  config.rdzv_backend = "c10d";
  std::string seen;
  const std::vector<RdzvConfKey> own = {
      {"lease", "10", "how long a lease lasts",
       [&seen](const std::string&, const std::string& value, AgentConfig&) {
         seen = value;
         return absl::OkStatus();
       }}};
  std::vector<std::string> ignored;
  ASSERT_TRUE(ApplyRdzvConf({{"lease", "3"}, {"joint_timeout", "9"}}, config, {}, &ignored).ok());
  EXPECT_EQ(seen, "") << "not applied";
  ASSERT_EQ(ignored.size(), 2u);
  EXPECT_THAT(ignored[0], HasSubstr("--rdzv-conf key 'joint_timeout' is not known with "
                                    "--rdzv-backend=c10d: ignored, as torchrun ignores keys it "
                                    "does not read; did you mean join_timeout?"));
  EXPECT_EQ(config.rendezvous.join_timeout, AgentConfig().rendezvous.join_timeout);
  EXPECT_THAT(ignored[1], HasSubstr("'lease' is not known"));
  EXPECT_THAT(ignored[1], HasSubstr("(known: join_timeout, "));
  config.rdzv_backend = "etcd-like";
  ASSERT_TRUE(ApplyRdzvConf({{"lease", "3"}, {"join_timeout", "9"}}, config, own).ok());
  EXPECT_EQ(seen, "3");
  EXPECT_EQ(config.rendezvous.join_timeout, absl::Seconds(9)) << "every backend's keys too";
  ignored.clear();
  ASSERT_TRUE(ApplyRdzvConf({{"lase", "3"}}, config, own, &ignored).ok());
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_THAT(ignored[0], HasSubstr("did you mean lease?"));
  EXPECT_FALSE(ApplyRdzvConf({{"lease", "3"}, {"join_timeout", "soon"}}, config, own).ok())
      << "a value that cannot be parsed stays an error";
}

TEST(RdzvConfKeysTest, HelpAndCompletionAreMadeFromTheKeys) {
  for (const OptionDoc& option : DescribeOptions()) {
    if (option.names[0] != "--rdzv-conf") continue;
    EXPECT_THAT(option.help, HasSubstr("the keys: end of --help-all"));
    EXPECT_THAT(option.completion, ::testing::Contains("keep_alive_max_attempt="));
    EXPECT_THAT(HelpFooter(),
                HasSubstr("  keep_alive_max_attempt  heartbeats missed in a row before the master "
                          "drops a node [default: 3]\n"));
    EXPECT_THAT(HelpFooter(), HasSubstr("  is_host                 whether this agent"));
    EXPECT_THAT(HelpFooter(), HasSubstr("  timeout, store_type     torchrun's"));
    return;
  }
  FAIL() << "no --rdzv-conf in DescribeOptions";
}

}  // namespace
}  // namespace ddprun
