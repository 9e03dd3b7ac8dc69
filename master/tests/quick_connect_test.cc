// An agent that tries before its master listens (agents started together, the Slurm case)
// tries again on ddprun's own schedule for the first second instead of waiting out gRPC's
// back-off (100 ms, then 160, 256, ...), which made a 2-agent launch 40-150 ms.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "net/grpc_rendezvous.h"
#include "rpc/grpc_channel.h"
#include "tests/support/silent_listener.h"

namespace ddprun {
namespace {

TEST(QuickConnectTest, LooksOftenInTheFirstSecondOnly) {
  const std::vector<absl::Duration> pauses = QuickConnectPauses();
  ASSERT_GE(pauses.size(), 8u);
  EXPECT_EQ(pauses.front(), absl::Milliseconds(5));
  absl::Duration total;
  for (absl::Duration pause : pauses) total += pause;
  EXPECT_LE(total, absl::Seconds(1));
  EXPECT_GT(total, absl::Milliseconds(500));
}

// Connections accepted on `listener` and closed at once (a try that fails, as one before
// the master listens does) until `deadline`.
int AcceptAndCloseUntil(int listener, absl::Time deadline) {
  int accepted = 0;
  for (absl::Time now = absl::Now(); now < deadline; now = absl::Now()) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - now)) + 1) != 1) {
      continue;
    }
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd >= 0) {
      ::close(fd);
      ++accepted;
    }
  }
  return accepted;
}

// gRPC alone tries at 0, ~100, ~260, ~516 and ~926 ms (each +-20%): at most 5 in 1.2 s.
TEST(QuickConnectTest, AnAgentWhoseTriesFailTriesAgainWithinMilliseconds) {
  testing::SilentListener listener;
  ASSERT_NE(listener.port, 0);
  NetworkRendezvousOptions options;
  options.endpoint = absl::StrCat("127.0.0.1:", listener.port);
  options.run_id = "job";
  const absl::Time start = absl::Now();
  GrpcRendezvous agent(options);
  EXPECT_GE(AcceptAndCloseUntil(listener.fd.get(), start + absl::Milliseconds(1200)), 8);
}

}  // namespace
}  // namespace ddprun
