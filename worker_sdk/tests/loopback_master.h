#pragma once
// A Store served on loopback for the SDK's store tests, as a worker's rank 0 serves it
// (the master's Store service, alone).

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "ddp/worker/environment.h"
#include "rpc/store_only_server.h"

namespace ddp::worker {

/// One rank of a one-node job on loopback (round 3, run "job"); `store_addr` empty: rank 0
/// serves the store at `master_port`.
inline Environment RankEnv(int rank, int world_size, int master_port,
                           const std::string& store_addr) {
  Environment env;
  env.rank = rank;
  env.local_rank = rank;
  env.world_size = world_size;
  env.local_world_size = world_size;
  env.master_addr = "127.0.0.1";
  env.master_port = master_port;
  env.run_id = "job";
  env.round = 3;
  env.store_addr = store_addr;
  return env;
}

class LoopbackMasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ddprun::StoreOnlyOptions options;
    // The Store alone: a master with sessions serves the Store of joined runs only.
    options.serving.host = "127.0.0.1";
    auto master = ddprun::StoreOnlyServer::Start(options);
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    addr_ = absl::StrCat("127.0.0.1:", master_->port());
  }
  std::unique_ptr<ddprun::StoreOnlyServer> master_;
  std::string addr_;  // host:port of its Store service
};

}  // namespace ddp::worker
