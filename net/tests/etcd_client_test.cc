// EtcdClient's fenced calls against a real etcd (tests/support/etcd_server.h): what a leader
// writes or deletes only while it still leads.
#include "net/etcd_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "tests/support/etcd_server.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kLeaderKey[] = "/ddprun/job/leader";

class EtcdFenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdServer::Start();
    ASSERT_NE(etcd_, nullptr);
    EtcdSettings settings;
    settings.endpoints = {etcd_->endpoint()};
    client_ = std::make_unique<EtcdClient>(settings);
  }

  // The leader key as a campaign creates it, bound to a lease; its creation revision.
  int64_t Lead(const std::string& address) {
    absl::StatusOr<int64_t> lease = client_->GrantLease(absl::Seconds(30));
    EXPECT_TRUE(lease.ok()) << lease.status();
    absl::StatusOr<EtcdClient::Campaign> campaign =
        client_->CreateUnlessPresent(kLeaderKey, address, lease.value_or(0));
    EXPECT_TRUE(campaign.ok() && campaign->won) << campaign.status();
    return campaign.ok() ? campaign->holder.create_revision : 0;
  }

  std::unique_ptr<EtcdServer> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdFenceTest, ALeaderDeletesTheRunsKeysWhileItsKeyIsItsOwn) {
  const int64_t revision = Lead("127.0.0.1:1");
  ASSERT_TRUE(*client_->PutIfFenced(kLeaderKey, revision, "/ddprun/job/state", "memory"));
  EXPECT_THAT(etcd_->Keys("/ddprun/job/"), HasSubstr("/ddprun/job/state"));
  absl::StatusOr<bool> deleted =
      client_->DeletePrefixIfFenced(kLeaderKey, revision, "/ddprun/job/");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(*deleted);
  EXPECT_EQ(etcd_->Keys("/ddprun/"), "");
}

// A leader whose lease lapsed, and another node elected since: the old one's delete and
// writes leave the new leader's key and the run's memory alone.
TEST_F(EtcdFenceTest, ALeaderThatLostItsKeyDeletesAndWritesNothing) {
  const int64_t old_revision = Lead("127.0.0.1:1");
  ASSERT_TRUE(*client_->PutIfFenced(kLeaderKey, old_revision, "/ddprun/job/state", "memory"));
  ASSERT_EQ(etcd_->Ctl({"del", kLeaderKey}).exit_code, 0);  // as a lapsed lease does
  Lead("127.0.0.2:1");
  absl::StatusOr<bool> deleted =
      client_->DeletePrefixIfFenced(kLeaderKey, old_revision, "/ddprun/job/");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_FALSE(*deleted);
  absl::StatusOr<bool> written =
      client_->PutIfFenced(kLeaderKey, old_revision, "/ddprun/job/state", "stale");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_FALSE(*written);
  EXPECT_THAT(etcd_->Keys("/ddprun/job/"), HasSubstr("/ddprun/job/leader"));
  EXPECT_EQ(etcd_->Ctl({"get", "--print-value-only", "/ddprun/job/state"}).out, "memory\n");
  EXPECT_EQ(etcd_->Ctl({"get", "--print-value-only", kLeaderKey}).out, "127.0.0.2:1\n");
}

// A key overwritten in place keeps its creation revision: the fence sees it all the same.
TEST_F(EtcdFenceTest, AnOverwrittenLeaderKeyFencesTheDeleteToo) {
  const int64_t revision = Lead("127.0.0.1:1");
  ASSERT_EQ(etcd_->Ctl({"put", kLeaderKey, "127.0.0.9:9"}).exit_code, 0);
  absl::StatusOr<bool> deleted =
      client_->DeletePrefixIfFenced(kLeaderKey, revision, "/ddprun/job/");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_FALSE(*deleted);
  EXPECT_THAT(etcd_->Keys("/ddprun/job/"), HasSubstr("/ddprun/job/leader"));
}

}  // namespace
}  // namespace ddprun::testing
