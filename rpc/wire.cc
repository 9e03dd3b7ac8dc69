#include "rpc/wire.h"

#include <grpc/support/log.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/ip_address.h"
#include "common/printable.h"
#include "spdlog/spdlog.h"

namespace ddprun {

NodeInfo NodeFromJoin(const v1::Join& join) {
  NodeInfo node;
  node.host = join.node().host();
  node.addr = join.node().addr();
  node.fallback_addr = join.node().fallback_addr();
  for (const std::string& a : join.node().addresses()) node.addresses.push_back(CanonicalIp(a));
  node.pid = join.node().pid();
  node.incarnation = join.node().incarnation();
  node.local_world_size = join.local_world_size();
  node.node_rank_hint = join.node_rank_hint();
  node.master_port = join.master_port();
  node.last_round = join.next_round() - 1;
  node.restarts_seen = join.restarts_seen();
  node.failed_check = PrintableLines(join.failed_check());
  node.restarts_in_place = join.restarts_in_place();
  if (join.has_resume()) node.resume = AssignmentFromWire(join.resume());
  return node;
}

v1::Join JoinToWire(const NodeInfo& node, const std::string& run_id, const std::string& token,
                    const RendezvousSettings& settings) {
  v1::Join join;
  join.set_version(v1::PROTOCOL_VERSION_2);
  join.set_run_id(run_id);
  join.set_token(token);
  join.mutable_node()->set_host(node.host);
  join.mutable_node()->set_addr(node.addr);
  join.mutable_node()->set_fallback_addr(node.fallback_addr);
  for (const std::string& a : node.addresses) join.mutable_node()->add_addresses(a);
  join.mutable_node()->set_pid(node.pid);
  join.mutable_node()->set_incarnation(node.incarnation);
  join.set_local_world_size(node.local_world_size);
  join.set_node_rank_hint(node.node_rank_hint);
  join.set_master_port(node.master_port);
  join.set_next_round(node.last_round + 1);
  join.set_restarts_seen(node.restarts_seen);
  join.set_failed_check(node.failed_check);
  join.set_restarts_in_place(node.restarts_in_place);
  if (node.resume) {
    AssignmentToWire(*node.resume, *join.mutable_resume());
    join.mutable_resume()->clear_store_clients();  // the master has no use for them
    join.mutable_resume()->clear_neighbour_store();
  }
  *join.mutable_settings() = ToWire(settings);
  return join;
}

v1::AgentMessage JoinMessage(const NodeInfo& node, const std::string& run_id,
                             const std::string& token, const RendezvousSettings& settings) {
  v1::AgentMessage message;
  *message.mutable_join() = JoinToWire(node, run_id, token, settings);
  return message;
}

v1::AgentMessage FailureReportMessage(int64_t round, const std::vector<ReportedFailure>& failures) {
  v1::AgentMessage message;
  message.mutable_report()->set_round(round);
  for (const ReportedFailure& f : failures) *message.mutable_report()->add_failures() = ToWire(f);
  return message;
}

v1::AgentMessage SuccessReportMessage(int64_t round) {
  v1::AgentMessage message;
  message.mutable_report()->set_round(round);
  message.mutable_report()->set_succeeded(true);
  return message;
}

v1::AgentMessage HeartbeatMessage(bool want_gathering) {
  v1::AgentMessage message;
  message.mutable_heartbeat()->set_want_gathering(want_gathering);
  return message;
}

namespace {

// Each part of a split beside its wire fields: one table for both directions.
struct SplitField {
  std::optional<absl::Duration> RestartSplit::*part;
  bool (v1::RestartSplit::*has)() const;
  double (v1::RestartSplit::*get)() const;
  void (v1::RestartSplit::*set)(double);
};
constexpr SplitField kSplitFields[] = {
    {&RestartSplit::detection, &v1::RestartSplit::has_detection_ms, &v1::RestartSplit::detection_ms,
     &v1::RestartSplit::set_detection_ms},
    {&RestartSplit::stop, &v1::RestartSplit::has_stop_ms, &v1::RestartSplit::stop_ms,
     &v1::RestartSplit::set_stop_ms},
    {&RestartSplit::rendezvous, &v1::RestartSplit::has_rendezvous_ms,
     &v1::RestartSplit::rendezvous_ms, &v1::RestartSplit::set_rendezvous_ms},
    {&RestartSplit::spawn, &v1::RestartSplit::has_spawn_ms, &v1::RestartSplit::spawn_ms,
     &v1::RestartSplit::set_spawn_ms},
    {&RestartSplit::connected, &v1::RestartSplit::has_connected_ms, &v1::RestartSplit::connected_ms,
     &v1::RestartSplit::set_connected_ms},
    {&RestartSplit::barrier, &v1::RestartSplit::has_barrier_ms, &v1::RestartSplit::barrier_ms,
     &v1::RestartSplit::set_barrier_ms},
};

}  // namespace

v1::AgentMessage RestartSplitMessage(const RestartSplit& split) {
  v1::AgentMessage message;
  v1::RestartSplit* out = message.mutable_restart();
  out->set_round(split.round);
  out->set_restart_count(split.restart_count);
  out->set_total_ms(absl::ToDoubleMilliseconds(split.total));
  for (const SplitField& f : kSplitFields) {
    if (const std::optional<absl::Duration>& part = split.*f.part) {
      (out->*f.set)(absl::ToDoubleMilliseconds(*part));
    }
  }
  return message;
}

RestartSplit FromWire(const v1::RestartSplit& in) {
  RestartSplit split;
  split.round = in.round();
  split.restart_count = in.restart_count();
  split.total = absl::Milliseconds(in.total_ms());
  for (const SplitField& f : kSplitFields) {
    if ((in.*f.has)()) split.*f.part = absl::Milliseconds((in.*f.get)());
  }
  return split;
}

v1::AgentMessage StackReportMessage(int64_t round, int world_size, const std::string& cause,
                                    const std::vector<RankStack>& stacks) {
  v1::AgentMessage message;
  v1::StackReport* r = message.mutable_stacks();
  r->set_round(round);
  r->set_world_size(world_size);
  r->set_cause(cause);
  for (const RankStack& s : stacks) {
    v1::RankStack* out = r->add_stacks();
    out->set_host(s.host);
    out->set_rank(s.rank);
    out->set_local_rank(s.local_rank);
    out->set_pid(s.pid);
    out->set_source(s.source);
    out->set_where(s.where);
    for (const std::string& f : s.frames) out->add_frames(f);
    out->set_text(s.text);
    out->set_hung(s.hung);
  }
  return message;
}

v1::AgentMessage LeaveMessage(const std::string& reason) {
  v1::AgentMessage message;
  message.mutable_leave()->set_reason(reason);
  return message;
}

std::vector<RankStack> FromWire(const google::protobuf::RepeatedPtrField<v1::RankStack>& stacks) {
  std::vector<RankStack> out;
  for (const v1::RankStack& s : stacks) {
    RankStack r;
    r.host = s.host();
    r.rank = s.rank();
    r.local_rank = s.local_rank();
    r.pid = s.pid();
    r.source = Printable(s.source());
    r.where = Printable(s.where());
    r.frames.assign(s.frames().begin(), s.frames().end());
    r.text = PrintableLines(s.text());
    r.hung = s.hung();
    out.push_back(std::move(r));
  }
  return out;
}

v1::MasterMessage HangReportMessage(const HangReport& report) {
  v1::MasterMessage message;
  v1::HangReport* h = message.mutable_hang_report();
  h->set_round(report.round);
  h->set_summary(FormatHangSummary(report));
  h->set_text(FormatHangReport(report));
  return message;
}

std::vector<ReportedFailure> FromWire(
    const google::protobuf::RepeatedPtrField<v1::WorkerFailure>& failures) {
  std::vector<ReportedFailure> out;
  for (const v1::WorkerFailure& f : failures) {
    ReportedFailure r;
    r.host = Printable(f.host());
    r.rank = f.rank();
    r.local_rank = f.local_rank();
    r.exit_code = f.exit_code();
    r.pid = f.pid();
    r.time = absl::FromUnixMicros(f.time_unix_us());
    r.message = PrintableLines(f.message());  // a peer's text never moves the cursor
    r.hung = f.hung();
    r.timer = f.hung() && f.timer();
    r.peer_lost = f.peer_lost();
    out.push_back(std::move(r));
  }
  return out;
}

v1::WorkerFailure ToWire(const ReportedFailure& f) {
  v1::WorkerFailure out;
  out.set_host(f.host);
  out.set_rank(f.rank);
  out.set_local_rank(f.local_rank);
  out.set_exit_code(f.exit_code);
  out.set_pid(f.pid);
  out.set_time_unix_us(absl::ToUnixMicros(f.time));
  out.set_message(f.message);
  out.set_hung(f.hung);
  out.set_timer(f.timer);
  out.set_peer_lost(f.peer_lost);
  return out;
}

v1::MasterMessage ToWire(const Outbound& out) {
  v1::MasterMessage message;
  switch (out.kind) {
    case Outbound::Kind::kAssign:
      AssignmentToWire(out.assignment, *message.mutable_assignment());
      break;
    case Outbound::Kind::kStop: {
      v1::StopOrder* stop = message.mutable_stop();
      stop->set_reason(out.stop_reason == StopReason::kWorkerFailed
                           ? v1::StopOrder::WORKER_FAILED
                           : v1::StopOrder::MEMBERSHIP_CHANGED);
      stop->set_detail(out.detail);
      stop->set_collect_stacks(out.collect_stacks);
      if (out.next) AssignmentToWire(*out.next, *stop->mutable_next());
      break;
    }
    case Outbound::Kind::kEvict:  // not a message: the master closes the stream instead
      break;
    case Outbound::Kind::kOpenStore:
      message.mutable_store_open()->set_round(out.store_round);
      break;
    case Outbound::Kind::kResumed:
      message.mutable_resumed()->set_round(out.store_round);
      break;
    case Outbound::Kind::kEnd: {
      v1::RunEnd* end = message.mutable_end();
      end->set_outcome(out.outcome == RunOutcome::kSucceeded  ? v1::RunEnd::SUCCEEDED
                       : out.outcome == RunOutcome::kReleased ? v1::RunEnd::RELEASED
                       : out.outcome == RunOutcome::kStopped  ? v1::RunEnd::STOPPED
                       : out.outcome == RunOutcome::kFailed   ? v1::RunEnd::FAILED
                                                              : v1::RunEnd::TIMED_OUT);
      end->set_detail(out.detail);
      end->set_collect_stacks(out.collect_stacks);
      for (const ReportedFailure& f : out.root_cause) *end->add_root_cause() = ToWire(f);
      for (const std::string& line : out.excluded) end->add_excluded(line);
      break;
    }
    case Outbound::Kind::kExclude: {
      v1::Exclusion* excluded = message.mutable_excluded();
      excluded->set_detail(out.detail);
      excluded->set_rest_of_job(out.cooldown == absl::InfiniteDuration());
      if (!excluded->rest_of_job()) {
        excluded->set_cooldown_ms(absl::ToInt64Milliseconds(out.cooldown));
      }
      break;
    }
  }
  return message;
}

RendezvousEvent EventFromWire(const v1::MasterMessage& message) {
  RendezvousEvent event;
  if (message.has_assignment()) {
    event.kind = RendezvousEvent::Kind::kAssigned;
    event.assignment = AssignmentFromWire(message.assignment());
  } else if (message.has_stop()) {
    event.kind = RendezvousEvent::Kind::kStop;
    event.stop_reason = message.stop().reason() == v1::StopOrder::WORKER_FAILED
                            ? StopReason::kWorkerFailed
                            : StopReason::kMembershipChanged;
    event.detail = Printable(message.stop().detail());
    event.collect_stacks = message.stop().collect_stacks();
    if (message.stop().has_next()) event.next = AssignmentFromWire(message.stop().next());
  } else if (message.has_store_open()) {
    event.kind = RendezvousEvent::Kind::kStoreOpen;
    event.store_round = message.store_open().round();
  } else if (message.has_resumed()) {
    event.kind = RendezvousEvent::Kind::kResumed;
    event.store_round = message.resumed().round();
  } else if (message.has_hang_report()) {
    event.kind = RendezvousEvent::Kind::kHangReport;
    event.hang_round = message.hang_report().round();
    event.hang_summary = PrintableLines(message.hang_report().summary());
    event.detail = PrintableLines(message.hang_report().text());
  } else if (message.has_end()) {
    event.kind = RendezvousEvent::Kind::kEnd;
    event.outcome = message.end().outcome() == v1::RunEnd::SUCCEEDED  ? RunOutcome::kSucceeded
                    : message.end().outcome() == v1::RunEnd::RELEASED ? RunOutcome::kReleased
                    : message.end().outcome() == v1::RunEnd::STOPPED  ? RunOutcome::kStopped
                    : message.end().outcome() == v1::RunEnd::FAILED   ? RunOutcome::kFailed
                                                                      : RunOutcome::kTimedOut;
    event.detail = Printable(message.end().detail());
    event.root_cause = FromWire(message.end().root_cause());
    event.collect_stacks = message.end().collect_stacks();
    // A failed check's output keeps its lines: the summary indents them.
    for (const std::string& line : message.end().excluded()) {
      event.excluded.push_back(PrintableLines(line));
    }
  } else if (message.has_gathering()) {
    event.kind = RendezvousEvent::Kind::kProgress;
    event.detail = PrintableLines(message.gathering().text());
  } else if (message.has_excluded()) {
    event.kind = RendezvousEvent::Kind::kExcluded;
    event.detail = PrintableLines(message.excluded().detail());
    event.cooldown = message.excluded().rest_of_job()
                         ? absl::InfiniteDuration()
                         : absl::Milliseconds(message.excluded().cooldown_ms());
  }
  return event;
}

namespace {
void LogGrpc(gpr_log_func_args* args) {
  spdlog::debug("grpc {}:{}: {}", args->file, args->line, args->message);
}
}  // namespace

void RouteGrpcLogsToSpdlog() { gpr_set_log_function(&LogGrpc); }

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace ddprun
