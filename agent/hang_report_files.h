#pragma once
// HangReportFiles: where every rank was, as files in the attempt's folder (docs/hangs.md):
// this node's own report at once, the master's merged one when it comes (it replaces it),
// and the stacks asked for with SIGUSR2; each summary on stderr once. An observer of the
// agent's moments: it writes and says, it decides nothing.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/logs/log_root.h"
#include "agent/moments.h"
#include "rendezvous/protocol_words.h"
#include "rendezvous/stack_report.h"

namespace ddprun {

/// This node's report of a hang in `round` (`cause`: the rank taken for hung here; empty:
/// one on another node). Incomplete (stack_report.h's Complete) when other nodes' ranks are
/// missing: the master's merged report is then to be awaited.
HangReport OwnHangReport(const Assignment& round, const std::string& cause,
                         std::vector<RankStack> stacks);
/// The stacks asked for with SIGUSR2 while the job runs on.
HangReport RequestedStacksReport(const Assignment& round, std::vector<RankStack> stacks);

/// An observer of the agent's moments: kStacksTaken writes this node's report (its summary
/// when it is complete), kHangReportArrived the master's in its place, kStacksAsked a file of
/// its own named by the time it is written.
class HangReportFiles : public MomentObserver {
 public:
  HangReportFiles(const LogRoot& root, std::string run_id)
      : root_(root), run_id_(std::move(run_id)) {}

  void See(const AgentMoment& moment) override;
  /// The hang report written last ("" none): the failure summary names it.
  const std::string& path() const { return path_; }

 private:
  void WriteOwn(const HangReport& report);
  void WriteMerged(int64_t round, const std::string& text, const std::string& summary);
  void WriteOnRequest(const HangReport& report, absl::Time now);
  void Write(int64_t round, const std::string& text);
  void Say(int64_t round, const std::string& summary);

  const LogRoot& root_;
  const std::string run_id_;
  std::string path_;
  int64_t said_round_ = -1;  // the round whose summary is on stderr
};

}  // namespace ddprun
