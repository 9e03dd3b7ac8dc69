#pragma once
// Reading the error file a worker may write at TORCHELASTIC_ERROR_FILE: torch's JSON format
// from torch.distributed.elastic.multiprocessing.errors (@record):
//   {"message": {"message": "<Type>: <msg>",
//                "extraInfo": {"py_callstack": "<traceback>", "timestamp": "<epoch s>"}}}
// or the same with "message" a plain string.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddprun {

struct WorkerError {
  std::string message;
  std::string traceback;                // py_callstack, when present
  std::optional<absl::Time> timestamp;  // when the worker recorded the error
};

/// Parses the JSON text of an error file.
absl::StatusOr<WorkerError> ParseWorkerErrorFile(const std::string& json);
/// A worker's error file `path`, read below the run folder `base` held open as `base_fd`,
/// never through a symbolic link (a folder swapped meanwhile must not make the agent read a
/// file elsewhere); at most 1 MiB. Absent: NotFound.
absl::StatusOr<WorkerError> ReadWorkerErrorFileBelow(int base_fd, const std::string& base,
                                                     const std::string& path);

}  // namespace ddprun

namespace ddprun {
/// The last `count` lines of the file at `path` (reads at most its last 64 KiB).
std::vector<std::string> LastLinesOfFile(const std::string& path, size_t count);
}  // namespace ddprun
