// The agent's shell stays a shell: ElasticAgent grew back from 600 to 688 lines and 16
// members once, each new observer fed by hand where something happened. These bounds hold
// it: at most 600 lines of source, at most 15 data members, and its observers fed through
// the one stream of moments (agent/moments.h), not by name (`seen_.` at most 5 times).
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// The data members a class declares at its own level (two spaces in, a name ending in `_`,
// no parentheses: not a function), in the order declared.
std::vector<std::string> DataMembers(const std::string& header) {
  static const std::regex kMember(
      R"(^  [A-Za-z][^()/;]*[ &*]([a-z][a-z0-9_]*_)( = [^;]*|\{[^;]*\})?;)");
  std::vector<std::string> members;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kMember)) members.push_back(m[1].str());
  }
  return members;
}

int Occurrences(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

TEST(ShellBounds, TheCountsSeeWhatTheyCount) {
  // Else the bounds below could pass on a reader that sees nothing.
  const std::string header =
      "class A {\n"
      " public:\n"
      "  int Size() const { return size_; }\n"
      "  void Run();\n"
      " private:\n"
      "  struct Inner {\n"
      "    int nested_;\n"
      "  };\n"
      "  const Config& config_;\n"
      "  std::optional<Thing> thing_;  // why\n"
      "  std::unique_ptr<Pool> pool_ = nullptr;\n"
      "  Observers seen_{1, 2};\n"
      "  static constexpr int kLimit = 3;\n"
      "};\n";
  EXPECT_THAT(DataMembers(header), ::testing::ElementsAre("config_", "thing_", "pool_", "seen_"));
  EXPECT_EQ(Lines(header), 14);
  EXPECT_EQ(Occurrences("seen_.a(); seen_.b(); unseen_ seen_", "seen_."), 2);
}

TEST(ShellBounds, ElasticAgentIsAtMost600LinesAnd15Members) {
  const fs::path agent = fs::path(DDPRUN_SOURCE_DIR) / "agent";
  const std::string source = Read(agent / "elastic_agent.cc");
  const std::string header = Read(agent / "elastic_agent.h");
  ASSERT_FALSE(source.empty());
  ASSERT_FALSE(header.empty());
  EXPECT_LE(Lines(source), 600) << "agent/elastic_agent.cc: move what is not the shell's out";
  const std::vector<std::string> members = DataMembers(header);
  EXPECT_GE(members.size(), 5u)
      << "the member reader found too few: has the header's form changed?";
  EXPECT_LE(members.size(), 15u) << ::testing::PrintToString(members);
  EXPECT_LE(Occurrences(source, "seen_."), 5)
      << "observers are fed through moments_ (agent/moments.h), not by name";
}

}  // namespace
}  // namespace ddprun
