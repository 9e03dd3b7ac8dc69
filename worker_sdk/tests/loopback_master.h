#pragma once
// A ddprun master on loopback for the SDK's store tests.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "rendezvous/master_server.h"

namespace ddp::worker {

class LoopbackMasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ddprun::MasterOptions options;
    options.host = "127.0.0.1";
    auto master = ddprun::MasterServer::Start(options);
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    addr_ = absl::StrCat("127.0.0.1:", master_->port());
  }
  std::unique_ptr<ddprun::MasterServer> master_;
  std::string addr_;  // host:port of its Store service
};

}  // namespace ddp::worker
