#include "net/admin_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "ddprun/v1/admin.grpc.pb.h"
#include "net/grpc_rendezvous.h"
#include "observability/run_status.h"

namespace ddprun {
namespace {

namespace pb = ::ddprun::v1;

// A failed call, with what to check.
absl::Status CallFailed(const AdminCommand& command, const grpc::Status& status) {
  const std::string said = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the rendezvous master at ", command.endpoint, " (", said,
          "): check --rdzv-endpoint; an agent hosts the master only while its job runs, and "
          "a master with TLS needs --rdzv-conf tls_cert, tls_key and tls_ca"));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::FailedPreconditionError(
          absl::StrCat("the server at ", command.endpoint,
                       " has no admin service: it is not a ddprun master, or an older ddprun"));
    default:
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()), said);
  }
}

}  // namespace

absl::StatusOr<std::string> RunAdminCommand(const AdminCommand& command) {
  NetworkRendezvousOptions channel_options;
  channel_options.tls = command.tls;
  grpc::ChannelArguments args;
  // Every run of a master with 10,000-node runs is more than gRPC's default 4 MiB.
  args.SetMaxReceiveMessageSize(256 * 1024 * 1024);
  auto channel =
      grpc::CreateCustomChannel(command.endpoint, AgentCredentials(channel_options), args);
  auto stub = pb::Admin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + command.timeout));
  if (command.kind == AdminCommand::Kind::kStop) {
    pb::StopRequest request;
    request.set_token(command.token);
    request.set_run_id(command.run_id);
    request.set_reason(command.reason);
    pb::StopReply reply;
    const grpc::Status status = stub->Stop(&context, request, &reply);
    if (!status.ok()) return CallFailed(command, status);
    return absl::StrCat(reply.detail(), "\n");
  }
  pb::StatusRequest request;
  request.set_token(command.token);
  request.set_run_id(command.run_id);
  pb::StatusReply reply;
  const grpc::Status status = stub->Status(&context, request, &reply);
  if (!status.ok()) return CallFailed(command, status);
  if (command.json) return StatusJson(reply, /*indent=*/true);
  if (!command.run_id.empty() && reply.runs_size() == 1) return FormatRunStatus(reply.runs(0));
  return FormatRunList(reply);
}

}  // namespace ddprun
