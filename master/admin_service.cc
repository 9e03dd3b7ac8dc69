#include "master/admin_service.h"

#include "ddprun/v1/admin.grpc.pb.h"
#include "rpc/wire.h"

namespace ddprun {
namespace {

namespace pb = ::ddprun::v1;

class AdminService final : public pb::Admin::CallbackService {
 public:
  explicit AdminService(MasterState* master) : master_(master) {}

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const pb::StatusRequest* request,
                                   pb::StatusReply* reply) override {
    absl::StatusOr<pb::StatusReply> status = master_->Status(request->token(), request->run_id());
    if (status.ok()) *reply = std::move(*status);
    return FinishUnary(context, status.status());
  }

  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext* context,
                                 const pb::StopRequest* request, pb::StopReply* reply) override {
    absl::StatusOr<std::string> detail =
        master_->StopRun(request->token(), request->run_id(), request->reason(), context->peer());
    if (detail.ok()) reply->set_detail(*detail);
    return FinishUnary(context, detail.status());
  }

 private:
  MasterState* master_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeAdminService(MasterState* master) {
  return std::make_unique<AdminService>(master);
}

}  // namespace ddprun
