// --preload with real PyTorch (Debian's python3-torch): a worker forked from the warm pool is
// the process a started one is, and a job gives the same results, output and endings. Every
// run with the pool also checks, in the agent's log, that its workers were forked: a pool
// that quietly fell back would make these comparisons pass for nothing.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/compat/compat_paths.h"
#include "tests/compat/ddp_results.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kForked[] = "workers are forked from it";
constexpr char kFellBack[] = "--preload: workers start the usual way";

// Each test runs with Debian's torch 1.13 and with the torch 2.x root (skipped without it):
// the pool must hold for the torch users run today, whose import differs (threads, lazy
// modules, Python 3.13 in the root).
class WarmPoolCompat : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!Torch2()) return;
    if (const std::string why = WhyNoTorch2(); !why.empty()) GTEST_SKIP() << why;
  }
  bool Torch2() const { return std::string(GetParam()) == "2.x"; }
  std::map<std::string, std::optional<std::string>> JobEnv() const {
    return {{"PYTHON_EXEC", Torch2() ? kTorch2Python : kPython},
            {"LOGLEVEL", "INFO"},
            {"PYTHONPATH", kCompatDir}};
  }
  struct TwoRuns;
  TwoRuns RunBoth(const std::vector<std::string>& args) const;
};

// `args` run once as they are and once with --preload=torch (checked to have forked).
struct WarmPoolCompat::TwoRuns {
  ProcessResult started, forked;
};
WarmPoolCompat::TwoRuns WarmPoolCompat::RunBoth(const std::vector<std::string>& args) const {
  TwoRuns runs;
  for (bool pool : {false, true}) {
    std::vector<std::string> argv = {kDdprun};
    if (pool) argv.push_back("--preload=torch");
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = RunProcess(argv, JobEnv(), absl::Seconds(240));
    if (pool) {
      EXPECT_EQ(r.exit_code, runs.started.exit_code) << r.err;
      EXPECT_THAT(r.err, HasSubstr(kForked));
      EXPECT_THAT(r.err, Not(HasSubstr(kFellBack)));
    }
    (pool ? runs.forked : runs.started) = std::move(r);
  }
  return runs;
}

// The torch 2.x root's interpreter is a wrapper (torch2_python.sh) that chroots and execs
// python3: a started worker names python3 and runs in the chroot's "/", a forked one names
// the PYTHON_EXEC it was given (docs/warm-restart.md) and runs in the agent's folder. Those
// two facts are the wrapper's, not the pool's: the 1.13 runs compare them.
std::map<std::string, std::string> WithoutTheWrapper(std::map<std::string, std::string> facts) {
  if (facts["path0"] == facts["cwd"]) facts.erase("path0");  // -m: sys.path[0] is the folder
  facts.erase("cwd");
  for (const char* key : {"cmdline", "orig_argv"}) {
    facts[key] = std::regex_replace(facts[key], std::regex("^\\['torch2_python.sh'"), "['python3'");
  }
  return facts;
}

void ExpectSameFiles(const TempDir& a, const TempDir& b, const std::string& name, int ranks,
                     bool wrapped = false) {
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string file = absl::StrCat(name, ".", rank);
    ASSERT_TRUE(FileExists(a / file)) << file;
    std::map<std::string, std::string> started = ParseEnvFile(a / file);
    std::map<std::string, std::string> forked = ParseEnvFile(b / file);
    if (wrapped) {
      started = WithoutTheWrapper(std::move(started));
      forked = WithoutTheWrapper(std::move(forked));
    }
    EXPECT_FALSE(started.empty());
    for (const auto& [key, value] : started) {
      auto it = forked.find(key);
      EXPECT_TRUE(it != forked.end() && it->second == value)
          << file << ": " << key << "\n  started: " << value
          << "\n  forked:  " << (it == forked.end() ? "(none)" : it->second);
    }
    EXPECT_EQ(started.size(), forked.size()) << file;
  }
}

TEST_P(WarmPoolCompat, AForkedWorkerIsTheProcessAStartedOneWouldBe) {
  for (bool module : {false, true}) {
    SCOPED_TRACE(module ? "-m warm_pool_probe" : "warm_pool_probe.py");
    TempDir started, forked;
    std::vector<TempDir*> outs = {&started, &forked};
    for (int pool = 0; pool < 2; ++pool) {
      std::vector<std::string> argv = {kDdprun, "--nproc-per-node=2",
                                       "--worker-heartbeat-timeout=600", "--tee=1"};
      if (pool) argv.push_back("--preload=torch");
      if (module) {
        argv.insert(argv.end(), {"-m", "warm_pool_probe"});
      } else {
        argv.push_back(kCompatDir + "/warm_pool_probe.py");
      }
      argv.insert(argv.end(), {outs[pool]->path(), "--an-argument", "two words"});
      ProcessResult r = RunProcess(argv, JobEnv(), absl::Seconds(240));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      if (pool) EXPECT_THAT(r.err, HasSubstr(kForked));
      for (int rank = 0; rank < 2; ++rank) {
        EXPECT_EQ(CountLinesContaining(r.out, absl::StrCat("probe rank ", rank, " on stdout")), 1)
            << r.out;
        EXPECT_EQ(CountLinesContaining(r.err, absl::StrCat("probe rank ", rank, " on stderr")), 1)
            << r.err;
      }
    }
    ExpectSameFiles(started, forked, "probe", 2, /*wrapped=*/Torch2());
    // What is random in a fresh process is random in each forked one: Python's, torch's.
    std::set<std::string> seen;
    for (TempDir* out : outs) {
      for (int rank = 0; rank < 2; ++rank) {
        seen.insert(ReadFile(*out / absl::StrCat("random.", rank)));
      }
    }
    EXPECT_EQ(seen.size(), 4u) << "two workers drew the same random numbers";
  }
}

// Modules named as ones the pool's server and torch import, planted in the folder the job is
// started from (world-writable and sticky, as /tmp is): a started `python3 /elsewhere/x.py`
// never looks there, and the pool, which runs as the agent's user, must not either (it once
// ran a planted socket.py: `python -c` puts the working folder first on sys.path). The 2.x
// root's Python (3.14) starts in that folder too (DDPRUN_TORCH2_KEEP_CWD): there, too, a
// `python -c "import socket"` runs the planted one, and the pool does not.
TEST_P(WarmPoolCompat, AModulePlantedInTheWorkingFolderIsNotImported) {
  TempDir planted, out;
  ASSERT_EQ(::chmod(planted.path().c_str(), 01777), 0);
  const std::vector<std::string> names = {"socket", "ctypes", "types",  "time",
                                          "typing", "json",   "pickle", "numpy"};
  for (const std::string& name : names) {
    planted.Write(name + ".py", absl::StrCat("open(", "'", out / ("planted." + name), "', 'w')\n",
                                             "raise SystemExit('planted ", name, " ran')\n"));
  }
  const std::string script = out.Write("worker.py",
                                       "import os, sys, torch\n"
                                       "open(os.path.join(sys.argv[1], 'done.' + "
                                       "os.environ['RANK']), 'w').close()\n");
  {  // The attack is staged: this interpreter, started there with -c, runs the planted one.
    const std::string python = Torch2() ? kTorch2Python : kPython;
    ProcessResult staged = RunProcess({"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", planted.path(),
                                       python, "-c", "import socket"},
                                      {{"DDPRUN_TORCH2_KEEP_CWD", "1"}}, absl::Seconds(60));
    EXPECT_THAT(staged.err, HasSubstr("planted socket ran")) << "the attack is not staged";
    ASSERT_EQ(::unlink((out / "planted.socket").c_str()), 0);
  }
  for (bool pool : {false, true}) {
    SCOPED_TRACE(pool ? "--preload=torch" : "started");
    std::vector<std::string> argv = {"/bin/sh",      "-c",    "cd \"$0\" && exec \"$@\"",
                                     planted.path(), kDdprun, "--nproc-per-node=2"};
    if (pool) argv.push_back("--preload=torch");
    argv.insert(argv.end(), {script, out.path()});
    std::map<std::string, std::optional<std::string>> env = JobEnv();
    env["DDPRUN_TORCH2_KEEP_CWD"] = "1";
    ProcessResult r = RunProcess(argv, env, absl::Seconds(240));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (pool) EXPECT_THAT(r.err, HasSubstr(kForked));
    for (const std::string& name : names) {
      EXPECT_FALSE(FileExists(out / ("planted." + name))) << "the planted " << name << ".py ran";
    }
    EXPECT_TRUE(FileExists(out / "done.1")) << r.err;
    ::unlink((out / "done.0").c_str());
    ::unlink((out / "done.1").c_str());
  }
}

// ddp_train.py trains deterministically; rank 1 crashes at step 5 of the first attempt, so
// the second attempt is forked from the pool too. Same parameters, same losses, bit for bit.
TEST_P(WarmPoolCompat, DdpTrainsToTheSameParametersAndLossesThroughACrashAndRestart) {
  TempDir started, forked;
  for (TempDir* out : {&started, &forked}) {
    std::vector<std::string> argv = {kDdprun,
                                     "--standalone",
                                     "--nproc-per-node=2",
                                     "--max-restarts=1",
                                     kCompatDir + "/ddp_train.py",
                                     out->path(),
                                     "--crash",
                                     "1:5"};
    if (out == &forked) argv.insert(argv.begin() + 1, "--preload=torch");
    ProcessResult r = RunProcess(argv, JobEnv(), absl::Seconds(240));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("restarting all workers"));
    if (out == &forked) {
      EXPECT_THAT(r.err, HasSubstr(kForked));
      EXPECT_THAT(r.err, Not(HasSubstr(kFellBack)));
    }
  }
  ExpectTrained(forked, 2);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = absl::StrCat("rank", rank, ".txt");
    EXPECT_EQ(ReadFile(started / file), ReadFile(forked / file)) << file;
  }
}

// A sitecustomize on PYTHONPATH that seeds each rank from LOCAL_RANK: each forked worker runs
// it with its own environment, as a started one does, so what the ranks draw is the same,
// bit for bit, with and without the pool, and the hook saw each rank's LOCAL_RANK.
TEST_P(WarmPoolCompat, AStartupHookRunsInEachWorkerWithItsRanksEnvironment) {
  TempDir started, forked;
  for (TempDir* out : {&started, &forked}) {
    std::vector<std::string> argv = {kDdprun, "--nproc-per-node=2", kCompatDir + "/seeded_job.py",
                                     out->path()};
    if (out == &forked) argv.insert(argv.begin() + 1, "--preload=torch");
    std::map<std::string, std::optional<std::string>> env = JobEnv();
    env["PYTHONPATH"] = kCompatDir + "/startup_hook:" + kCompatDir;
    ProcessResult r = RunProcess(argv, env, absl::Seconds(240));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (out == &forked) EXPECT_THAT(r.err, HasSubstr(kForked));
    for (const char* rank : {"0", "1"}) {
      EXPECT_EQ(CountLinesContaining(r.err, absl::StrCat("sitecustomize: LOCAL_RANK=", rank)), 1)
          << r.err;
    }
  }
  for (const char* file : {"drawn.0", "drawn.1"}) {
    EXPECT_EQ(ReadFile(started / file), ReadFile(forked / file)) << file;
    EXPECT_THAT(ReadFile(forked / file), HasSubstr("torch=["));
  }
  EXPECT_NE(ReadFile(forked / "drawn.0"), ReadFile(forked / "drawn.1")) << "seeded per rank";
}

// A sitecustomize.py beside the script (a folder others may write) is no startup hook of a
// started interpreter: site runs before the script's folder is put on sys.path. Nor of a
// forked worker.
TEST_P(WarmPoolCompat, ASitecustomizeBesideTheScriptIsNotRun) {
  TempDir job;
  WriteFile(job / "sitecustomize.py", "import sys\nsys.stderr.write('PLANTED RAN\\n')\n");
  WriteFile(job / "s.py", "print('script ran')\n");
  for (bool pool : {false, true}) {
    std::vector<std::string> argv = {kDdprun, "--nproc-per-node=2", job / "s.py"};
    if (pool) argv.insert(argv.begin() + 1, "--preload=torch");
    ProcessResult r = RunProcess(argv, JobEnv(), absl::Seconds(240));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (pool) EXPECT_THAT(r.err, HasSubstr(kForked));
    EXPECT_EQ(CountLinesContaining(r.out, "script ran"), 2) << r.out;
    EXPECT_THAT(r.err, Not(HasSubstr("PLANTED RAN"))) << (pool ? "forked" : "started");
  }
}

TEST_P(WarmPoolCompat, DataLoaderWorkersAndMultiprocessingSpawnWorkAsWithoutIt) {
  TempDir started, forked;
  for (TempDir* out : {&started, &forked}) {
    std::vector<std::string> argv = {kDdprun, "--nproc-per-node=2",
                                     kCompatDir + "/warm_pool_jobs.py", out->path()};
    if (out == &forked) argv.insert(argv.begin() + 1, "--preload=torch");
    ProcessResult r = RunProcess(argv, JobEnv(), absl::Seconds(240));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (out == &forked) EXPECT_THAT(r.err, HasSubstr(kForked));
  }
  ExpectSameFiles(started, forked, "jobs", 2, /*wrapped=*/Torch2());
  EXPECT_EQ(ParseEnvFile(forked / "jobs.1")["spawned"], "0:1:3.0:__mp_main__ 1:1:3.0:__mp_main__");
}

// What a user sees of a worker's end: ddprun's status, the summary's exitcode and error
// lines, the worker's own lines. Pids, times, thread addresses and blank lines aside, word for
// word, but for the differences docs/warm-restart.md gives: a live stack (faulthandler's,
// here on SIGSEGV) has one frame more at its bottom, the pool's `File "<string>"`, and
// Python 3.14's C stack the pool's frames.
std::string Comparable(const std::string& err) {
  std::string kept;
  for (absl::string_view line : absl::StrSplit(err, '\n')) {
    // Python 3.14's fatal errors add the C stack: a forked worker's has the pool's frames
    // below the script's, and names PYTHON_EXEC as the binary.
    const absl::string_view bare = absl::StripAsciiWhitespace(line);
    if (bare.empty() || absl::StartsWith(bare, "Binary file ") ||
        bare == "Current thread's C stack trace (most recent call first):") {
      continue;
    }
    if (absl::StartsWith(line, "[ddprun]") || absl::StrContains(line, "time      :") ||
        std::regex_search(std::string(line),
                          std::regex("^ *File \"<string>\", line [0-9]+ in <module>$"))) {
      continue;
    }
    const std::string pids =
        std::regex_replace(std::string(line), std::regex("(pid|PID)[: ]+[0-9]+"), "pid N");
    const std::string threads = std::regex_replace(pids, std::regex("0x[0-9a-f]+"), "0xN");
    const std::string tail =
        std::regex_replace(threads, std::regex("last [0-9]+ lines"), "last N lines");
    kept += std::regex_replace(tail, std::regex("attempt_[0-9]+"), "attempt_N");
    kept += "\n";
  }
  return kept;
}

TEST_P(WarmPoolCompat, ExitCodesSignalsOutputAndErrorFilesAreTheSame) {
  for (const char* how : {"raises", "sigsegv", "exit7", "interrupt", "unclosed"}) {
    SCOPED_TRACE(how);
    TempDir files;
    const std::string kept = files / "kept.txt";
    std::vector<std::string> args = {
        "--log-dir", files.path(), "--rdzv-id", "endings", kCompatDir + "/warm_pool_endings.py",
        how,         kept};
    TwoRuns runs = RunBoth(args);
    const std::map<std::string, int> status = {{"raises", 1},
                                               {"sigsegv", 128 + SIGSEGV},
                                               {"exit7", 7},
                                               {"interrupt", 128 + SIGINT},
                                               {"unclosed", 0}};
    EXPECT_EQ(runs.started.exit_code, status.at(how)) << runs.started.err;
    EXPECT_EQ(Comparable(runs.started.err), Comparable(runs.forked.err));
    EXPECT_EQ(runs.started.out, runs.forked.out);
    EXPECT_THAT(runs.forked.out, HasSubstr(absl::StrCat("says ", how, " on stdout")));
    if (std::string(how) == "unclosed") {
      EXPECT_EQ(ReadFile(kept),
                "every byte written reaches the file\nevery byte written reaches the file\n");
    }
  }
}

// The agent SIGKILLed: its forked workers and the pool's interpreter die with it.
TEST_P(WarmPoolCompat, WorkersAndThePoolDieWithTheAgent) {
  BecomeSubreaper();  // what the agent leaves is re-parented here, where it can be seen to end
  TempDir out;
  const std::string script =
      out.Write("wait.py",
                "import os, sys, time\n"
                "import torch\n"
                "path = os.path.join(sys.argv[1], 'pid.' + os.environ['RANK'])\n"
                "open(path + '.part', 'w').write(str(os.getpid()))\n"
                "os.rename(path + '.part', path)  # the test reads it once it exists\n"
                "time.sleep(600)\n");
  auto agent = ChildProcess::Start(
      {kDdprun, "--preload=torch", "--nproc-per-node=2", script, out.path()}, JobEnv());
  std::vector<pid_t> pids;
  ASSERT_TRUE(WaitUntil([&] { return FileExists(out / "pid.0") && FileExists(out / "pid.1"); },
                        absl::Seconds(120)))
      << agent->ErrSoFar();
  std::smatch pool;
  const std::string err = agent->ErrSoFar();
  ASSERT_TRUE(std::regex_search(err, pool, std::regex("the warm pool \\(pid ([0-9]+)\\)"))) << err;
  for (const std::string& path : {out / "pid.0", out / "pid.1"}) {
    int pid = 0;
    ASSERT_TRUE(absl::SimpleAtoi(ReadFile(path), &pid));
    pids.push_back(pid);
  }
  pids.push_back(std::stoi(pool[1]));
  ::kill(agent->pid(), SIGKILL);
  agent->Wait(absl::Seconds(30));
  for (pid_t pid : pids) {
    EXPECT_TRUE(WaitUntil(
        [&] {
          ReapZombies();
          return !ProcessAlive(pid);
        },
        absl::Seconds(30)))
        << "pid " << pid << " outlived its agent";
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, WarmPoolCompat, ::testing::Values("1.13", "2.x"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "2.x" ? "Torch2" : "Torch113";
                         });

}  // namespace
}  // namespace ddprun::testing
