#pragma once
// Conversions between the protocol's messages (proto/ddprun/v1) and the master's and
// agent's own types, and between absl::Status and grpc::Status. Pure.

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/status.h>

#include <vector>

#include "absl/status/status.h"
#include "ddprun/v1/rendezvous.pb.h"
#include "rendezvous/rendezvous_connection.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

/// The job-wide settings, field by field from the table in rendezvous_settings.h (each
/// RunSettings field found by its name there).
RendezvousSettings FromWire(const v1::RunSettings& settings);
v1::RunSettings ToWire(const RendezvousSettings& settings);
/// Every setting of a join within its bounds in the table; the error names the field.
absl::Status CheckSettingsLimits(const v1::RunSettings& settings);

/// A round's assignment, field by field from the table in rendezvous/assignment.h (each
/// RoundAssignment field found by its name there).
void AssignmentToWire(const Assignment& assignment, v1::RoundAssignment& message);
Assignment AssignmentFromWire(const v1::RoundAssignment& message);

NodeInfo NodeFromJoin(const v1::Join& join);
/// The Join an agent sends (protocol version 2).
v1::Join JoinToWire(const NodeInfo& node, const std::string& run_id, const std::string& token,
                    const RendezvousSettings& settings);

/// What an agent sends on its Session stream.
v1::AgentMessage JoinMessage(const NodeInfo& node, const std::string& run_id,
                             const std::string& token, const RendezvousSettings& settings);
v1::AgentMessage FailureReportMessage(int64_t round, const std::vector<ReportedFailure>& failures);
v1::AgentMessage SuccessReportMessage(int64_t round);
/// `want_gathering`: a waiting node asks how the round it waits for is gathering.
v1::AgentMessage HeartbeatMessage(bool want_gathering = false);
v1::AgentMessage StackReportMessage(int64_t round, int world_size, const std::string& cause,
                                    const std::vector<RankStack>& stacks);
v1::AgentMessage LeaveMessage(const std::string& reason);
/// A restart's split, in milliseconds (the two directions of one mapping).
v1::AgentMessage RestartSplitMessage(const RestartSplit& split);
RestartSplit FromWire(const v1::RestartSplit& split);

std::vector<RankStack> FromWire(const google::protobuf::RepeatedPtrField<v1::RankStack>& stacks);
/// What the master sends every node after merging a StackReport into `report`.
v1::MasterMessage HangReportMessage(const HangReport& report);

std::vector<ReportedFailure> FromWire(
    const google::protobuf::RepeatedPtrField<v1::WorkerFailure>& failures);
v1::WorkerFailure ToWire(const ReportedFailure& failure);

/// What the master sends for one Outbound of its state machine, and what the agent makes
/// of it: the two directions of the same mapping (EventsFor does it in-process).
v1::MasterMessage ToWire(const Outbound& out);
RendezvousEvent EventFromWire(const v1::MasterMessage& message);

/// Sends gRPC's own log lines to spdlog at debug level (e.g. the failed bind of an agent
/// that lost the race for the master's port is a detail, not an error).
void RouteGrpcLogsToSpdlog();

/// Every field of an agent's message within its limits (lengths, counts, ranges), so that a
/// confused or hostile client cannot make the master hold huge strings or odd settings.
/// The error names the field, its size or value, and the limit.
absl::Status CheckLimits(const v1::AgentMessage& message);

grpc::Status ToGrpcStatus(const absl::Status& status);
/// Ends a unary callback call with `status` (its response filled already when OK).
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ddprun
