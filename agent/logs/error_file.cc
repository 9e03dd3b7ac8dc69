#include "agent/logs/error_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/logs/json_fields.h"
#include "agent/logs/line_assembler.h"
#include "common/small_file.h"
#include "common/unique_fd.h"
#include "google/protobuf/util/json_util.h"

namespace ddprun {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

std::optional<absl::Time> ParseTimestamp(const Value& value) {
  double seconds = 0;
  if (value.has_number_value()) {
    seconds = value.number_value();
  } else if (!value.has_string_value() || !absl::SimpleAtod(value.string_value(), &seconds)) {
    return std::nullopt;
  }
  // The worker writes this file: a NaN, infinite or absurd value must not make it the
  // earliest failure (or overflow the conversion).
  constexpr double kLatestSecond = 1e11;  // ~ year 5138
  if (!(seconds >= 0 && seconds <= kLatestSecond)) return std::nullopt;
  return absl::FromUnixMicros(static_cast<int64_t>(seconds * 1e6));
}

}  // namespace

absl::StatusOr<WorkerError> ParseWorkerErrorFile(const std::string& json) {
  Struct root;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &root);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", parsed.ToString()));
  }
  const Value* message = JsonField(root, "message");
  if (message == nullptr) {
    return absl::InvalidArgumentError("no \"message\" field (expected torch's error-file format)");
  }
  WorkerError report;
  if (message->has_string_value()) {
    report.message = message->string_value();
    return report;
  }
  if (!message->has_struct_value()) {
    return absl::InvalidArgumentError("\"message\" is neither a string nor an object");
  }
  const Struct& body = message->struct_value();
  if (const Value* text = JsonField(body, "message"); text != nullptr && text->has_string_value()) {
    report.message = text->string_value();
  }
  if (const Value* extra = JsonField(body, "extraInfo");
      extra != nullptr && extra->has_struct_value()) {
    const Struct& info = extra->struct_value();
    if (const Value* stack = JsonField(info, "py_callstack"); stack && stack->has_string_value()) {
      report.traceback = stack->string_value();
    }
    if (const Value* ts = JsonField(info, "timestamp"); ts != nullptr)
      report.timestamp = ParseTimestamp(*ts);
  }
  return report;
}

absl::StatusOr<WorkerError> ReadWorkerErrorFileBelow(int base_fd, const std::string& base,
                                                     const std::string& path) {
  constexpr size_t kMaxErrorFile = 1024 * 1024;  // torch's are a traceback and a message
  absl::StatusOr<UniqueFd> fd = OpenForReadBelow(base_fd, base, path);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<WorkerError> report =
      ParseWorkerErrorFile(ReadFdPart(fd->get(), 0, kMaxErrorFile));
  if (!report.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", report.status().message()));
  }
  return report;
}

}  // namespace ddprun

namespace ddprun {

std::vector<std::string> LastLinesOfFile(const std::string& path, size_t count) {
  constexpr std::streamoff kMaxRead = 64 * 1024;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > kMaxRead ? size - kMaxRead : 0;
  in.seekg(start);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LineTail tail(count);
  LineAssembler assembler;
  const LineAssembler::Emit add = [&tail](std::string_view line) { tail.Add(line); };
  assembler.Feed(text, add);
  assembler.Flush(add);
  return std::vector<std::string>(tail.lines().begin(), tail.lines().end());
}

}  // namespace ddprun
