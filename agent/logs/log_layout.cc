#include "agent/logs/log_layout.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ddprun {

std::string RunLogDir(const std::string& log_dir, const std::string& run_id) {
  return absl::StrCat(log_dir, "/", run_id);
}

std::string AttemptLogDir(const std::string& log_dir, const std::string& run_id, int attempt) {
  return absl::StrCat(RunLogDir(log_dir, run_id), "/attempt_", attempt);
}

WorkerLogPaths WorkerLogPathsFor(const std::string& log_dir, const std::string& run_id, int attempt,
                                 int local_rank) {
  WorkerLogPaths paths;
  paths.dir = absl::StrCat(AttemptLogDir(log_dir, run_id, attempt), "/", local_rank);
  paths.stdout_log = paths.dir + "/stdout.log";
  paths.stderr_log = paths.dir + "/stderr.log";
  paths.error_file = paths.dir + "/error.json";
  return paths;
}

std::string LinePrefix(const std::string& prefix_template, const LineSource& source) {
  if (prefix_template.empty()) return absl::StrCat("[", source.role_name, source.local_rank, "]:");
  return SafeSubstitute(prefix_template, {{"role_name", source.role_name},
                                          {"rank", absl::StrCat(source.rank)},
                                          {"local_rank", absl::StrCat(source.local_rank)},
                                          {"hostname", source.hostname}});
}

namespace {

// Python's identifier pattern for templates: [_a-z][_a-z0-9]*, any case, ASCII only.
bool IdentifierStart(char c) { return c == '_' || absl::ascii_isalpha(c); }
bool IdentifierPart(char c) { return c == '_' || absl::ascii_isalnum(c); }

}  // namespace

std::string SafeSubstitute(const std::string& text,
                           const std::map<std::string, std::string>& values) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '$' || i + 1 == text.size()) {
      out += text[i++];
      continue;
    }
    if (text[i + 1] == '$') {  // "$$": one "$"
      out += '$';
      i += 2;
      continue;
    }
    const bool braced = text[i + 1] == '{';
    const size_t start = i + (braced ? 2 : 1);
    size_t end = start;
    if (end < text.size() && IdentifierStart(text[end])) {
      while (end < text.size() && IdentifierPart(text[end])) ++end;
    }
    const bool closed = !braced || (end < text.size() && text[end] == '}');
    auto value = values.find(text.substr(start, end - start));
    if (end == start || !closed || value == values.end()) {
      out += text[i++];  // not a placeholder, or one without a value: kept as written
      continue;
    }
    out += value->second;
    i = end + (braced ? 1 : 0);
  }
  return out;
}

}  // namespace ddprun
