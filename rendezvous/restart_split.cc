#include "rendezvous/restart_split.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddprun {
namespace {

std::string Millis(absl::Duration d) {
  return absl::StrFormat("%.0f ms", absl::ToDoubleMilliseconds(d));
}

}  // namespace

std::vector<std::pair<std::string, absl::Duration>> RestartSplit::Parts() const {
  std::vector<std::pair<std::string, absl::Duration>> parts;
  const std::pair<const char*, const std::optional<absl::Duration>*> all[] = {
      {"detection", &detection}, {"stop", &stop},           {"rendezvous", &rendezvous},
      {"spawn", &spawn},         {"connected", &connected}, {"barrier", &barrier}};
  for (const auto& [name, part] : all) {
    if (part->has_value()) parts.emplace_back(name, **part);
  }
  return parts;
}

void RestartSplit::KeepLongest(const RestartSplit& other) {
  auto keep = [](std::optional<absl::Duration>& mine, const std::optional<absl::Duration>& theirs) {
    if (theirs && (!mine || *theirs > *mine)) mine = theirs;
  };
  keep(detection, other.detection);
  keep(stop, other.stop);
  keep(rendezvous, other.rendezvous);
  keep(spawn, other.spawn);
  keep(connected, other.connected);
  keep(barrier, other.barrier);
  total = std::max(total, other.total);
}

std::string FormatRestartSplit(const RestartSplit& split) {
  std::string line =
      split.membership_change
          ? absl::StrCat("the membership change into round ", split.round, " (restart count ",
                         split.restart_count, ", none spent) took ", Millis(split.total),
                         " on this node:")
          : absl::StrCat("restart ", split.restart_count, " (round ", split.round, ") took ",
                         Millis(split.total), " on this node:");
  const char* separator = " ";
  for (const auto& [name, part] : split.Parts()) {
    const char* words = name == "connected" ? "every rank connected to the store"
                        : name == "barrier" ? "store barrier passed"
                                            : name.c_str();
    absl::StrAppend(&line, separator, words, " ", Millis(part));
    separator = ", ";
  }
  if (!split.connected) {
    // A one-node job without --rdzv-endpoint (rank 0's worker hosts the store), a node other
    // than group rank 0: what the workers do after they start is not seen here, and a
    // script's imports may take seconds. Say so, lest "5 ms" read as the whole restart.
    absl::StrAppend(&line,
                    " (to the workers' start only: their own start-up, imports and "
                    "init_process_group, is not seen on a node that serves no store they "
                    "connect to)");
  }
  return line;
}

}  // namespace ddprun
