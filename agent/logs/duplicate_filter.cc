#include "agent/logs/duplicate_filter.h"

#include "agent/logs/log_format.h"
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
  std::vector<std::string> filters;
  std::string filter;
  for (size_t i = 0; i <= value.size(); ++i) {
    if (i < value.size() && value[i] == ',' && i + 1 < value.size() && value[i + 1] == ',') {
      filter += ',';  // ",," is a comma inside a filter, as torchrun reads it
      ++i;
    } else if (i == value.size() || value[i] == ',') {
      // An empty filter would match every line (torchrun's "a," does): it is left out.
      if (!filter.empty()) filters.push_back(filter);
      filter.clear();
    } else {
      filter += value[i];
    }
  }
  return filters;
}

}  // namespace ddprun
