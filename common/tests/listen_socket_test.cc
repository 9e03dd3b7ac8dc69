#include "common/listen_socket.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <functional>
#include <utility>

#include "absl/status/status.h"

namespace ddprun {
namespace {

using ListenFn = int (*)(int, int);

ListenFn RealListen() {
  static const auto real = reinterpret_cast<ListenFn>(::dlsym(RTLD_NEXT, "listen"));
  return real;
}

// What another process does around this process's next listen(): before it, and after it.
std::function<void(int fd)> g_before_listen;
std::function<void()> g_after_listen;

}  // namespace
}  // namespace ddprun

// This test's listen() is libc's, with another process's moves around it when a test arms
// them: the two halves of a race that the kernel decides in a few instructions, made to
// happen every time.
extern "C" int listen(int fd, int backlog) {
  auto before = std::exchange(ddprun::g_before_listen, nullptr);
  auto after = std::exchange(ddprun::g_after_listen, nullptr);
  if (before) before(fd);
  const int rc = ddprun::RealListen()(fd, backlog);
  const int saved = errno;
  if (after) after();
  errno = saved;
  return rc;
}

namespace ddprun {
namespace {

// A socket like ListenTcp's (SO_REUSEADDR, the same address and port, the same IPv6-only
// setting as `fd`) that the other agent binds while `fd` is bound and not yet listening.
UniqueFd BindBeside(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  UniqueFd rival(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int yes = 1;
  ::setsockopt(rival.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (addr.ss_family == AF_INET6) {
    int only = 0;
    socklen_t size = sizeof only;
    ::getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, &size);
    ::setsockopt(rival.get(), IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof only);
  }
  EXPECT_EQ(::bind(rival.get(), reinterpret_cast<sockaddr*>(&addr), len), 0) << errno;
  return rival;
}

int FreePort() {
  absl::StatusOr<std::vector<UniqueFd>> picked = ListenTcp("127.0.0.1", 0);
  EXPECT_TRUE(picked.ok()) << picked.status();
  return picked.ok() ? BoundPort(picked->front().get()) : 0;
}

// The other agent binds beside this one's socket and listens first, just before this one's
// listen(); `raced` says it did.
void ListenFirstBeside(UniqueFd& rival, bool& raced) {
  g_before_listen = [&rival, &raced](int fd) {
    rival = BindBeside(fd);
    ASSERT_EQ(RealListen()(rival.get(), 8), 0) << errno;
    raced = true;
  };
}

class ListenTcpRaceTest : public ::testing::TestWithParam<std::string> {};

// Agents of one job on one host race for the master's port (launcher/rendezvous_start.cc).
// Both bind it, then both listen at once and both fail: each saw the other listening for
// an instant, and each gives the port up. Here the other agent's half is made to happen
// between this one's bind and listen: ListenTcp tries again and listens, where it used to
// answer "in use" while nothing listened, and every agent of the job left.
TEST_P(ListenTcpRaceTest, BothListeningAtOnceAndTheOtherGivingUpThisOneListens) {
  const int port = FreePort();
  UniqueFd rival;
  bool raced = false;
  ListenFirstBeside(rival, raced);
  g_after_listen = [&] { rival.Reset(); };
  absl::StatusOr<std::vector<UniqueFd>> listening = ListenTcp(GetParam(), port);
  ASSERT_TRUE(raced) << "the other agent's half did not run: this test's listen() is not used";
  ASSERT_TRUE(listening.ok()) << listening.status();
  EXPECT_EQ(BoundPort(listening->front().get()), port);
}

// The other agent's listen won: this one tries again, and the port is in use.
TEST_P(ListenTcpRaceTest, TheOtherListeningFirstThisOneHearsInUse) {
  const int port = FreePort();
  UniqueFd rival;
  bool raced = false;
  ListenFirstBeside(rival, raced);
  absl::StatusOr<std::vector<UniqueFd>> listening = ListenTcp(GetParam(), port);
  ASSERT_TRUE(raced) << "the other agent's half did not run: this test's listen() is not used";
  EXPECT_TRUE(absl::IsUnavailable(listening.status())) << listening.status();
}

INSTANTIATE_TEST_SUITE_P(EveryAddressAndLoopback, ListenTcpRaceTest,
                         ::testing::Values("", "127.0.0.1"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("Everywhere")
                                                     : std::string("Loopback");
                         });

}  // namespace
}  // namespace ddprun
