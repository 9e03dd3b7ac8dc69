#pragma once
// What every client of a ddprun gRPC server sets on its channel: the agent's session to the
// master, and the worker SDK's Store client.

#include <grpcpp/grpcpp.h>

namespace ddprun {

/// A refused connection is retried after 100 ms (gRPC's least), backing off to 1 s; each
/// attempt keeps gRPC's default 20 s to complete.
void SetQuickReconnect(grpc::ChannelArguments& args);

}  // namespace ddprun
