#pragma once
// Scenario scripts for the pure state machines (agent/tests/testdata/, rendezvous/tests/
// testdata/), in the manner of etcd raft's interaction tests: each *.txt file is a script
// of events, one a line, each followed by what the machine must emit for it:
//
//   # a comment
//   signal SIGTERM            <- an event, handed to ScenarioMachine::Apply
//   > stop-workers SIGTERM    <- the lines Apply must return, in order
//
// A mismatch fails the test naming the file and the event, and prints the whole transcript
// as the machine ran it. DDPRUN_REWRITE_SCENARIOS=1 writes that transcript into the file
// instead (for a new script: review every line before committing it).

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace ddprun::testing {

/// One run of a script: a fresh machine per file.
class ScenarioMachine {
 public:
  virtual ~ScenarioMachine() = default;
  /// Applies one event line; returns what the machine emitted, described.
  virtual std::vector<std::string> Apply(const std::string& line) = 0;
};

/// The "key=value" words of `words` from index `from` on (a bare word maps to "").
inline std::map<std::string, std::string> ScenarioArgs(const std::vector<std::string>& words,
                                                       size_t from) {
  std::map<std::string, std::string> args;
  for (size_t i = from; i < words.size(); ++i) {
    std::vector<std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
    args[kv[0]] = kv.size() > 1 ? kv[1] : "";
  }
  return args;
}

/// args[key] as a number, `otherwise` when absent.
inline int ScenarioInt(const std::map<std::string, std::string>& args, const std::string& key,
                       int otherwise) {
  int n = otherwise;
  if (auto it = args.find(key); it != args.end()) {
    EXPECT_TRUE(absl::SimpleAtoi(it->second, &n)) << key << "=" << it->second;
  }
  return n;
}

/// Runs every *.txt script in `dir` (at least `at_least` of them) on a machine from `make`.
inline void RunScenarioScripts(const std::filesystem::path& dir, size_t at_least,
                               const std::function<std::unique_ptr<ScenarioMachine>()>& make) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), at_least) << "the scenarios in " << dir << " are missing";
  for (const std::filesystem::path& file : files) {
    const std::string name = file.filename().string();
    const bool failed_before = ::testing::Test::HasFailure();
    std::unique_ptr<ScenarioMachine> machine = make();
    std::ifstream in(file);
    std::vector<std::string> expected, actual, transcript;
    std::string line, event;
    auto check = [&] {
      if (!event.empty()) {
        EXPECT_EQ(absl::StrJoin(actual, "\n"), absl::StrJoin(expected, "\n"))
            << name << ": after '" << event << "'";
      }
      expected.clear();
      event.clear();
    };
    while (std::getline(in, line)) {
      if (absl::StartsWith(line, "> ")) {
        expected.push_back(line.substr(2));
        continue;
      }
      check();
      transcript.push_back(line);
      if (line.empty() || absl::StartsWith(line, "#")) continue;
      event = line;
      actual = machine->Apply(line);
      for (const std::string& a : actual) transcript.push_back("> " + a);
    }
    check();
    if (::getenv("DDPRUN_REWRITE_SCENARIOS") != nullptr) {
      std::ofstream(file) << absl::StrJoin(transcript, "\n") << "\n";
    } else if (!failed_before && ::testing::Test::HasFailure()) {
      std::cerr << "--- " << name << " as the machine runs it:\n"
                << absl::StrJoin(transcript, "\n") << "\n";
    }
  }
}

}  // namespace ddprun::testing
