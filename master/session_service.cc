#include "master/session_service.h"

namespace ddprun {
namespace {

class RendezvousService : public v1::Rendezvous::CallbackService {
 public:
  explicit RendezvousService(MasterState* master) : master_(master) {}
  grpc::ServerBidiReactor<v1::AgentMessage, v1::MasterMessage>* Session(
      grpc::CallbackServerContext* context) override {
    return new SessionReactor(master_, context->peer());
  }

 private:
  MasterState* master_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeRendezvousService(MasterState* master) {
  return std::make_unique<RendezvousService>(master);
}

}  // namespace ddprun
