// 200 consecutive crash-and-restart cycles on 2 agents and ddprun-master: the launchers'
// open file descriptors, threads and memory stay flat, and nothing is left at the end.

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

constexpr int kCycles = 200;
constexpr int kEarly = 10;  // sampled after the first cycles have warmed everything up
constexpr int kLate = kCycles - 10;

struct Footprint {
  int fds = 0;
  int threads = 0;
  long rss_kib = 0;
};

Footprint SampleOnce(pid_t pid) {
  Footprint f;
  if (DIR* d = ::opendir(absl::StrCat("/proc/", pid, "/fd").c_str())) {
    while (dirent* e = ::readdir(d)) f.fds += e->d_name[0] != '.';
    ::closedir(d);
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (absl::StartsWith(line, "Threads:")) (void)absl::SimpleAtoi(line.substr(8), &f.threads);
    if (absl::StartsWith(line, "VmRSS:")) {
      (void)absl::SimpleAtoi(line.substr(6, line.size() - 6 - 3), &f.rss_kib);
    }
  }
  return f;
}

// The launcher at rest: the least of samples over half a second. A connection or a thread
// that happens to be open at one instant (a keep-alive, a gRPC poller) is not counted; a
// leak is there at every instant.
Footprint Sample(pid_t pid) {
  Footprint least = SampleOnce(pid);
  for (int i = 0; i < 25; ++i) {
    ::usleep(20000);
    const Footprint f = SampleOnce(pid);
    least.fds = std::min(least.fds, f.fds);
    least.threads = std::min(least.threads, f.threads);
    least.rss_kib = std::min(least.rss_kib, f.rss_kib);
  }
  return least;
}

// Processes whose command line mentions `needle` (the test's own folder).
int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  DIR* d = ::opendir("/proc");
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    n += cmdline.find(needle) != std::string::npos;
  }
  if (d) ::closedir(d);
  return n;
}

TEST(Soak, TwoHundredCrashRestartCyclesKeepTheLaunchersFlat) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto master =
      ChildProcess::Start({DDPRUN_MASTER_BIN, "--host=127.0.0.1", absl::StrCat("--port=", port)});
  auto agent = [&](int node) {
    return ChildProcess::Start(
        DdprunWithTestWorker({"--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                              absl::StrCat("--rdzv-endpoint=127.0.0.1:", port), "--rdzv-id=soak",
                              absl::StrCat("--local-addr=127.0.0.", node), "--rdzv-conf=is_host=0",
                              absl::StrCat("--max-restarts=", kCycles)},
                             {"crash-until", std::to_string(kCycles), dir.path()}));
  };
  WriteFile(dir / absl::StrCat("pause.", kEarly), "");
  WriteFile(dir / absl::StrCat("pause.", kLate), "");
  auto a = agent(1);
  auto b = agent(2);
  const std::vector<std::pair<std::string, pid_t>> launchers = {
      {"ddprun-master", master->pid()}, {"agent 1", a->pid()}, {"agent 2", b->pid()}};

  std::vector<Footprint> early, late;
  for (auto [cycle, samples] :
       {std::pair<int, std::vector<Footprint>*>{kEarly, &early}, {kLate, &late}}) {
    // Sampled when every rank of the cycle runs on both agents: each launcher is at the same
    // point of its cycle at both samples, not stopping or starting workers.
    const auto all_up = [&, cycle = cycle] {
      for (int rank = 0; rank < 4; ++rank) {
        if (!FileExists(dir / absl::StrCat("up.", cycle, ".", rank))) return false;
      }
      return FileExists(dir / absl::StrCat("at.", cycle));
    };
    ASSERT_TRUE(WaitUntil(all_up, absl::Seconds(300)))
        << "cycle " << cycle << " never came: " << a->ErrSoFar();
    for (const auto& [name, pid] : launchers) samples->push_back(Sample(pid));
    WriteFile(dir / absl::StrCat("go.", cycle), "");
  }
  ProcessResult ra = a->Wait(absl::Seconds(120));
  ProcessResult rb = b->Wait(absl::Seconds(120));
  EXPECT_EQ(ra.exit_code, 0) << ra.err.substr(0, 2000);
  EXPECT_EQ(rb.exit_code, 0);
  EXPECT_EQ(CountLinesContaining(ra.err, "restart budget spent"), 0);

  for (size_t i = 0; i < launchers.size(); ++i) {
    std::printf(
        "[ soak ] %s after cycle %d -> %d: fds %d -> %d, threads %d -> %d, RSS %ld -> %ld KiB\n",
        launchers[i].first.c_str(), kEarly, kLate, early[i].fds, late[i].fds, early[i].threads,
        late[i].threads, early[i].rss_kib, late[i].rss_kib);
    // 180 cycles apart: a leak per cycle shows as +180; 2 allows a connection or a gRPC
    // thread that happens to be open at one sample only.
    EXPECT_LE(late[i].fds, early[i].fds + 2) << launchers[i].first << " leaks file descriptors";
    EXPECT_LE(late[i].threads, early[i].threads + 2) << launchers[i].first << " grows threads";
#ifndef __SANITIZE_ADDRESS__  // ASan holds freed memory in quarantine: RSS grows by design
    EXPECT_LT(late[i].rss_kib, early[i].rss_kib + 2048) << launchers[i].first << " grows memory";
#endif
  }
  kill(master->pid(), SIGTERM);
  EXPECT_EQ(master->Wait(absl::Seconds(10)).exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return ProcessesMentioning(dir.path()) == 0; }, absl::Seconds(10)))
      << "processes of the test are still running";
}

}  // namespace
}  // namespace ddprun::testing
