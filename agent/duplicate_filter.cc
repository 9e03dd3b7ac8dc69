#include "agent/duplicate_filter.h"

#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/log_format.h"
#include "spdlog/spdlog.h"

namespace ddprun {

bool DuplicateFilter::Matches(std::string_view line) const {
  for (const std::string& filter : filters_) {
    if (line.find(filter) != std::string_view::npos) return true;
  }
  return false;
}

void DuplicateFilter::Offer(std::string_view prefix, std::string_view line) {
  if (!file_.valid() || !Matches(line)) return;
  pending_.append(prefix);
  pending_.append(line);
  pending_.push_back('\n');
}

void DuplicateFilter::Flush() {
  if (pending_.empty()) return;
  if (absl::Status s = WriteAll(file_.get(), pending_); !s.ok()) {
    spdlog::error("cannot write the filtered log ({}); its lines are still in each rank's log",
                  s.message());
    file_.Reset();
  }
  pending_.clear();
}

std::vector<std::string> ParseDuplicateFilters(const std::string& value) {
  if (value.empty()) return {};
  // A character no argument can hold stands for ",," while the list is split.
  constexpr char kComma[] = "\x01";
  std::vector<std::string> filters;
  for (absl::string_view item : absl::StrSplit(absl::StrReplaceAll(value, {{",,", kComma}}), ',')) {
    // An empty filter would match every line (torchrun's "a," does): it is left out.
    if (!item.empty()) filters.push_back(absl::StrReplaceAll(item, {{kComma, ","}}));
  }
  return filters;
}

}  // namespace ddprun
