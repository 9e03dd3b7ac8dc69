#include "net/grpc_rendezvous.h"

#include <algorithm>
#include <cstdint>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "net/endpoint_probe.h"
#include "rpc/wire.h"

namespace ddprun {

namespace pb = ::ddprun::v1;

grpc::ChannelArguments AgentChannelArguments(const NetworkRendezvousOptions& options) {
  grpc::ChannelArguments args;
  // Notice a dead master or a partition even when idle: a ping every keep_alive_interval,
  // answered within heartbeat_timeout. With the defaults (5 s + 5 s) a cut-off agent stops
  // its workers before the master's 15 s keep-alive window gives its place away, so two
  // rounds never train at once.
  const auto ms = [](absl::Duration d) {
    return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 100, INT32_MAX));
  };
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms(options.settings.keep_alive_interval));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(options.heartbeat_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Agents started together often try before the hosting agent listens (QuickConnect too).
  SetQuickReconnect(args);
  return args;
}

std::shared_ptr<grpc::ChannelCredentials> AgentCredentials(
    const NetworkRendezvousOptions& options) {
  if (!options.tls.enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = options.tls.ca_pem;
  ssl.pem_private_key = options.tls.key_pem;
  ssl.pem_cert_chain = options.tls.cert_pem;
  return grpc::SslCredentials(ssl);
}

SessionStream::SessionStream(pb::Rendezvous::Stub* stub, std::string endpoint, OnEvent on_event)
    : endpoint_(std::move(endpoint)), on_event_(std::move(on_event)) {
  // Wait for the master instead of failing at once: agents may start before it does.
  // How long to wait is the agent's join timeout, not the stream's.
  context_.set_wait_for_ready(true);
  stub->async()->Session(&context_, this);
  StartRead(&in_);
  StartCall();
}

SessionStream::~SessionStream() {
  context_.TryCancel();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
}

void SessionStream::Send(pb::AgentMessage message) {
  if (const pb::AgentMessage* first = writes_.Push(std::move(message))) StartWrite(first);
}

void SessionStream::Abandon() {
  absl::MutexLock lock(&mu_);
  abandoned_ = true;
}

void SessionStream::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows with the stream's status
  on_event_(EventFromWire(in_));
  StartRead(&in_);
}

void SessionStream::OnWriteDone(bool ok) {
  if (const pb::AgentMessage* next = writes_.Done(ok).write) StartWrite(next);
}

void SessionStream::OnDone(const grpc::Status& status) {
  writes_.Finish();
  absl::MutexLock lock(&mu_);
  if (!abandoned_) {
    RendezvousEvent ended;
    absl::Status why = FromGrpcStatus(status);
    if (why.ok()) why = absl::UnavailableError("the master closed the session");
    ended.kind = LossOrRefusal(why);
    ended.status = absl::Status(
        why.code(), absl::StrCat("rendezvous master at ", endpoint_, ": ", why.message()));
    on_event_(std::move(ended));
  }
  done_ = true;
}

GrpcRendezvous::GrpcRendezvous(NetworkRendezvousOptions options, EventQueue* events)
    : options_(std::move(options)), events_(events != nullptr ? events : &own_events_) {
  Connect();
}

void GrpcRendezvous::Connect() {
  channel_ = grpc::CreateCustomChannel(options_.endpoint, AgentCredentials(options_),
                                       AgentChannelArguments(options_));
  stub_ = pb::Rendezvous::NewStub(channel_);
  stream_ = OpenStream();
  quick_connect_ = std::make_unique<QuickConnect>(channel_);
}

void GrpcRendezvous::Retarget(const std::string& endpoint) {
  if (stream_) stream_->Abandon();
  stream_.reset();
  quick_connect_.reset();
  options_.endpoint = endpoint;
  Connect();
}

GrpcRendezvous::~GrpcRendezvous() {
  if (stream_ && channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) {
    // The agent exits: the master takes this node for gone at once, instead of holding its
    // place for a reconnect (a short, bounded wait for the message to go out).
    pb::AgentMessage bye;
    bye.mutable_bye();
    stream_->Send(std::move(bye));
    stream_->AwaitWritten(absl::Milliseconds(500));
  }
  if (stream_) stream_->Abandon();
  stream_.reset();
  if (probe_.joinable()) probe_.join();
}

std::unique_ptr<SessionStream> GrpcRendezvous::OpenStream() {
  return std::make_unique<SessionStream>(
      stub_.get(), options_.endpoint,
      [events = events_](RendezvousEvent event) { events->Push(std::move(event)); });
}

void GrpcRendezvous::Reconnect() {
  if (stream_) stream_->Abandon();
  stream_ = OpenStream();
}

void GrpcRendezvous::Join(const NodeInfo& node) {
  stream_->Send(JoinMessage(node, options_.run_id, options_.token, options_.settings));
  if (node.resume && last_report_ && last_report_round_ == node.resume->round) {
    stream_->Send(*last_report_);
  }
}

void GrpcRendezvous::SendReport(int64_t round, pb::AgentMessage report) {
  last_report_ = report;
  last_report_round_ = round;
  stream_->Send(std::move(report));
}

void GrpcRendezvous::ReportFailure(int64_t round, std::vector<ReportedFailure> failures) {
  SendReport(round, FailureReportMessage(round, failures));
}

void GrpcRendezvous::ReportSuccess(int64_t round) {
  SendReport(round, SuccessReportMessage(round));
}

void GrpcRendezvous::ReportStopped(int64_t round) {
  pb::AgentMessage message;
  message.mutable_stopped()->set_round(round);
  stream_->Send(std::move(message));
}

void GrpcRendezvous::ReportRestart(const RestartSplit& split) {
  stream_->Send(RestartSplitMessage(split));
}

void GrpcRendezvous::ReportOutage(int64_t round, absl::Duration lost) {
  pb::AgentMessage message;
  message.mutable_outage()->set_round(round);
  // The wire's bound: a day (master_outage_timeout may be set longer).
  message.mutable_outage()->set_lost_ms(
      absl::ToDoubleMilliseconds(std::min(lost, absl::Hours(24))));
  stream_->Send(std::move(message));
}

void GrpcRendezvous::Heartbeat() { stream_->Send(HeartbeatMessage()); }

void GrpcRendezvous::ReportStacks(int64_t round, int world_size, const std::string& cause,
                                  const std::vector<RankStack>& stacks) {
  stream_->Send(StackReportMessage(round, world_size, cause, stacks));
}

void GrpcRendezvous::CheckProgress() {
  if (channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
    stream_->Send(HeartbeatMessage(/*want_gathering=*/true));
    return;
  }
  StartProbe([this, endpoint = options_.endpoint, channel = channel_] {
    ProbeAddress(endpoint, channel);
  });
}

bool GrpcRendezvous::StartProbe(std::function<void()> probe) {
  if (probing_.exchange(true)) return false;  // the last probe is still out
  if (probe_.joinable()) probe_.join();
  try {
    probe_ = std::thread([this, probe = std::move(probe)] {
      probe();
      probing_ = false;
    });
  } catch (const std::system_error&) {
    probing_ = false;  // no thread to spare: the next check tries again
    return false;
  }
  return true;
}

void GrpcRendezvous::CheckReach(const std::string& store) {
  StartProbe([this, store] {
    const EndpointReach reach = ddprun::ProbeEndpoint(store, kReachTimeout);
    RendezvousEvent event;
    event.kind = RendezvousEvent::Kind::kReach;
    // A refusal comes from the host itself: the path to it works.
    if (reach.kind != EndpointReach::Kind::kListens &&
        reach.kind != EndpointReach::Kind::kRefused) {
      event.status = absl::UnavailableError(reach.detail.empty() ? "no answer" : reach.detail);
    }
    events_->Push(std::move(event));
  });
}

void GrpcRendezvous::ProbeAddress(const std::string& endpoint,
                                  std::shared_ptr<grpc::Channel> channel) {
  const EndpointReach reach = ddprun::ProbeEndpoint(endpoint, kProbeTimeout);
  // A master that came up meanwhile answers the next check itself: nothing to say now.
  if (channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY) {
    RendezvousEvent event;
    event.kind = RendezvousEvent::Kind::kProgress;
    event.status = absl::UnavailableError("no answer");
    event.detail =
        absl::StrCat("the rendezvous master at ", endpoint, " does not answer: ",
                     DescribeUnansweredMaster(endpoint, reach, options_.endpoint_named_by));
    events_->Push(std::move(event));
  }
}

absl::Status ProbeMaster(const NetworkRendezvousOptions& options, absl::Duration timeout) {
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      options.endpoint, AgentCredentials(options), AgentChannelArguments(options));
  if (channel->WaitForConnected(
          gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                       gpr_time_from_millis(absl::ToInt64Milliseconds(timeout), GPR_TIMESPAN)))) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      DescribeUnansweredMaster(options.endpoint, ddprun::ProbeEndpoint(options.endpoint, timeout),
                               options.endpoint_named_by));
}

void GrpcRendezvous::Leave(const std::string& reason) {
  stream_->Send(LeaveMessage(reason));
  // The agent exits next and its session's end would cancel the write: a short, bounded
  // wait lets the master hear why this node went.
  stream_->AwaitWritten(absl::Seconds(2));
}

}  // namespace ddprun
