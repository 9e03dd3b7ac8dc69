#pragma once
// --duplicate-stdout-filters / --duplicate-stderr-filters: the tee'd lines of every local rank
// that contain any of the filters are also written, with their console prefix, to one file of
// the attempt (filtered_stdout.log, filtered_stderr.log), as torchrun does.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/unique_fd.h"

namespace ddprun {

class DuplicateFilter {
 public:
  /// `file`: the attempt's filtered_*.log, shared by every worker's stream.
  DuplicateFilter(std::vector<std::string> filters, UniqueFd file)
      : filters_(std::move(filters)), file_(std::move(file)) {}

  /// Whether `line` (without its newline) contains one of the filters: a plain,
  /// case-sensitive substring test.
  bool Matches(std::string_view line) const;

  /// Queues `prefix` + `line` + newline when the line matches.
  void Offer(std::string_view prefix, std::string_view line);
  /// Writes what was queued, in one write: lines of two workers never mix.
  void Flush();

 private:
  std::vector<std::string> filters_;
  UniqueFd file_;
  std::string pending_;
};

/// The filters of --duplicate-*-filters: comma-separated, ",," for a comma in a filter
/// (torchrun's comma_separated_list). Empty filters are left out, so "" gives none.
std::vector<std::string> ParseDuplicateFilters(const std::string& value);

}  // namespace ddprun
