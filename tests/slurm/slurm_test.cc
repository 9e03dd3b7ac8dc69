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
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/unique_fd.h"  // ListDir
#include "tests/netns/netns_cluster.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

const std::string kSource = DDPRUN_SOURCE_DIR;
const std::string kLauncherDir = LAUNCHER_DIR;
const std::string kTestWorker = TEST_WORKER_BIN;

struct SlurmNode {
  std::string name;
  std::string addr;  // empty: this machine, reached by its name
};

// A Slurm cluster's files and munged under a scratch folder: the daemons, their state, logs
// and ports are all its own. Subclasses start slurmctld and the slurmds.
class SlurmCluster {
 public:
  virtual ~SlurmCluster() {
    // The daemons wrote their pids; end exactly those.
    for (const std::string& pid_file : PidFiles()) {
      const int pid = atoi(ReadFile(pid_file).c_str());
      if (pid <= 0) continue;
      ::kill(pid, SIGTERM);
      WaitUntil([pid] { return ::kill(pid, 0) != 0; }, absl::Seconds(20));
    }
  }

  // The environment of a Slurm command: this cluster's configuration, ddprun on PATH.
  std::map<std::string, std::optional<std::string>> Env() const {
    return {{"SLURM_CONF", conf_},
            {"PATH", kLauncherDir + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}};
  }
  // Runs a Slurm client command where the controller is reached.
  ProcessResult Client(const std::vector<std::string>& argv,
                       std::map<std::string, std::optional<std::string>> extra_env = {}) const {
    std::vector<std::string> full = client_prefix_;
    full.insert(full.end(), argv.begin(), argv.end());
    std::map<std::string, std::optional<std::string>> env = Env();
    env.insert(extra_env.begin(), extra_env.end());
    return RunProcess(full, env);
  }
  // Its stdout without the trailing newline.
  std::string Slurm(const std::vector<std::string>& argv) const {
    return std::string(absl::StripTrailingAsciiWhitespace(Client(argv).out));
  }
  // One field (e.g. JobState) of `scontrol show job`.
  std::string JobField(const std::string& job, const std::string& field) const {
    for (absl::string_view word :
         absl::StrSplit(Slurm({"/usr/bin/scontrol", "show", "job", job}), absl::ByAnyChar(" \n"))) {
      if (absl::ConsumePrefix(&word, field + "=")) return std::string(word);
    }
    return "";
  }
  bool WaitForIdleNodes(int nodes) const {
    return WaitUntil(
        [&] {
          const std::string states = Slurm({"/usr/bin/sinfo", "-h", "-N", "-o", "%T"});
          return states == absl::StrJoin(std::vector<std::string>(nodes, "idle"), "\n");
        },
        absl::Seconds(60));
  }
  std::string Logs() const {
    std::string logs;
    for (const std::string& name : ListDir(w() + "/log")) {
      absl::StrAppend(&logs, "--- ", name, "\n", ReadFile(w() + "/log/" + name));
    }
    return logs;
  }
  std::string jobs_dir() const { return w() + "/jobs"; }

 protected:
  const std::string& w() const { return dir_.path(); }

  // munged, and slurm.conf for a controller `ctl` (at `ctl_addr` when given) and `nodes`.
  std::string Prepare(const std::string& ctl, const std::string& ctl_addr,
                      const std::vector<SlurmNode>& nodes, int ctl_port, int slurmd_port) {
    ::chmod(w().c_str(), 0755);  // munged runs as the munge user, and must reach its folder
    for (const char* sub : {"/munge", "/state", "/spool", "/run", "/log", "/jobs"}) {
      ::mkdir((w() + sub).c_str(), 0755);
    }
    const std::vector<std::vector<std::string>> munge = {
        {"/usr/sbin/mungekey", "-c", "-k", w() + "/munge/munge.key"},
        {"/bin/chown", "-R", "munge:munge", w() + "/munge"},
        {"/bin/chmod", "600", w() + "/munge/munge.key"},
        {"/usr/sbin/runuser", "-u", "munge", "--", "/usr/sbin/munged",
         "--socket=" + w() + "/munge/munge.socket.2", "--key-file=" + w() + "/munge/munge.key",
         "--log-file=" + w() + "/munge/munged.log", "--pid-file=" + w() + "/munge/munged.pid",
         "--seed-file=" + w() + "/munge/munged.seed"}};
    for (const auto& argv : munge) {
      ProcessResult r = RunProcess(argv);
      if (r.exit_code != 0) return absl::StrCat(argv[0], ": ", r.err);
    }
    conf_ = w() + "/slurm.conf";
    std::ofstream conf(conf_);
    conf << "ClusterName=ddprun\n"
         << "SlurmctldHost=" << ctl << (ctl_addr.empty() ? "" : "(" + ctl_addr + ")") << "\n"
         << "SlurmctldPort=" << ctl_port << "\nSlurmdPort=" << slurmd_port << "\n"
         << "SlurmUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
         << "AuthInfo=socket=" << w() << "/munge/munge.socket.2\n"
         << "StateSaveLocation=" << w() << "/state\n"
         << "SlurmdSpoolDir=" << w() << "/spool/%n\n"
         << "SlurmctldPidFile=" << w() << "/run/slurmctld.pid\n"
         << "SlurmdPidFile=" << w() << "/run/slurmd-%n.pid\n"
         << "SlurmctldLogFile=" << w() << "/log/slurmctld.log\n"
         << "SlurmdLogFile=" << w() << "/log/slurmd-%n.log\n"
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
         << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
         << "MpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n"
         << "AccountingStorageType=accounting_storage/none\n"
         << "JobCompType=jobcomp/none\nReturnToService=2\n";
    std::vector<std::string> names;
    for (const SlurmNode& node : nodes) {
      conf << "NodeName=" << node.name << (node.addr.empty() ? "" : " NodeAddr=" + node.addr)
           << " CPUs=2 RealMemory=2000 State=UNKNOWN\n";
      names.push_back(node.name);
    }
    conf << "PartitionName=debug Nodes=" << absl::StrJoin(names, ",")
         << " Default=YES MaxTime=INFINITE State=UP\n";
    return "";
  }
  std::string StartDaemon(const std::vector<std::string>& argv) {
    ProcessResult r = RunProcess(argv, Env());  // it daemonizes: this returns at once
    return r.exit_code == 0 ? "" : absl::StrCat(absl::StrJoin(argv, " "), ": ", r.err, r.out);
  }

  std::vector<std::string> client_prefix_;

 private:
  std::vector<std::string> PidFiles() const {
    std::vector<std::string> files;
    for (const std::string& name : ListDir(w() + "/run")) files.push_back(w() + "/run/" + name);
    files.push_back(w() + "/munge/munged.pid");
    return files;
  }

  TempDir dir_;
  std::string conf_;
};

// This machine as the only node.
class SlurmOnThisMachine : public SlurmCluster {
 public:
  // Empty when it is up; else what went wrong.
  std::string Start() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::string error = Prepare(host, "", {{host, ""}}, FreeLoopbackPort(), FreeLoopbackPort());
    if (error.empty())
      error = StartDaemon({"/usr/sbin/slurmctld", "-f", Env().at("SLURM_CONF").value(), "-i"});
    if (error.empty())
      error = StartDaemon({"/usr/sbin/slurmd", "-f", Env().at("SLURM_CONF").value()});
    if (error.empty() && !WaitForIdleNodes(1)) error = "the node never became idle:\n" + Logs();
    return error;
  }
};

// A controller and two nodes, each a host in a network namespace of its own (10.213.0.1 ctl,
// .2 n1, .3 n2), with its own host name, and names resolved by an /etc/hosts of its own
// bound over the machine's inside each daemon's mount namespace: what a job script sees on
// a real cluster.
class SlurmOnHosts : public SlurmCluster {
 public:
  ~SlurmOnHosts() override { hosts_.reset(); }  // ends every process on the hosts first

  std::string Start() {
    absl::StatusOr<std::unique_ptr<NetnsCluster>> hosts = NetnsCluster::Create(3);
    if (!hosts.ok()) return std::string(hosts.status().message());
    hosts_ = std::move(*hosts);
    const std::vector<SlurmNode> nodes = {{"n1", NetnsCluster::Address(2)},
                                          {"n2", NetnsCluster::Address(3)}};
    std::string error = Prepare("ctl", NetnsCluster::Address(1), nodes, 6817, 6818);
    if (!error.empty()) return error;
    // As Debian writes it, each host's own name is 127.0.1.1 in its /etc/hosts: a master
    // that listened on the endpoint's name would be out of the other nodes' reach.
    const std::vector<std::pair<std::string, int>> names = {{"ctl", 1}, {"n1", 2}, {"n2", 3}};
    for (const auto& [self, unused] : names) {
      std::ofstream hosts(w() + "/hosts-" + self);
      hosts << "127.0.0.1 localhost\n127.0.1.1 " << self << "\n";
      for (const auto& [name, host] : names) {
        if (name != self) hosts << NetnsCluster::Address(host) << " " << name << "\n";
      }
    }
    const std::string conf = Env().at("SLURM_CONF").value();
    error = StartDaemon(OnHost(1, "ctl", "/usr/sbin/slurmctld -f " + conf + " -i"));
    for (int i = 0; i < 2 && error.empty(); ++i) {
      error = StartDaemon(
          OnHost(i + 2, nodes[i].name, "/usr/sbin/slurmd -f " + conf + " -N " + nodes[i].name));
    }
    client_prefix_ = {"/usr/bin/nsenter", "--net=" + hosts_->NamespacePath(1)};
    if (error.empty() && !WaitForIdleNodes(2)) error = "the nodes never became idle:\n" + Logs();
    return error;
  }

 private:
  // `command` on `host`, named `name`, with the cluster's /etc/hosts.
  std::vector<std::string> OnHost(int host, const std::string& name, const std::string& command) {
    return {"/usr/bin/nsenter",
            "--net=" + hosts_->NamespacePath(host),
            "/usr/bin/unshare",
            "--uts",
            "--mount",
            "/bin/sh",
            "-c",
            absl::StrCat("mount --bind ", w(), "/hosts-", name, " /etc/hosts && hostname ", name,
                         " && exec ", command)};
  }

  std::unique_ptr<NetnsCluster> hosts_;
};

template <typename Cluster>
class SlurmFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    const std::string error = cluster_->Start();
    ASSERT_EQ(error, "") << "Slurm did not start (scripts/install-deps.sh installs it)";
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // Submits `script` with `args`; the job id.
  std::string Submit(const std::string& script, const std::vector<std::string>& args,
                     const std::string& output,
                     std::map<std::string, std::optional<std::string>> env = {}) {
    std::vector<std::string> argv = {"/usr/bin/sbatch", "--parsable",
                                     "--chdir=" + cluster_->jobs_dir(), "--output=" + output,
                                     kSource + "/examples/slurm/" + script};
    argv.insert(argv.end(), args.begin(), args.end());
    env["NPROC_PER_NODE"] = "2";
    ProcessResult r = cluster_->Client(argv, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::string(absl::StripTrailingAsciiWhitespace(r.out));
  }
  bool WaitForState(const std::string& job, const std::string& state) {
    return WaitUntil([&] { return cluster_->JobField(job, "JobState") == state; },
                     absl::Seconds(90));
  }

  static Cluster* cluster_;
};

template <typename Cluster>
Cluster* SlurmFixture<Cluster>::cluster_ = nullptr;

using SlurmTest = SlurmFixture<SlurmOnThisMachine>;
using SlurmAcrossHostsTest = SlurmFixture<SlurmOnHosts>;

TEST_F(SlurmTest, TheSingleNodeScriptRunsTheJobWithTheJobIdAsRunId) {
  TempDir out;
  const std::string job =
      Submit("single-node.sbatch", {"--no-python", kTestWorker, "env", out.path()},
             out.path() + "/job.out");
  ASSERT_TRUE(WaitForState(job, "COMPLETED")) << cluster_->JobField(job, "JobState") << "\n"
                                              << ReadFile(out.path() + "/job.out");
  EXPECT_EQ(cluster_->JobField(job, "ExitCode"), "0:0");
  for (int rank = 0; rank < 2; ++rank) {
    const std::string env = ReadFile(absl::StrCat(out.path(), "/env.", rank, ".0"));
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
  // Both workers have their SIGUSR1 handler once each has written its start (a worker
  // signalled before that would die of it, without a checkpoint).
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFile(ckpt.path() + "/started.rank0") != "" &&
               ReadFile(ckpt.path() + "/started.rank1") != "";
      },
      absl::Seconds(90)))
      << ReadFile(ckpt.path() + "/job.out");
  // What Slurm does 120 s before the time limit (--signal=B:USR1@120), now.
  ProcessResult signal = cluster_->Client({"/usr/bin/scancel", "--signal=USR1", "--batch", job});
  ASSERT_EQ(signal.exit_code, 0) << signal.err;
  // Requeued: pending again (until its begin time), one restart. Only a pending job's
  // start time can be changed, so wait for both.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return cluster_->JobField(job, "Restarts") == "1" &&
               cluster_->JobField(job, "JobState") == "PENDING";
      },
      absl::Seconds(90)))
      << ReadFile(ckpt.path() + "/job.out");
  // A requeued job waits for its begin time; let it start now.
  cluster_->Slurm({"/usr/bin/scontrol", "update", "JobId=" + job, "StartTime=now"});
  ASSERT_TRUE(WaitForState(job, "COMPLETED")) << ReadFile(ckpt.path() + "/job.out");
  const std::string log = ReadFile(ckpt.path() + "/job.out");
  EXPECT_THAT(log, HasSubstr("received SIGUSR1: forwarding it to 2 workers"));
  EXPECT_THAT(log, HasSubstr("preempted: requeueing job " + job));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(log, HasSubstr(absl::StrCat("rank ", rank, ": resuming at step")));
    EXPECT_THAT(log, HasSubstr(absl::StrCat("rank ", rank, ": done after 60 steps")));
    // Two starts: from step 0, then from the checkpoint.
    std::vector<std::string> starts =
        absl::StrSplit(absl::StripTrailingAsciiWhitespace(
                           ReadFile(absl::StrCat(ckpt.path(), "/started.rank", rank))),
                       '\n');
    ASSERT_EQ(starts.size(), 2u);
    EXPECT_EQ(starts[0], "0");
    EXPECT_NE(starts[1], "0");
  }
}

// Every multi-node script on two hosts: one agent per node, 2 workers each, all four
// workers in one world with the first node as MASTER_ADDR and the job id as run id; and
// with the first node given by its IP address (HEAD_ADDR), which becomes MASTER_ADDR.
class MultiNodeScripts : public SlurmAcrossHostsTest,
                         public ::testing::WithParamInterface<std::tuple<const char*, bool>> {};

TEST_P(MultiNodeScripts, RunOneJobAcrossTheNodes) {
  const auto [script, by_address] = GetParam();
  const std::string head = by_address ? NetnsCluster::Address(2) : "n1";
  TempDir out;
  ::chmod(out.path().c_str(), 0755);
  std::map<std::string, std::optional<std::string>> submit_env = {{"MIN_NODES", "2"}};
  if (by_address) submit_env["HEAD_ADDR"] = head;
  const std::string job = Submit(script, {"--no-python", kTestWorker, "env", out.path()},
                                 out.path() + "/job.out", submit_env);
  ASSERT_TRUE(WaitForState(job, "COMPLETED"))
      << cluster_->JobField(job, "JobState") << "\n"
      << ReadFile(out.path() + "/job.out") << cluster_->Logs();
  EXPECT_EQ(cluster_->JobField(job, "ExitCode"), "0:0");
  std::set<std::string> group_ranks;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string env = ReadFile(absl::StrCat(out.path(), "/env.", rank, ".0"));
    EXPECT_THAT(env, HasSubstr("WORLD_SIZE=4"))
        << rank << ": " << ReadFile(out.path() + "/job.out");
    EXPECT_THAT(env, HasSubstr("MASTER_ADDR=" + head + "\n"));
    EXPECT_THAT(env, HasSubstr("TORCHELASTIC_USE_AGENT_STORE=True"));
    EXPECT_THAT(env, HasSubstr("TORCHELASTIC_RUN_ID=" + job));
    // The script's per-job token was in force, and no worker sees it in its environment.
    EXPECT_THAT(env, HasSubstr("DDPRUN_STORE_TOKEN_FILE="));
    EXPECT_THAT(env, ::testing::Not(HasSubstr("DDPRUN_RDZV_TOKEN=")));
    for (absl::string_view line : absl::StrSplit(env, '\n')) {
      if (absl::ConsumePrefix(&line, "GROUP_RANK=")) group_ranks.insert(std::string(line));
    }
  }
  EXPECT_EQ(group_ranks, (std::set<std::string>{"0", "1"}));
}

INSTANTIATE_TEST_SUITE_P(Scripts, MultiNodeScripts,
                         ::testing::Combine(::testing::Values("multi-node-c10d.sbatch",
                                                              "multi-node-static.sbatch",
                                                              "multi-node-elastic.sbatch"),
                                            ::testing::Bool()));

}  // namespace
}  // namespace ddprun::testing
