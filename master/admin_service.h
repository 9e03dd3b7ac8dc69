#pragma once
// The Admin service (admin.proto): `ddprun status` and `ddprun stop`, on the master's port,
// with its token and TLS.

#include <grpcpp/grpcpp.h>

#include <memory>

#include "master/master_state.h"

namespace ddprun {

std::unique_ptr<grpc::Service> MakeAdminService(MasterState* master);

}  // namespace ddprun
