#pragma once
// HangReportFiles: where every rank was, as files in the attempt's folder (docs/hangs.md):
// this node's own report at once, the master's merged one when it comes (it replaces it),
// and the stacks asked for with SIGUSR2; each summary on stderr once. An observer of the
// agent: it writes and says, it decides nothing.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/logs/log_root.h"
#include "rendezvous/protocol_words.h"
#include "rendezvous/stack_report.h"

namespace ddprun {

class HangReportFiles {
 public:
  HangReportFiles(const LogRoot& root, std::string run_id)
      : root_(root), run_id_(std::move(run_id)) {}

  /// This node's ranks after a hang in `round` (`cause`: the rank taken for hung here; empty:
  /// one on another node), in case the master's report of every node never comes. True
  /// when it lacks other nodes' ranks: the master's merged report is to be awaited.
  bool WriteOwn(const Assignment& round, const std::string& cause, std::vector<RankStack> stacks);
  /// The master's merged report of `round` (sent once: complete, or what came in time).
  void WriteMerged(int64_t round, const std::string& text, const std::string& summary);
  /// Stacks asked for while the job runs on (SIGUSR2), in a file of their own, named by `now`.
  void WriteOnRequest(const Assignment& round, std::vector<RankStack> stacks, absl::Time now);
  /// The hang report written last ("" none): the failure summary names it.
  const std::string& path() const { return path_; }

 private:
  void Write(int64_t round, const std::string& text);
  void Say(int64_t round, const std::string& summary);

  const LogRoot& root_;
  const std::string run_id_;
  std::string path_;
  int64_t said_round_ = -1;  // the round whose summary is on stderr
};

}  // namespace ddprun
