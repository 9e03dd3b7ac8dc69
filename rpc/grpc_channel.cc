#include "rpc/grpc_channel.h"

#include <utility>

namespace ddprun {

void SetQuickReconnect(grpc::ChannelArguments& args) {
  // gRPC's first backoff is 1 s by default; 100 ms is the least it accepts. Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: despite its name it is the time a connection attempt
  // (TCP, TLS and HTTP/2 handshakes) may take, 20 s by default. Set to 10 ms (read as
  // 100 ms, growing with the backoff to about 1.2 s), 3,000 agents connecting at once never
  // got through: each attempt was abandoned before the busy master answered it, and retried.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
}

std::vector<absl::Duration> QuickConnectPauses() {
  std::vector<absl::Duration> pauses;
  absl::Duration pause = absl::Milliseconds(5), total;
  while (total + pause <= absl::Seconds(1)) {
    pauses.push_back(pause);
    total += pause;
    pause = pause * 3 / 2;
  }
  return pauses;
}

QuickConnect::QuickConnect(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)), thread_([this] { Run(); }) {}

QuickConnect::~QuickConnect() {
  stop_.Notify();
  thread_.join();
}

void QuickConnect::Run() {
  for (const absl::Duration pause : QuickConnectPauses()) {
    const grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY || state == GRPC_CHANNEL_SHUTDOWN) return;
    // Failed and waiting out gRPC's back-off: try now. A try under way is left to finish.
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
    }
    if (stop_.WaitForNotificationWithTimeout(pause)) return;
  }
}

}  // namespace ddprun
