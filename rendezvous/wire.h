#pragma once
// Conversions between the protocol's messages (proto/ddprun/v1) and the master's and
// agent's own types, and between absl::Status and grpc::Status. Pure.

#include <grpcpp/support/status.h>

#include <vector>

#include "absl/status/status.h"
#include "ddprun/v1/rendezvous.pb.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

RendezvousSettings FromWire(const v1::RunSettings& settings);
v1::RunSettings ToWire(const RendezvousSettings& settings);

NodeInfo NodeFromJoin(const v1::Join& join);

std::vector<ReportedFailure> FromWire(
    const google::protobuf::RepeatedPtrField<v1::WorkerFailure>& failures);
v1::WorkerFailure ToWire(const ReportedFailure& failure);

/// What the master sends for one Outbound of its state machine.
v1::MasterMessage ToWire(const Outbound& out);

/// FailedPrecondition naming the difference when two agents disagree on the job's shape.
absl::Status SameJobSettings(const RendezvousSettings& run, const RendezvousSettings& joiner);

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ddprun
