// Rules of the source tree. The include rules each folder's README states: a part may
// include only the parts below it (common <- rendezvous <- agent <- launcher; the worker SDK
// beside the agent), and nothing but the worker SDK includes CUDA or NCCL; and the size of a
// production file.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

namespace fs = std::filesystem;

// The folders of ddprun that production code may name in an #include.
const std::set<std::string> kParts = {"common", "rendezvous", "agent", "launcher", "worker_sdk",
                                      "tests",  "bench",      "fuzz",  "examples"};

// Which parts each folder's production files may include (its own included).
const std::map<std::string, std::set<std::string>> kMayInclude = {
    {"common", {"common"}},
    {"rendezvous", {"common", "rendezvous"}},
    {"agent", {"common", "rendezvous", "agent"}},
    {"launcher", {"common", "rendezvous", "agent", "launcher"}},
    {"worker_sdk", {"common", "rendezvous", "worker_sdk"}},
};

bool IsSource(const fs::path& p) { return p.extension() == ".cc" || p.extension() == ".h"; }

// The production files of `folder`: everything but its tests.
std::vector<fs::path> ProductionFiles(const std::string& folder) {
  std::vector<fs::path> files;
  const fs::path root = fs::path(DDPRUN_SOURCE_DIR) / folder;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    if (it->is_directory() && it->path().filename() == "tests") {
      it.disable_recursion_pending();
    } else if (it->is_regular_file() && IsSource(it->path())) {
      files.push_back(it->path());
    }
  }
  return files;
}

// Every `#include "..."` and `#include <...>` target of `file`.
std::vector<std::string> Includes(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "#include ")) continue;
    const std::string target = line.substr(9);
    if (target.size() > 2) out.push_back(target.substr(1, target.find_first_of("\">", 1) - 1));
  }
  return out;
}

// What `file`, a production file of `folder`, includes that the folder's rule forbids.
std::vector<std::string> ViolationsIn(const fs::path& file, const std::string& folder) {
  std::vector<std::string> bad;
  const std::set<std::string>& allowed = kMayInclude.at(folder);
  for (const std::string& target : Includes(file)) {
    const std::string part = target.substr(0, target.find('/'));
    const bool cuda = absl::StartsWith(target, "cuda") || absl::StartsWith(target, "nccl");
    if ((kParts.count(part) > 0 && allowed.count(part) == 0) || (cuda && folder != "worker_sdk")) {
      bad.push_back(absl::StrCat(file.filename().string(), " includes ", target));
    }
  }
  return bad;
}

std::vector<std::string> Violations(const std::string& folder) {
  std::vector<std::string> bad;
  for (const fs::path& file : ProductionFiles(folder)) {
    for (std::string& v : ViolationsIn(file, folder)) bad.push_back(std::move(v));
  }
  return bad;
}

TEST(LayeringTest, EveryFolderIncludesOnlyWhatItsReadmeAllows) {
  for (const auto& [folder, allowed] : kMayInclude) {
    EXPECT_FALSE(ProductionFiles(folder).empty()) << folder << ": no sources found";
    EXPECT_THAT(Violations(folder), ::testing::IsEmpty())
        << folder << " may include only " << absl::StrJoin(allowed, ", ");
  }
}

TEST(LayeringTest, TheCheckReportsWhatARuleForbids) {
  // Else the test above could pass on a reader that sees nothing.
  testing::TempDir dir;
  const fs::path file =
      dir.Write("x.cc",
                "#include <nccl.h>\n#include \"launcher/cli.h\"\n"
                "#include \"rendezvous/kv_store.h\"\n#include \"absl/time/time.h\"\n");
  EXPECT_THAT(ViolationsIn(file, "agent"),
              ::testing::ElementsAre("x.cc includes nccl.h", "x.cc includes launcher/cli.h"));
  EXPECT_THAT(ViolationsIn(file, "launcher"), ::testing::ElementsAre("x.cc includes nccl.h"));
  EXPECT_THAT(ViolationsIn(file, "common"),
              ::testing::ElementsAre("x.cc includes nccl.h", "x.cc includes launcher/cli.h",
                                     "x.cc includes rendezvous/kv_store.h"));
}

TEST(SourceSizeTest, NoProductionFileHoldsMoreThan500Lines) {
  // Past that a file holds more than one module: split it (the issue that set the limit).
  for (const auto& [folder, allowed] : kMayInclude) {
    for (const fs::path& file : ProductionFiles(folder)) {
      std::ifstream in(file);
      int lines = 0;
      for (std::string line; std::getline(in, line);) ++lines;
      EXPECT_LE(lines, 500) << fs::relative(file, DDPRUN_SOURCE_DIR).string();
    }
  }
}

}  // namespace
}  // namespace ddprun
