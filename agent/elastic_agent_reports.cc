// ElasticAgent: what it tells people and the master about an attempt (the summaries, the
// failures it reports, where workers meet) and the interface gloo gets.

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/elastic_agent.h"
#include "node/host_info.h"
#include "spdlog/spdlog.h"

namespace ddprun {

void ElasticAgent::WriteFailureSummary() {
  SummaryContext context;
  context.entrypoint = config_.entrypoint_name;
  context.meeting = Meeting();
  context.hang_report_path = hang_report_path_;
  context.interpreter = config_.interpreter;
  (void)WriteAll(STDERR_FILENO, FormatFailureSummary(last_failures_, context));
}

void ElasticAgent::WriteStopSummary(int signal) {
  const std::optional<Assignment>& assignment = rules_.assignment();
  const int first = assignment ? assignment->base_rank : 0;
  (void)WriteAll(STDERR_FILENO, FormatStopSummary(config_.entrypoint_name, signal, host_, first,
                                                  first + config_.nproc_per_node - 1, Meeting()));
}

std::string ElasticAgent::GlooInterface(const std::string& master_addr) {
  if (!store_ || !store_->pick_gloo_interface || base_env_.count("GLOO_SOCKET_IFNAME") > 0) {
    return "";
  }
  std::vector<InterfaceChoice> choices;
  for (const NetworkInterface& i :
       {InterfaceToward(master_addr), InterfaceToward(config_.endpoint_host),
        InterfaceHolding(store_->server != nullptr ? store_->server->ArrivalAddress() : "")}) {
    choices.push_back({i.name, i.loopback});
  }
  const std::string name = ChooseGlooInterface(choices);
  if (name.empty() && gloo_said_ != "?") {
    // Mostly every node on this machine (a test, a workstation), where loopback is right:
    // INFO, not a warning on every such job.
    spdlog::info(
        "this host's name resolves only to loopback here, where gloo listens, and no "
        "interface toward the other nodes is known: workers that use gloo may not reach "
        "each other; set GLOO_SOCKET_IFNAME (e.g. eth0), or give this host's name an "
        "address the other nodes reach");
    gloo_said_ = "?";
  } else if (!name.empty() && name != gloo_said_) {
    spdlog::info(
        "this host's name resolves only to loopback here: workers get "
        "GLOO_SOCKET_IFNAME={} (the interface toward the other nodes), so that gloo "
        "listens where they reach it; set GLOO_SOCKET_IFNAME to choose",
        name);
    gloo_said_ = name;
  }
  return name;
}

// Only where it can matter: a job of several nodes, whose workers must reach it across the
// network. A one-node job's workers meet on this host.
MeetingPoint ElasticAgent::Meeting() const {
  const std::optional<Assignment>& assignment = rules_.assignment();
  if (!assignment || assignment->group_world_size <= 1) return {};
  return MeetingPoint{assignment->master_addr, assignment->master_port};
}

std::vector<ReportedFailure> ElasticAgent::ForMaster(
    const std::vector<WorkerFailure>& failures) const {
  std::vector<ReportedFailure> out;
  for (const WorkerFailure& f : failures) {
    ReportedFailure r;
    r.host = f.host;
    r.rank = f.rank;
    r.local_rank = f.local_rank;
    r.exit_code = f.ends_with != 0 ? -f.ends_with : TorchExitCode(f.wait_status);
    r.pid = f.pid;
    r.time = f.time;
    r.message =
        f.error_message.empty() && !f.stderr_tail.empty() ? f.stderr_tail.back() : f.error_message;
    r.hung = f.hung;
    r.timer = f.timer;
    r.peer_lost = FailedForALostPeer(f);
    // The master refuses a failure message over 64 KiB (CheckLimits); an error file can
    // hold any amount. The whole message stays in this node's own summary.
    constexpr size_t kMaxReported = 16 * 1024;
    if (r.message.size() > kMaxReported) {
      r.message = absl::StrCat(r.message.substr(0, kMaxReported), " ... (cut at 16 KiB)");
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ddprun
