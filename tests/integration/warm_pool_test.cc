// --preload's guards, with Debian's python3 and modules written by the test (no torch): each
// way the warm pool cannot be used makes the agent say why in one line and start workers the
// usual way, and the job still runs. And a preloaded module changed on disk between attempts
// is imported again by a new interpreter.

#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kForked[] = "workers are forked from it";
constexpr char kFellBack[] = "--preload: workers start the usual way from now on: ";

// Each worker writes <dir>/done.<RANK>; rank 0 of the first attempt fails if `crash` exists
// in <dir> by then, after waiting for `go` (when asked to).
constexpr char kWorker[] = R"(import os, sys, time
d = sys.argv[1]
rank, attempt = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
if len(sys.argv) > 2 and attempt == "0":
    open(os.path.join(d, "running." + rank), "w").close()
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.01)
    if rank == "0":
        sys.exit(5)
import preloaded
open(os.path.join(d, "done.%s.%s" % (rank, attempt)), "w").write(str(preloaded.VALUE))
)";

struct Job {
  TempDir dir;
  std::string worker = dir.Write("worker.py", kWorker);
  std::map<std::string, std::optional<std::string>> env = {
      {"PYTHON_EXEC", "/usr/bin/python3"}, {"LOGLEVEL", "INFO"}, {"PYTHONPATH", dir.path()}};

  void Module(const std::string& name, const std::string& code) { dir.Write(name + ".py", code); }
  std::vector<std::string> Argv(const std::string& preload, bool wait_for_go = false) {
    std::vector<std::string> argv = {
        kDdprun,   "--nproc-per-node=2", "--max-restarts=1", "--preload=" + preload, worker,
        dir.path()};
    if (wait_for_go) argv.push_back("wait");
    return argv;
  }
};

TEST(WarmPool, WorkersAreForkedFromTheInterpreterThatImportedTheModules) {
  Job job;
  job.Module("preloaded", "VALUE = 1\n");
  ProcessResult r = RunProcess(job.Argv("json,preloaded"), job.env, absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(kForked));
  EXPECT_THAT(r.err, Not(HasSubstr(kFellBack)));
  EXPECT_EQ(ReadFile(job.dir / "done.1.0"), "1");
}

struct Guard {
  std::string name;
  std::string module;  // preloaded.py's code
  std::string said;    // in the one line the agent writes
};
void PrintTo(const Guard& guard, std::ostream* os) { *os << guard.name; }

class WarmPoolGuards : public ::testing::TestWithParam<Guard> {};

TEST_P(WarmPoolGuards, FallBackWithOneLineAndTheJobRuns) {
  Job job;
  job.Module("preloaded", GetParam().module);
  ProcessResult r = RunProcess(job.Argv("preloaded"), job.env, absl::Seconds(120));
  EXPECT_EQ(r.exit_code, GetParam().name == "raises" ? 1 : 0) << r.err;
  EXPECT_EQ(CountLinesContaining(r.err, kFellBack), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(kFellBack + GetParam().said));
  EXPECT_THAT(r.err, Not(HasSubstr(kForked)));
  if (GetParam().name != "raises") EXPECT_TRUE(FileExists(job.dir / "done.1.0"));
}

// A copy of one of Python's own extension modules, named as the GPU driver, loaded as a
// driver would be: what a module that reaches for CUDA at import leaves in the process.
constexpr char kFakeDriver[] = R"(import ctypes, glob, os, shutil, sysconfig, tempfile
VALUE = 3
source = sorted(glob.glob(os.path.join(sysconfig.get_path("platstdlib"), "lib-dynload", "*.so")))[0]
fake = os.path.join(tempfile.mkdtemp(), "libcuda.so.1")
shutil.copy(source, fake)
ctypes.CDLL(fake)
)";

INSTANTIATE_TEST_SUITE_P(
    Guards, WarmPoolGuards,
    ::testing::Values(
        Guard{"thread",
              "import threading, time\nVALUE = 2\n"
              "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n",
              "the preloaded interpreter has 2 threads"},
        Guard{"fake_cuda_driver", kFakeDriver, "libcuda.so is loaded in the preloaded interpreter"},
        Guard{"raises", "raise RuntimeError('no config file')\n",
              "import preloaded raised RuntimeError: no config file"},
        // A client that connects at import (a metrics exporter, a database): every forked
        // worker would write into that one connection.
        Guard{"socket",
              "import socket\nVALUE = 4\n"
              "_server = socket.create_server(('127.0.0.1', 0))\n"
              "_client = socket.create_connection(_server.getsockname())\n",
              "import preloaded left a socket open (fd "}),
    [](const ::testing::TestParamInfo<Guard>& info) { return info.param.name; });

pid_t PoolPid(const std::string& err) {
  std::smatch found;
  if (!std::regex_search(err, found, std::regex("the warm pool \\(pid ([0-9]+)\\)"))) return -1;
  return std::stoi(found[1]);
}

// The pool's interpreter SIGKILLed while the job runs: the restart after rank 0's failure
// starts its workers the usual way, saying why once, and the job ends well.
TEST(WarmPool, AnInterpreterKilledMidJobIsReplacedByStartedWorkers) {
  Job job;
  job.Module("preloaded", "VALUE = 4\n");
  auto agent = ChildProcess::Start(job.Argv("preloaded", /*wait_for_go=*/true), job.env);
  // Mid-job: both workers run, and the agent has said so (it holds both pids).
  ASSERT_TRUE(WaitUntil(
      [&] {
        return FileExists(job.dir / "running.0") && FileExists(job.dir / "running.1") &&
               absl::StrContains(agent->ErrSoFar(), "attempt 0: started 2 workers");
      },
      absl::Seconds(60)))
      << agent->ErrSoFar();
  const pid_t pool = PoolPid(agent->ErrSoFar());
  ASSERT_GT(pool, 0) << agent->ErrSoFar();
  ASSERT_EQ(::kill(pool, SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] { return !ProcessAlive(pool); }, absl::Seconds(30)));
  job.dir.Write("go", "");
  ProcessResult r = agent->Wait(absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(CountLinesContaining(r.err, kFellBack), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(kFellBack, "its interpreter (pid ", pool,
                                            ") ended: signal 9 (SIGKILL)")));
  EXPECT_EQ(ReadFile(job.dir / "done.0.1"), "4");
}

// The user fixes a preloaded module while the job runs; the restart imports the fix.
TEST(WarmPool, APreloadedModuleChangedOnDiskIsImportedAgainForTheNextAttempt) {
  Job job;
  job.Module("preloaded", "VALUE = 5\n");
  auto agent = ChildProcess::Start(job.Argv("preloaded", /*wait_for_go=*/true), job.env);
  ASSERT_TRUE(WaitUntil([&] { return FileExists(job.dir / "running.1"); }, absl::Seconds(60)))
      << agent->ErrSoFar();
  job.Module("preloaded", "VALUE = 6  # fixed\n");
  job.dir.Write("go", "");
  ProcessResult r = agent->Wait(absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("preloaded.py changed since the warm pool imported it"));
  EXPECT_EQ(CountLinesContaining(r.err, kForked), 2) << "a new pool, and forked from: " << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr(kFellBack)));
  EXPECT_EQ(ReadFile(job.dir / "done.0.1"), "6");
  EXPECT_EQ(ReadFile(job.dir / "done.1.1"), "6");
}

// A descriptor the agent was started with and not told to close on exec (a shell's `7<file`,
// a scheduler's socket): torchrun's Popen closes it, and no worker, started or forked, nor
// the pool's interpreter gets it here either.
TEST(WarmPool, ADescriptorTheAgentInheritedReachesNoWorker) {
  for (bool pool : {false, true}) {
    SCOPED_TRACE(pool ? "--preload=json" : "started");
    Job job;
    const std::string worker =
        job.dir.Write("fds.py",
                      "import os, sys\n"
                      "open(os.path.join(sys.argv[1], 'fds.' + os.environ['RANK']), 'w').write("
                      "' '.join(sorted(os.listdir('/proc/self/fd'), key=int)))\n");
    std::vector<std::string> argv = {"/bin/sh", "-c",    "exec 7</etc/hostname; exec \"$@\"",
                                     "sh",      kDdprun, "--nproc-per-node=2"};
    if (pool) argv.push_back("--preload=json");
    argv.insert(argv.end(), {worker, job.dir.path()});
    ProcessResult r = RunProcess(argv, job.env, absl::Seconds(120));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (pool) EXPECT_THAT(r.err, HasSubstr(kForked));
    for (const char* rank : {"0", "1"}) {
      const std::vector<std::string> fds =
          absl::StrSplit(ReadFile(job.dir / ("fds." + std::string(rank))), ' ');
      EXPECT_THAT(fds, Not(::testing::Contains("7"))) << "rank " << rank;
    }
  }
}

// Tools that map pids to ranks read /proc/PID/environ, not the worker's own os.environ: a
// forked worker's shows its RANK and LOCAL_RANK, as a started one's does.
TEST(WarmPool, AForkedWorkersProcEnvironNamesItsRank) {
  Job job;
  const std::string worker = job.dir.Write(
      "environ.py",
      "import os, sys\n"
      "seen = dict(e.split(b'=', 1) for e in open('/proc/self/environ', 'rb').read().split(b'\\0')"
      " if b'=' in e)\n"
      "open(os.path.join(sys.argv[1], 'environ.' + os.environ['RANK']), 'w').write("
      "'%s %s' % (seen[b'RANK'].decode(), seen[b'LOCAL_RANK'].decode()))\n");
  ProcessResult r =
      RunProcess({kDdprun, "--nproc-per-node=2", "--preload=json", worker, job.dir.path()}, job.env,
                 absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(kForked));
  EXPECT_EQ(ReadFile(job.dir / "environ.0"), "0 0");
  EXPECT_EQ(ReadFile(job.dir / "environ.1"), "1 1");
}

// An environment of 400 KiB (four variables of 100 KiB: exec takes up to 2 MiB), more than
// a socket's default send buffer (208 KiB): as root the pool's socket is made to carry it and
// the workers are forked; otherwise the agent says what limits it, and starts them.
TEST(WarmPool, ALargeEnvironmentReachesForkedWorkersOrIsSaid) {
  Job job;
  job.Module("preloaded", "VALUE = 7\n");
  for (int i = 0; i < 4; ++i) job.env[absl::StrCat("BIG_", i)] = std::string(100 * 1024, 'x');
  ProcessResult r = RunProcess(job.Argv("preloaded"), job.env, absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 4096);
  EXPECT_EQ(ReadFile(job.dir / "done.1.0"), "7");
  if (::geteuid() == 0) {
    EXPECT_THAT(r.err, HasSubstr(kForked));
    EXPECT_THAT(r.err, Not(HasSubstr(kFellBack)));
  } else {
    EXPECT_THAT(r.err, HasSubstr("are more than one message to the warm pool carries"));
  }
}

// A preloaded module that takes 8 s to import, in a 2-node job whose master drops a node
// after 3 s without a heartbeat: the workers wait for the pool in the agent's loop, which
// goes on beating, so no node is dropped and nothing restarts (it once blocked the agent:
// both nodes dropped, every worker restarted).
TEST(WarmPool, ASlowImportKeepsTheAgentsHeartbeatsGoing) {
  Job job;
  job.Module("preloaded", "import time\ntime.sleep(8)\nVALUE = 8\n");
  const int port = FreeLoopbackPort();
  const auto agent = [&](bool hosts) {
    return ChildProcess::Start(
        {kDdprun, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
         absl::StrCat("--rdzv-endpoint=127.0.0.1:", port), "--rdzv-id=slow", "--max-restarts=1",
         "--preload=preloaded",
         absl::StrCat("--rdzv-conf=keep_alive_interval=1,keep_alive_max_attempt=3",
                      hosts ? "" : ",is_host=0"),
         job.worker, job.dir.path()},
        job.env);
  };
  auto host = agent(true);
  auto other = agent(false);
  ProcessResult h = host->Wait(absl::Seconds(120)), o = other->Wait(absl::Seconds(120));
  ASSERT_EQ(h.exit_code, 0) << h.err;
  ASSERT_EQ(o.exit_code, 0) << o.err;
  for (const ProcessResult* r : {&h, &o}) {
    EXPECT_THAT(r->err, HasSubstr("its workers wait for the warm pool to import preloaded"));
    EXPECT_THAT(r->err, HasSubstr(kForked));
    EXPECT_THAT(r->err, Not(HasSubstr(kFellBack)));
  }
  for (const ProcessResult* r : {&h, &o}) {
    // A node dropped for silence spends no restart: its next round is attempt 1 all the same.
    EXPECT_THAT(r->err, Not(HasSubstr("no heartbeat for"))) << r->err;
    EXPECT_THAT(r->err, Not(HasSubstr("attempt 1:"))) << r->err;
  }
  EXPECT_EQ(ReadFile(job.dir / "done.0.0"), "8");
  EXPECT_EQ(ReadFile(job.dir / "done.1.0"), "8");
}

// SIGTERM while the workers wait for a slow import: the agent ends at once with 143, and
// the pool's interpreter with it (it once took effect only when the wait ended).
TEST(WarmPool, ASignalDuringASlowImportEndsTheAgentAtOnce) {
  Job job;
  job.Module("preloaded", absl::StrCat("import os, time\nopen('", job.dir / "pool.pid",
                                       "', 'w').write(str(os.getpid()))\ntime.sleep(120)\n"));
  auto agent = ChildProcess::Start(job.Argv("preloaded"), job.env);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return FileExists(job.dir / "pool.pid") &&
               absl::StrContains(agent->ErrSoFar(), "its workers wait for the warm pool");
      },
      absl::Seconds(60)))
      << agent->ErrSoFar();
  const absl::Time sent = absl::Now();
  ASSERT_EQ(::kill(agent->pid(), SIGTERM), 0);
  ProcessResult r = agent->Wait(absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_LT(absl::Now() - sent, absl::Seconds(10)) << r.err;
  int pool = 0;
  ASSERT_TRUE(absl::SimpleAtoi(ReadFile(job.dir / "pool.pid"), &pool));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(pool); }, absl::Seconds(10)))
      << "the pool's interpreter outlived its agent";
  EXPECT_FALSE(FileExists(job.dir / "done.0.0")) << "no worker started after the stop";
}

}  // namespace
}  // namespace ddprun::testing
