#include "rendezvous/grpc_rendezvous.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "rendezvous/wire.h"

namespace ddprun {

namespace pb = ::ddprun::v1;

struct GrpcRendezvous::Channel {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Rendezvous::Stub> stub;
};

/// One Session stream. Writes are queued with one in flight; reads become events.
class GrpcRendezvous::Stream : public grpc::ClientBidiReactor<pb::AgentMessage, pb::MasterMessage> {
 public:
  Stream(pb::Rendezvous::Stub* stub, EventQueue* events, std::string endpoint)
      : events_(events), endpoint_(std::move(endpoint)) {
    // Wait for the master instead of failing at once: agents may start before it does.
    // How long to wait is the agent's join timeout, not the stream's.
    context_.set_wait_for_ready(true);
    stub->async()->Session(&context_, this);
    StartRead(&in_);
    StartCall();
  }

  ~Stream() override {
    context_.TryCancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void Send(pb::AgentMessage message) {
    {
      absl::MutexLock lock(&mu_);
      if (done_) return;
      queue_.push_back(std::move(message));
      if (writing_) return;
      writing_ = true;
    }
    StartWrite(&queue_.front());
  }

  /// From now on the stream's end is expected, not news.
  void Abandon() {
    absl::MutexLock lock(&mu_);
    abandoned_ = true;
  }

 private:
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows with the stream's status
    RendezvousEvent event = EventFromWire(in_);
    events_->Push(std::move(event));
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    bool more = false;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      more = ok && !queue_.empty();
      writing_ = more;
    }
    if (more) StartWrite(&queue_.front());
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (!abandoned_) {
      RendezvousEvent lost;
      lost.kind = RendezvousEvent::Kind::kLost;
      absl::Status why = FromGrpcStatus(status);
      if (why.ok()) why = absl::UnavailableError("the master closed the session");
      lost.status = absl::Status(why.code(), absl::StrCat("rendezvous master at ", endpoint_,
                                                          ": ", why.message()));
      events_->Push(std::move(lost));
    }
    done_ = true;
  }

  EventQueue* events_;
  const std::string endpoint_;
  grpc::ClientContext context_;
  pb::MasterMessage in_;
  absl::Mutex mu_;
  std::deque<pb::AgentMessage> queue_ ABSL_GUARDED_BY(mu_);  // front() in flight if writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

GrpcRendezvous::GrpcRendezvous(NetworkRendezvousOptions options)
    : options_(std::move(options)), channel_(std::make_unique<Channel>()) {
  grpc::ChannelArguments args;
  // Notice a dead master or a partition even when idle: a ping every keep_alive_interval,
  // answered within heartbeat_timeout. With the defaults (5 s + 5 s) a cut-off agent stops
  // its workers before the master's 15 s keep-alive window gives its place away, so two
  // rounds never train at once.
  const auto ms = [](absl::Duration d) {
    return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 100, INT32_MAX));
  };
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms(options_.settings.keep_alive_interval));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(options_.heartbeat_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly to a master that comes (back) up: agents started together often
  // try before the hosting agent listens, and a 100 ms first backoff doubled the launch.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 10);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options_.tls.enabled()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls.ca_pem;
    ssl.pem_private_key = options_.tls.key_pem;
    ssl.pem_cert_chain = options_.tls.cert_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  channel_->channel = grpc::CreateCustomChannel(options_.endpoint, credentials, args);
  channel_->stub = pb::Rendezvous::NewStub(channel_->channel);
  stream_ = std::make_unique<Stream>(channel_->stub.get(), &events_, options_.endpoint);
}

GrpcRendezvous::~GrpcRendezvous() {
  if (stream_) stream_->Abandon();
  stream_.reset();
}

void GrpcRendezvous::Reconnect() {
  if (stream_) stream_->Abandon();
  stream_ = std::make_unique<Stream>(channel_->stub.get(), &events_, options_.endpoint);
}

void GrpcRendezvous::Join(const NodeInfo& node) {
  pb::AgentMessage message;
  *message.mutable_join() = JoinToWire(node, options_.run_id, options_.token, options_.settings);
  stream_->Send(std::move(message));
}

void GrpcRendezvous::ReportFailure(int64_t round, std::vector<ReportedFailure> failures) {
  pb::AgentMessage message;
  message.mutable_report()->set_round(round);
  for (const ReportedFailure& f : failures) *message.mutable_report()->add_failures() = ToWire(f);
  stream_->Send(std::move(message));
}

void GrpcRendezvous::ReportSuccess(int64_t round) {
  pb::AgentMessage message;
  message.mutable_report()->set_round(round);
  message.mutable_report()->set_succeeded(true);
  stream_->Send(std::move(message));
}

void GrpcRendezvous::Heartbeat() {
  pb::AgentMessage message;
  message.mutable_heartbeat();
  stream_->Send(std::move(message));
}

}  // namespace ddprun
