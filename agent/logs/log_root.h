#pragma once
// The folder a run's worker files go under (--log-dir, or a private temporary one), made
// when the agent starts and tidied when it ends.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ddprun {

struct LogRoot {
  std::string path;        // "/dev/null": no files
  bool temporary = false;  // made by ddprun (no --log-dir): removed if nothing in it is kept
  int attempt_offset = 0;  // attempts of earlier runs with the same id and --log-dir
  // The run's folder (<path>/<run_id>), 0700 and this user's, held open from the start:
  // everything under it is made relative to it (MakeDirsBelow), so that swapping it for a
  // link later sends nothing elsewhere. Empty with /dev/null.
  std::string run_path;
  std::shared_ptr<const UniqueFd> run_dir;

  /// Chooses the attempt_<n> folder of `round`'s attempt: the round, after the attempts of
  /// earlier runs; never one this run used before, whatever a master numbers its rounds
  /// (a restarted master continues from what agents tell it, but folders must not be reused).
  int BeginAttempt(int64_t round);
  /// The folder BeginAttempt chose for `round`, while it is among the last few rounds.
  std::optional<int> AttemptOf(int64_t round) const;

 private:
  static constexpr size_t kRoundsKept = 8;
  int last_attempt_ = -1;
  std::map<int64_t, int> attempt_of_round_;
};

/// Writes `text` to the file `name` in `round`'s attempt folder (BeginAttempt), replacing
/// what was there, below the held run folder; its path. "" when there is no such folder
/// (no log files, or a round too old).
absl::StatusOr<std::string> WriteAttemptFile(const LogRoot& root, const std::string& run_id,
                                             int64_t round, const std::string& name,
                                             const std::string& text);

/// `log_dir` empty: a new folder under $TMPDIR (or /tmp). Else it is created if need be, and
/// attempts already in it for `run_id` are skipped (with a warning), never overwritten.
/// Refused: a folder on the way that anyone may write to without the sticky bit (as /tmp
/// has), and a run folder that is a link or another user's.
absl::StatusOr<LogRoot> OpenLogRoot(const std::string& log_dir, const std::string& run_id);

/// A temporary root keeps only what holds something (log files -r/-t/--local-ranks-filter
/// asked for, error files); a run that left nothing leaves no folder.
void CleanUpLogRoot(const LogRoot& root, const std::string& run_id);

}  // namespace ddprun
