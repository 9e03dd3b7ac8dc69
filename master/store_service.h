#pragma once
// The Store service: the key-value store workers share, one KvStore per run id, held by
// MasterState. Blocking reads wait there without a thread; their replies run off its mutex.

#include <grpcpp/grpcpp.h>

#include <memory>

#include "master/master_state.h"

namespace ddprun {

std::unique_ptr<grpc::Service> MakeStoreService(MasterState* master);

}  // namespace ddprun
