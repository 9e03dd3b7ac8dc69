// An agent never waits in silence: at the default log level, within seconds of its join, a
// node says what answers at its master's address when no master does, refuses to "join" a
// program that holds the port it meant to host on, and, while it waits for the others, says
// whom it waits for; the hosting node names the nodes it turned away. Command lines as users
// type them: no --local-addr, no LOGLEVEL.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/silent_listener.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> C10dAgent(int port, const TempDir& dir, const std::string& nnodes,
                                   std::vector<std::string> extra = {}) {
  std::vector<std::string> options = {
      "--nnodes=" + nnodes, "--nproc-per-node=1", "--rdzv-backend=c10d",
      absl::StrCat("--rdzv-endpoint=127.0.0.1:", port), "--rdzv-id=job"};
  options.insert(options.end(), extra.begin(), extra.end());
  return DdprunWithTestWorker(options, {"env", dir.path()});
}

// Waits for `needle` on the agent's stderr (the deadline is a margin for a loaded machine;
// when the line comes is the rules' test, agent/tests).
bool Says(ChildProcess& agent, const std::string& needle) {
  return WaitUntil([&] { return agent.ErrSoFar().find(needle) != std::string::npos; },
                   absl::Seconds(60));
}

void Stop(ChildProcess& agent) {
  ::kill(agent.pid(), SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(30)).exit_code, 128 + SIGTERM);
}

// The master is on another machine (is_host=0) and not up yet.
TEST(Waiting, AnAgentWhoseMasterIsNotUpSaysNothingListensThere) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto agent = ChildProcess::Start(C10dAgent(port, dir, "2", {"--rdzv-conf=is_host=0"}));
  ASSERT_TRUE(Says(*agent, absl::StrCat("does not answer: nothing listens on port ", port,
                                        " of 127.0.0.1 (Connection refused)")))
      << agent->ErrSoFar();
  EXPECT_THAT(agent->ErrSoFar(), HasSubstr(absl::StrCat("waiting for a round for ")));
  EXPECT_THAT(agent->ErrSoFar(), HasSubstr("this node gives up in "));
  Stop(*agent);
}

TEST(Waiting, AnAgentWhoseMasterAddressHoldsAnotherProgramSaysSo) {
  TempDir dir;
  SilentListener other;
  auto agent = ChildProcess::Start(C10dAgent(other.port, dir, "2", {"--rdzv-conf=is_host=0"}));
  ASSERT_TRUE(Says(*agent, absl::StrCat("something listens on 127.0.0.1:", other.port,
                                        " but does not answer as a ddprun rendezvous master")))
      << agent->ErrSoFar();
  Stop(*agent);
}

// The agent would host the master, but another program holds the port: it does not "join"
// that program and wait, it leaves with 75 naming the port. c10d, and static node 0.
TEST(Waiting, APortHeldByAnotherProgramEndsTheHostWith75NamingIt) {
  TempDir dir;
  SilentListener other(INADDR_ANY);
  const std::string held = absl::StrCat("port ", other.port,
                                        " on this machine, where this node would host the "
                                        "rendezvous master, is held by a program that is not");
  ProcessResult c10d = RunProcess(C10dAgent(other.port, dir, "2"), {}, absl::Seconds(60));
  EXPECT_EQ(c10d.exit_code, 75) << c10d.err;
  EXPECT_THAT(c10d.err, HasSubstr(held));
  ProcessResult node0 =
      RunProcess(DdprunWithTestWorker({"--nnodes=2", "--node-rank=0", "--master-addr=127.0.0.1",
                                       absl::StrCat("--master-port=", other.port)},
                                      {"env", dir.path()}),
                 {}, absl::Seconds(60));
  EXPECT_EQ(node0.exit_code, 75) << node0.err;
  EXPECT_THAT(node0.err, HasSubstr(held));
}

// The first node says whom it waits for; the host names the node it refused, and why.
TEST(Waiting, AFirstNodeSaysWhomItWaitsForAndTheHostWhomItRefused) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto first = ChildProcess::Start(C10dAgent(port, dir, "2"));
  ASSERT_TRUE(Says(*first, "a round needs 2 nodes (--nnodes=2:2); 1 joined: "))
      << first->ErrSoFar();
  EXPECT_THAT(first->ErrSoFar(), HasSubstr(" (join_timeout) unless 1 more joins"));
  ProcessResult other =
      RunProcess(C10dAgent(port, dir, "3", {"--rdzv-conf=is_host=0"}), {}, absl::Seconds(60));
  EXPECT_EQ(other.exit_code, 75) << other.err;
  EXPECT_THAT(other.err, HasSubstr("was started with --nnodes=3:3"));
  ASSERT_TRUE(Says(*first, "refused a session from ")) << first->ErrSoFar();
  EXPECT_THAT(first->ErrSoFar(), HasSubstr("was started with --nnodes=3:3"));
  Stop(*first);
}

}  // namespace
}  // namespace ddprun::testing
