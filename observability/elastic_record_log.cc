#include "observability/elastic_record_log.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/unique_fd.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

// One code point of `text` at `i` (advanced past it); U+FFFD for a byte that does not start
// valid UTF-8, as Python would never hold one.
uint32_t NextCodePoint(absl::string_view text, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  int length = b0 < 0x80           ? 1
               : (b0 >> 5) == 0x6  ? 2
               : (b0 >> 4) == 0xe  ? 3
               : (b0 >> 3) == 0x1e ? 4
                                   : 0;
  if (length == 0 || i + length > text.size()) {
    ++i;
    return 0xfffd;
  }
  uint32_t cp = length == 1 ? b0 : b0 & (0x7f >> length);
  for (int k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) {
      ++i;
      return 0xfffd;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  i += length;
  return cp;
}

}  // namespace

absl::StatusOr<RecordLogSettings> ParseEventLogHandler(const std::string& value) {
  RecordLogSettings settings;
  if (value == "null") return settings;
  if (value == "console") {
    settings.kind = RecordLogSettings::Kind::kConsole;
    return settings;
  }
  if (absl::StartsWith(value, "file:") && value.size() > 5) {
    settings.kind = RecordLogSettings::Kind::kFile;
    settings.path = value.substr(5);
    return settings;
  }
  return absl::InvalidArgumentError(absl::StrCat("--event-log-handler='", value,
                                                 "' is not valid: expected null, console or "
                                                 "file:PATH"));
}

std::string PythonJsonString(absl::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const uint32_t cp = NextCodePoint(text, i);
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
    }
    if (cp >= 0x20 && cp < 0x7f) {
      out += static_cast<char>(cp);
    } else if (cp < 0x10000) {
      absl::StrAppendFormat(&out, "\\u%04x", cp);
    } else {  // a UTF-16 surrogate pair, as Python writes it
      const uint32_t v = cp - 0x10000;
      absl::StrAppendFormat(&out, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
    }
  }
  return out + "\"";
}

std::string PythonFloat(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // The shortest digits that read back to the same double, as Python's repr.
  char buf[40];
  int precision = 1;
  for (; precision < 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  std::snprintf(buf, sizeof buf, "%.*e", precision - 1, value);
  const std::string text = buf;  // [-]d[.ddd]e[+-]XX
  const size_t e = text.find('e');
  const bool negative = text[0] == '-';
  std::string digits;
  for (size_t k = negative ? 1 : 0; k < e; ++k) {
    if (text[k] != '.') digits += text[k];
  }
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  absl::StrAppendFormat(&out, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

std::string PythonJsonValue(const RecordValue& value) {
  if (std::holds_alternative<std::nullptr_t>(value)) return "null";
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&value)) return PythonFloat(*d);
  return PythonJsonString(std::get<std::string>(value));
}

std::string PythonJsonObject(const std::vector<std::pair<std::string, RecordValue>>& fields) {
  std::string out = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", PythonJsonString(fields[i].first), ": ",
                    PythonJsonValue(fields[i].second));
  }
  return out + "}";
}

std::string SerializeRecord(const ElasticRecord& record) {
  return absl::StrCat("{\"name\": ", PythonJsonString(record.name),
                      ", \"source\": ", PythonJsonString(record.source),
                      ", \"timestamp\": 0, \"metadata\": ", PythonJsonObject(record.metadata), "}");
}

absl::StatusOr<RecordLog> RecordLog::Open(const RecordLogSettings& settings) {
  RecordLog log;
  log.settings_ = settings;
  if (settings.kind == RecordLogSettings::Kind::kFile) {
    absl::StatusOr<UniqueFd> file = OpenForAppend(settings.path);
    if (!file.ok()) {
      return absl::Status(
          file.status().code(),
          absl::StrCat("--event-log-handler=file:", settings.path, ": ", file.status().message()));
    }
    log.file_ = std::move(*file);
  }
  return log;
}

void RecordLog::Record(const ElasticRecord& record) {
  if (!enabled()) return;
  // One write per line: O_APPEND keeps lines of several agents sharing the file whole.
  const std::string line = SerializeRecord(record) + "\n";
  const int fd = settings_.kind == RecordLogSettings::Kind::kFile ? file_.get() : STDERR_FILENO;
  if (absl::Status s = WriteAll(fd, line); !s.ok()) {
    spdlog::warn("cannot write an event ({}): {}", record.name, std::string(s.message()));
  }
}

}  // namespace ddprun
