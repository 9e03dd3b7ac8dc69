// `ddprun status` as a person reads it: FormatRunStatus and FormatRunList (run_status.h).

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/printable.h"
#include "observability/run_status.h"

namespace ddprun {
namespace {

using Row = std::vector<std::string>;

// Columns two spaces apart, each as wide as its widest cell; the last one is not padded.
std::string Table(const std::vector<Row>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const Row& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const Row& row : rows) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string WallTime(double unix_s) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMicros(unix_s * 1e6),
                          absl::LocalTimeZone());
}

std::string Seconds(double s) {
  if (s < 0.001) return "0ms";  // absl says "0"
  return absl::FormatDuration(absl::Milliseconds(static_cast<int64_t>(s * 1000)));
}

std::string Ranks(const v1::NodeStatus& node) {
  if (node.group_rank() < 0) return "-";
  if (node.local_world_size() == 1) return absl::StrCat(node.first_rank());
  return absl::StrCat(node.first_rank(), "-", node.first_rank() + node.local_world_size() - 1);
}

std::string Headline(const v1::RunStatus& run) {
  std::string line = absl::StrCat("run '", run.run_id(), "': ", run.state());
  if (!run.outcome().empty()) absl::StrAppend(&line, " (", run.outcome(), ")");
  if (run.round() >= 0) absl::StrAppend(&line, ", round ", run.round());
  if (run.world_size() > 0) absl::StrAppend(&line, ", world size ", run.world_size());
  // While gathering, how many of the nodes needed are there: "nodes 2" would read as two.
  const bool gathering = run.state() == "gathering";
  if (gathering) {
    const auto waiting = run.node_states().find("waiting");
    absl::StrAppend(&line, ", nodes ", waiting == run.node_states().end() ? 0 : waiting->second,
                    " of ");
  } else {
    absl::StrAppend(&line, ", nodes ");
  }
  absl::StrAppend(&line, run.min_nodes());
  if (run.max_nodes() != run.min_nodes()) absl::StrAppend(&line, "..", run.max_nodes());
  if (gathering) absl::StrAppend(&line, " joined");
  absl::StrAppend(&line, ", restarts ", run.restarts_used(), " of ", run.max_restarts(), " used (",
                  run.restarts_left(), " left)\n");
  if (!run.detail().empty()) absl::StrAppend(&line, "  ", Printable(run.detail()), "\n");
  return line;
}

std::string Nodes(const v1::RunStatus& run) {
  if (run.nodes().empty()) return "\nno node holds a session in it now\n";
  std::vector<Row> rows = {{"NODE", "AGENT", "PID", "GROUP RANK", "RANKS", "STATE",
                            "LAST HEARTBEAT", "RESTARTS CAUSED"}};
  for (const v1::NodeStatus& node : run.nodes()) {
    rows.push_back({Printable(node.host()), Printable(node.agent_id().substr(0, 8)),
                    absl::StrCat(node.pid()),
                    node.group_rank() >= 0 ? absl::StrCat(node.group_rank()) : "-", Ranks(node),
                    node.state(), absl::StrCat(Seconds(node.last_heartbeat_s_ago()), " ago"),
                    absl::StrCat(node.restarts_caused())});
  }
  std::string out = absl::StrCat("\n", Table(rows, ""));
  if (!run.waiting().empty()) absl::StrAppend(&out, "waiting: ", run.waiting(), "\n");
  return out;
}

std::string LastFailure(const v1::RunStatus& run) {
  if (!run.has_last_failure()) return "";
  const v1::FailureStatus& f = run.last_failure();
  std::string out =
      absl::StrCat("\nlast failure (round ", f.round(), "): rank ", f.rank(), " (local rank ",
                   f.local_rank(), ") on ", Printable(f.host()), ", ", f.exit(), ", pid ", f.pid(),
                   ", at ", WallTime(f.time_unix_s()), "\n");
  for (absl::string_view line : absl::StrSplit(f.message(), '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, "  ", Printable(line), "\n");
  }
  return out;
}

std::string Excluded(const v1::RunStatus& run) {
  if (run.excluded().empty()) return "";
  std::string out = "\nkept out:\n";
  for (const v1::ExcludedNode& x : run.excluded()) {
    const std::string until = !x.out_now() ? "back in"
                              : x.rest_of_job()
                                  ? "for the rest of the job"
                                  : absl::StrCat(Seconds(x.cooldown_left_s()), " left");
    absl::StrAppend(&out, "  ", Printable(x.host()), " (", until, "): ", Printable(x.reason()),
                    "\n");
  }
  return out;
}

// How long the restart into the round took, and its longest part: "1.399s (connected
// 1.307s)"; "-" for the first round, or before a node has said.
std::string RestartedIn(const v1::RoundStatus& r) {
  auto total = r.restart_ms().find("total");
  if (total == r.restart_ms().end()) return "-";
  std::string longest;
  double longest_ms = -1;
  for (const char* part : {"detection", "stop", "rendezvous", "spawn", "connected", "barrier"}) {
    auto it = r.restart_ms().find(part);
    if (it != r.restart_ms().end() && it->second > longest_ms) {
      longest = part;
      longest_ms = it->second;
    }
  }
  std::string out = Seconds(total->second / 1e3);
  if (!longest.empty()) absl::StrAppend(&out, " (", longest, " ", Seconds(longest_ms / 1e3), ")");
  return out;
}

// How long its nodes were without a master while it ran, and whether a restarted master took
// it up: "3.2s, taken up"; "-" when neither.
std::string MasterAway(const v1::RoundStatus& r) {
  if (r.master_outage_ms() <= 0 && !r.taken_up()) return "-";
  return absl::StrCat(r.master_outage_ms() > 0 ? Seconds(r.master_outage_ms() / 1e3) : "?",
                      r.taken_up() ? ", taken up" : "");
}

std::string Rounds(const v1::RunStatus& run) {
  if (run.rounds().empty()) return "";
  std::vector<Row> rows = {{"ROUND", "RESTART", "NODES", "WORLD", "BEGAN", "RENDEZVOUS",
                            "RESTARTED IN", "MASTER AWAY", "LASTED", "ENDED BY"}};
  // The last ten: the rest is in --json.
  const int first = std::max(0, run.rounds_size() - 10);
  for (int i = first; i < run.rounds_size(); ++i) {
    const v1::RoundStatus& r = run.rounds(i);
    rows.push_back({absl::StrCat(r.round()), absl::StrCat(r.restart_count()),
                    absl::StrCat(r.nodes()), absl::StrCat(r.world_size()),
                    WallTime(r.began_unix_s()), Seconds(r.rendezvous_s()), RestartedIn(r),
                    MasterAway(r),
                    r.ended_unix_s() > 0 ? Seconds(r.ended_unix_s() - r.began_unix_s()) : "runs",
                    Printable(r.ended_by())});
  }
  return absl::StrCat("\nrounds:\n", Table(rows, "  "));
}

}  // namespace

std::string FormatRunStatus(const v1::RunStatus& run) {
  return absl::StrCat(Headline(run), Nodes(run), LastFailure(run), Excluded(run), Rounds(run));
}

std::string FormatRunList(const v1::StatusReply& reply) {
  if (reply.runs().empty()) return "this master holds no run\n";
  std::vector<Row> rows = {{"RUN", "STATE", "ROUND", "NODES", "WORLD", "RESTARTS", "LAST FAILURE"}};
  for (const v1::RunStatus& run : reply.runs()) {
    int members = 0;
    for (const v1::NodeStatus& node : run.nodes()) members += node.group_rank() >= 0 ? 1 : 0;
    const v1::FailureStatus& f = run.last_failure();
    rows.push_back({run.run_id(), run.outcome().empty() ? run.state() : run.outcome(),
                    run.round() >= 0 ? absl::StrCat(run.round()) : "-",
                    absl::StrCat(members, "/", run.nodes_size()), absl::StrCat(run.world_size()),
                    absl::StrCat(run.restarts_used(), "/", run.max_restarts()),
                    run.has_last_failure() ? absl::StrCat("rank ", f.rank(), " on ",
                                                          Printable(f.host()), ": ", f.exit())
                                           : "-"});
  }
  return Table(rows, "");
}

}  // namespace ddprun
