#include "tests/netns/netns_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddprun::testing {
namespace {

const char* const kIp = "/usr/sbin/ip";

}  // namespace

absl::StatusOr<std::unique_ptr<NetnsCluster>> NetnsCluster::Create(int hosts, Names names) {
  if (::geteuid() != 0) return absl::FailedPreconditionError("network namespaces need root");
  if (::access(kIp, X_OK) != 0) return absl::FailedPreconditionError("no /usr/sbin/ip (iproute2)");
  std::unique_ptr<NetnsCluster> cluster(new NetnsCluster(absl::StrCat("ddpt", ::getpid())));
  if (absl::Status s = cluster->Ip({"netns", "add", cluster->Namespace(0)}); !s.ok()) return s;
  cluster->switch_made_ = true;
  const std::string sw = cluster->Namespace(0);
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"-n", sw, "link", "add", "br0", "type", "bridge"},
                                             {"-n", sw, "link", "set", "br0", "up"},
                                             {"-n", sw, "link", "set", "lo", "up"}}) {
    if (absl::Status s = cluster->Ip(args); !s.ok()) return s;
  }
  for (int host = 1; host <= hosts; ++host) {
    const std::string ns = cluster->Namespace(host);
    const std::string port = absl::StrCat("h", host);
    if (absl::Status s = cluster->Ip({"netns", "add", ns}); !s.ok()) return s;
    cluster->hosts_ = host;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
             {"-n", sw, "link", "set", port, "master", "br0"},
             {"-n", sw, "link", "set", port, "up"},
             {"-n", ns, "addr", "add", Address(host) + "/24", "dev", "eth0"},
             {"-n", ns, "link", "set", "eth0", "up"},
             {"-n", ns, "link", "set", "lo", "up"}}) {
      if (absl::Status s = cluster->Ip(args); !s.ok()) return s;
    }
    std::string etc_hosts = absl::StrCat("127.0.0.1 localhost\n127.0.1.1 ", HostName(host), "\n");
    for (int other = 1; other <= hosts && names == Names::kEverywhere; ++other) {
      if (other != host) absl::StrAppend(&etc_hosts, Address(other), " ", HostName(other), "\n");
    }
    WriteFile(cluster->files_ / absl::StrCat("hosts.", host), etc_hosts);
  }
  return cluster;
}

absl::Status NetnsCluster::AddHostsLine(int host, const std::string& line) {
  // Appended in place: the host's /etc/hosts is this file, bind-mounted.
  std::ofstream hosts(files_ / absl::StrCat("hosts.", host), std::ios::app);
  hosts << line << "\n";
  hosts.close();
  if (!hosts) return absl::InternalError(absl::StrCat("cannot append to host ", host, "'s hosts"));
  return absl::OkStatus();
}

NetnsCluster::~NetnsCluster() {
  // Anything still running in a host is the test's own: end it by pid, then the namespaces.
  for (int host = 1; host <= hosts_; ++host) {
    for (int pid : ProcessesOn(host)) ::kill(pid, SIGKILL);
  }
  for (int host = hosts_; host >= (switch_made_ ? 0 : 1); --host) {
    (void)Ip({"netns", "del", Namespace(host)});
  }
}

std::string NetnsCluster::Address(int host) { return absl::StrCat("10.213.0.", host); }

std::string NetnsCluster::HostName(int host) { return absl::StrCat("node", host); }

std::string NetnsCluster::Namespace(int host) const {
  return host == 0 ? prefix_ + "-sw" : absl::StrCat(prefix_, "-h", host);
}

absl::Status NetnsCluster::Ip(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {kIp};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, {}, absl::Seconds(20));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("ip ", absl::StrJoin(args, " "), " failed: ", r.err));
  }
  return absl::OkStatus();
}

std::unique_ptr<ChildProcess> NetnsCluster::Start(
    int host, const std::vector<std::string>& argv,
    const std::map<std::string, std::optional<std::string>>& env) {
  // Its own name and /etc/hosts, in namespaces of its own (nothing leaks to the machine's).
  std::vector<std::string> wrapped = {
      kIp,
      "netns",
      "exec",
      Namespace(host),
      "/usr/bin/unshare",
      "--uts",
      "--mount",
      "/bin/sh",
      "-c",
      absl::StrCat("mount --bind ", files_ / absl::StrCat("hosts.", host),
                   " /etc/hosts && hostname ", HostName(host), " && exec \"$@\""),
      "sh"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return ChildProcess::Start(wrapped, env);
}

absl::Status NetnsCluster::SetLinkUp(int host, bool up) {
  return Ip({"-n", Namespace(0), "link", "set", absl::StrCat("h", host), up ? "up" : "down"});
}

std::vector<int> NetnsCluster::ProcessesOn(int host) const {
  ProcessResult r = RunProcess({kIp, "netns", "pids", Namespace(host)}, {}, absl::Seconds(20));
  std::vector<int> pids;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid)) pids.push_back(pid);
  }
  return pids;
}

}  // namespace ddprun::testing
