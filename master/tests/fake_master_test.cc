// A real agent against a fake master that assigns what no master of ours would: the agent
// checks every value before it starts a worker, and leaves with exit 75 naming the field.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
namespace pb = ::ddprun::v1;

// Answers every join with `assignment`, then listens until the agent goes.
class FakeMaster final : public pb::Rendezvous::Service {
 public:
  explicit FakeMaster(pb::RoundAssignment assignment) : assignment_(std::move(assignment)) {}
  grpc::Status Session(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<pb::MasterMessage, pb::AgentMessage>* stream) override {
    pb::AgentMessage message;
    if (!stream->Read(&message)) return grpc::Status::OK;
    pb::MasterMessage reply;
    *reply.mutable_assignment() = assignment_;
    stream->Write(reply);
    while (stream->Read(&message)) {
    }
    return grpc::Status::OK;
  }

 private:
  const pb::RoundAssignment assignment_;
};

pb::RoundAssignment Sound() {
  pb::RoundAssignment a;
  a.set_round(0);
  a.set_group_rank(0);
  a.set_group_world_size(2);
  a.set_base_rank(0);
  a.set_world_size(4);
  a.set_master_addr("127.0.0.1");
  a.set_master_port(29500);
  return a;
}

// Runs one agent (2 workers) against a fake master assigning `assignment`.
ProcessResult AgentAgainst(const pb::RoundAssignment& assignment, const std::string& dir) {
  FakeMaster service(assignment);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ProcessResult result =
      RunProcess(DdprunWithTestWorker({"--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                                       absl::StrCat("--rdzv-endpoint=127.0.0.1:", port),
                                       "--rdzv-id=job", "--rdzv-conf=is_host=0,join_timeout=20"},
                                      {"env", dir}),
                 {}, absl::Seconds(60));
  server->Shutdown(std::chrono::system_clock::now());
  return result;
}

TEST(FakeMaster, AnAssignmentNoWorkerCanStartWithEndsTheAgentNamingTheField) {
  struct Case {
    std::string field;
    std::function<void(pb::RoundAssignment&)> spoil;
  };
  const std::vector<Case> cases = {
      {"WORLD_SIZE=0", [](pb::RoundAssignment& a) { a.set_world_size(0); }},
      {"WORLD_SIZE=-1", [](pb::RoundAssignment& a) { a.set_world_size(-1); }},
      {"RANK of LOCAL_RANK 0=3", [](pb::RoundAssignment& a) { a.set_base_rank(3); }},
      {"RANK of LOCAL_RANK 0=-2", [](pb::RoundAssignment& a) { a.set_base_rank(-2); }},
      {"GROUP_RANK=2 of 2", [](pb::RoundAssignment& a) { a.set_group_rank(2); }},
      {"MASTER_PORT=70000", [](pb::RoundAssignment& a) { a.set_master_port(70000); }},
      {"MASTER_ADDR=''", [](pb::RoundAssignment& a) { a.set_master_addr(""); }},
      {"MASTER_ADDR='10.0.0.1\\n[ddprun] forged'",
       [](pb::RoundAssignment& a) { a.set_master_addr("10.0.0.1\n[ddprun] forged"); }},
  };
  for (const Case& c : cases) {
    TempDir dir;
    pb::RoundAssignment assignment = Sound();
    c.spoil(assignment);
    ProcessResult result = AgentAgainst(assignment, dir.path());
    EXPECT_EQ(result.exit_code, 75) << c.field << "\n" << result.err;
    EXPECT_THAT(result.err, HasSubstr("the rendezvous master assigned " + c.field)) << c.field;
    EXPECT_THAT(result.err, ::testing::Not(HasSubstr("\n[ddprun] forged"))) << c.field;
    EXPECT_FALSE(FileExists(dir / "env.0.0")) << c.field << ": a worker was started";
  }
}

}  // namespace
}  // namespace ddprun::testing
