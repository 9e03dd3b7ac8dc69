#pragma once
// torchelastic's structured records (torch calls them events: torch.distributed.elastic.events;
// in ddprun "event" is a state machine's input), written byte for byte
// as torch writes them, so that log pipelines built for torchrun parse ddprun's too: one JSON
// object per line, `json.dumps(asdict(Event))` with Python's defaults (", " and ": ", ASCII
// only, floats as Python's repr). --event-log-handler says where: `null` (nowhere, torchrun's
// default), `console` (stderr, as torch's StreamHandler), or `file:PATH` (appended; ddprun
// only). docs/events.md lists the events and their fields.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"

namespace ddprun {

struct RecordLogSettings {
  enum class Kind { kNull, kConsole, kFile };
  Kind kind = Kind::kNull;
  std::string path;  // kFile
};

/// --event-log-handler's value: null, console or file:PATH.
absl::StatusOr<RecordLogSettings> ParseEventLogHandler(const std::string& value);

/// A metadata value, as torch's EventMetadataValue: str, int, float, bool or None.
using RecordValue = std::variant<std::nullptr_t, bool, int64_t, double, std::string>;

/// torch's Event: `source` is "AGENT" or "WORKER"; the timestamp is always 0, as torch's.
struct ElasticRecord {
  std::string name;
  std::string source;
  std::vector<std::pair<std::string, RecordValue>> metadata;  // in order
};

/// The JSON text Python's json.dumps gives a str (ensure_ascii: \uXXXX, surrogate pairs).
std::string PythonJsonString(absl::string_view text);
/// Python's repr of a float, as json.dumps writes it (the shortest round-trip digits).
std::string PythonFloat(double value);
/// json.dumps of one value, or of a list of values / a dict, with Python's separators.
std::string PythonJsonValue(const RecordValue& value);
std::string PythonJsonObject(const std::vector<std::pair<std::string, RecordValue>>& fields);
/// Event.serialize(): {"name": ..., "source": ..., "timestamp": 0, "metadata": {...}}.
std::string SerializeRecord(const ElasticRecord& record);

/// Where the agent's records go. Writes are whole lines, never interleaved with others'.
class RecordLog {
 public:
  /// Opens the file (O_APPEND, created 0644) for kFile.
  static absl::StatusOr<RecordLog> Open(const RecordLogSettings& settings);
  RecordLog() = default;

  bool enabled() const { return settings_.kind != RecordLogSettings::Kind::kNull; }
  void Record(const ElasticRecord& record);

 private:
  RecordLogSettings settings_;
  UniqueFd file_;
};

}  // namespace ddprun
