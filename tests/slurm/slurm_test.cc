// The job scripts in examples/slurm run under a real Slurm (Debian's slurmctld, slurmd and
// munge), configured and started here in a scratch folder on this machine as one node:
// the single-node script end to end, and the preemption script through SIGUSR1, its
// checkpoint, the requeue and the resumed run. Needs root (label `netns`: the root-only
// tests); the daemons are stopped by the pids they wrote, nothing else is touched.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

const std::string kSource = DDPRUN_SOURCE_DIR;
const std::string kLauncherDir = LAUNCHER_DIR;
const std::string kTestWorker = TEST_WORKER_BIN;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// munged, slurmctld and one slurmd (this machine, named by its host name), with ports,
// state and logs of their own under a scratch folder.
class SlurmOnThisMachine {
 public:
  ~SlurmOnThisMachine() {
    for (const std::string& pid_file : {dir_.path() + "/run/slurmd.pid",
                                        dir_.path() + "/run/slurmctld.pid",
                                        dir_.path() + "/munge/munged.pid"}) {
      const int pid = atoi(Read(pid_file).c_str());
      if (pid <= 0) continue;
      ::kill(pid, SIGTERM);
      WaitUntil([pid] { return ::kill(pid, 0) != 0; }, absl::Seconds(20));
    }
  }

  // Empty when it is up; else what went wrong.
  std::string Start() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string w = dir_.path();
    ::chmod(w.c_str(), 0755);  // munged runs as the munge user, and must reach its folder
    for (const char* sub : {"/munge", "/state", "/spool", "/run", "/log", "/jobs"}) {
      ::mkdir((w + sub).c_str(), 0755);
    }
    const std::vector<std::vector<std::string>> munge = {
        {"/usr/sbin/mungekey", "-c", "-k", w + "/munge/munge.key"},
        {"/bin/chown", "-R", "munge:munge", w + "/munge"},
        {"/bin/chmod", "600", w + "/munge/munge.key"},
        {"/usr/sbin/runuser", "-u", "munge", "--", "/usr/sbin/munged",
         "--socket=" + w + "/munge/munge.socket.2", "--key-file=" + w + "/munge/munge.key",
         "--log-file=" + w + "/munge/munged.log", "--pid-file=" + w + "/munge/munged.pid",
         "--seed-file=" + w + "/munge/munged.seed"}};
    for (const auto& argv : munge) {
      ProcessResult r = RunProcess(argv);
      if (r.exit_code != 0) return absl::StrCat(argv[0], ": ", r.err);
    }
    conf_ = w + "/slurm.conf";
    std::ofstream(conf_) << "ClusterName=ddprun\n"
                         << "SlurmctldHost=" << host << "\n"
                         << "SlurmctldPort=" << FreeLoopbackPort() << "\n"
                         << "SlurmdPort=" << FreeLoopbackPort() << "\n"
                         << "SlurmUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
                         << "AuthInfo=socket=" << w << "/munge/munge.socket.2\n"
                         << "StateSaveLocation=" << w << "/state\n"
                         << "SlurmdSpoolDir=" << w << "/spool\n"
                         << "SlurmctldPidFile=" << w << "/run/slurmctld.pid\n"
                         << "SlurmdPidFile=" << w << "/run/slurmd.pid\n"
                         << "SlurmctldLogFile=" << w << "/log/slurmctld.log\n"
                         << "SlurmdLogFile=" << w << "/log/slurmd.log\n"
                         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                         << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
                         << "MpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n"
                         << "AccountingStorageType=accounting_storage/none\n"
                         << "JobCompType=jobcomp/none\nReturnToService=2\n"
                         << "NodeName=" << host << " CPUs=2 RealMemory=2000 State=UNKNOWN\n"
                         << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
    for (const std::vector<std::string>& daemon :
         {std::vector<std::string>{"/usr/sbin/slurmctld", "-f", conf_, "-i"},
          std::vector<std::string>{"/usr/sbin/slurmd", "-f", conf_}}) {
      ProcessResult r = RunProcess(daemon, Env());  // both daemonize
      if (r.exit_code != 0) return absl::StrCat(daemon[0], ": ", r.err);
    }
    if (!WaitUntil([this] { return Slurm({"/usr/bin/sinfo", "-h", "-o", "%T"}) == "idle"; },
                   absl::Seconds(60))) {
      return absl::StrCat("the node never became idle: ", Read(w + "/log/slurmctld.log"),
                          Read(w + "/log/slurmd.log"));
    }
    return "";
  }

  // The environment of a Slurm command: this cluster's configuration, ddprun on PATH.
  std::map<std::string, std::optional<std::string>> Env() const {
    return {{"SLURM_CONF", conf_},
            {"PATH", kLauncherDir + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}};
  }
  // Runs a Slurm client command; its stdout without the trailing newline.
  std::string Slurm(const std::vector<std::string>& argv) const {
    return std::string(absl::StripTrailingAsciiWhitespace(RunProcess(argv, Env()).out));
  }
  // One field (e.g. JobState) of `scontrol show job`.
  std::string JobField(const std::string& job, const std::string& field) const {
    for (absl::string_view word :
         absl::StrSplit(Slurm({"/usr/bin/scontrol", "show", "job", job}), absl::ByAnyChar(" \n"))) {
      if (absl::ConsumePrefix(&word, field + "=")) return std::string(word);
    }
    return "";
  }
  std::string jobs_dir() const { return dir_.path() + "/jobs"; }

 private:
  TempDir dir_;
  std::string conf_;
};

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    slurm_ = new SlurmOnThisMachine();
    const std::string error = slurm_->Start();
    ASSERT_EQ(error, "") << "Slurm did not start (scripts/install-deps.sh installs it)";
  }
  static void TearDownTestSuite() { delete slurm_; }

  // Submits `script` with `args`; the job id.
  std::string Submit(const std::string& script, const std::vector<std::string>& args,
                     const std::string& output) {
    std::vector<std::string> argv = {"/usr/bin/sbatch", "--parsable", "--chdir=" + slurm_->jobs_dir(),
                                     "--output=" + output, kSource + "/examples/slurm/" + script};
    argv.insert(argv.end(), args.begin(), args.end());
    std::map<std::string, std::optional<std::string>> env = slurm_->Env();
    env["NPROC_PER_NODE"] = "2";
    ProcessResult r = RunProcess(argv, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::string(absl::StripTrailingAsciiWhitespace(r.out));
  }
  bool WaitForState(const std::string& job, const std::string& state) {
    return WaitUntil([&] { return slurm_->JobField(job, "JobState") == state; },
                     absl::Seconds(90));
  }

  static SlurmOnThisMachine* slurm_;
};

SlurmOnThisMachine* SlurmTest::slurm_ = nullptr;

TEST_F(SlurmTest, TheSingleNodeScriptRunsTheJobWithTheJobIdAsRunId) {
  TempDir out;
  const std::string job = Submit("single-node.sbatch",
                                 {"--no-python", kTestWorker, "env", out.path()},
                                 out.path() + "/job.out");
  ASSERT_TRUE(WaitForState(job, "COMPLETED"))
      << slurm_->JobField(job, "JobState") << "\n" << Read(out.path() + "/job.out");
  EXPECT_EQ(slurm_->JobField(job, "ExitCode"), "0:0");
  for (int rank = 0; rank < 2; ++rank) {
    const std::string env = Read(absl::StrCat(out.path(), "/env.", rank, ".0"));
    EXPECT_THAT(env, HasSubstr("WORLD_SIZE=2"));
    EXPECT_THAT(env, HasSubstr("TORCHELASTIC_RUN_ID=" + job));  // SLURM_JOB_ID
  }
}

TEST_F(SlurmTest, ThePreemptionScriptCheckpointsRequeuesAndResumes) {
  TempDir ckpt;
  const std::string job =
      Submit("preemption.sbatch",
             {kSource + "/examples/slurm/train_with_checkpoint.py", ckpt.path(), "60", "0.05"},
             ckpt.path() + "/job.out");
  ASSERT_TRUE(WaitUntil([&] { return Read(ckpt.path() + "/started.rank1") != ""; },
                        absl::Seconds(90)))
      << Read(ckpt.path() + "/job.out");
  // What Slurm does 120 s before the time limit (--signal=B:USR1@120), now.
  ProcessResult signal = RunProcess({"/usr/bin/scancel", "--signal=USR1", "--batch", job},
                                    slurm_->Env());
  ASSERT_EQ(signal.exit_code, 0) << signal.err;
  ASSERT_TRUE(WaitUntil([&] { return slurm_->JobField(job, "Restarts") == "1"; },
                        absl::Seconds(90)))
      << Read(ckpt.path() + "/job.out");
  // A requeued job waits for its begin time; let it start now.
  slurm_->Slurm({"/usr/bin/scontrol", "update", "JobId=" + job, "StartTime=now"});
  ASSERT_TRUE(WaitForState(job, "COMPLETED")) << Read(ckpt.path() + "/job.out");
  const std::string log = Read(ckpt.path() + "/job.out");
  EXPECT_THAT(log, HasSubstr("received SIGUSR1: forwarding it to 2 workers"));
  EXPECT_THAT(log, HasSubstr("preempted: requeueing job " + job));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(log, HasSubstr(absl::StrCat("rank ", rank, ": resuming at step")));
    EXPECT_THAT(log, HasSubstr(absl::StrCat("rank ", rank, ": done after 60 steps")));
    // Two starts: from step 0, then from the checkpoint.
    std::vector<std::string> starts = absl::StrSplit(
        absl::StripTrailingAsciiWhitespace(Read(absl::StrCat(ckpt.path(), "/started.rank", rank))),
        '\n');
    ASSERT_EQ(starts.size(), 2u);
    EXPECT_EQ(starts[0], "0");
    EXPECT_NE(starts[1], "0");
  }
}

}  // namespace
}  // namespace ddprun::testing
