#include "rendezvous/grpc_channel.h"

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

}  // namespace ddprun
