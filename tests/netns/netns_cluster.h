#pragma once
// Hosts for multi-host tests: one network namespace per host, each with an eth0 on a bridge
// that lives in a namespace of its own (the switch), addresses 10.213.0.<host>/24 that this
// test assigns. Nothing is added to the machine's own namespace, and traffic never leaves
// these namespaces. Everything is removed in the destructor, also when a test fails.
// Needs root (ctest label `netns`).
//
// Each host has a name of its own, node<host>, which resolves on that host to 127.0.1.1, as
// Debian and Ubuntu write a machine's /etc/hosts, and by default nowhere else: host names do
// not resolve across hosts, as on many clusters. With Names::kEverywhere every host also
// resolves the others' names to their addresses (as with DNS, the own name still loopback).
// A program started on a host sees that name and that /etc/hosts (its own UTS and mount
// namespaces).

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {

class NetnsCluster {
 public:
  enum class Names { kOwnOnly, kEverywhere };
  /// Hosts 1..`hosts`. The error says why (not root, no `ip`, ...).
  static absl::StatusOr<std::unique_ptr<NetnsCluster>> Create(int hosts,
                                                              Names names = Names::kOwnOnly);
  ~NetnsCluster();

  /// "10.213.0.<host>".
  static std::string Address(int host);
  /// "node<host>": the host's name, as gethostname() says it there.
  static std::string HostName(int host);
  /// "/run/netns/<name>": for nsenter --net=, where `ip netns exec` does not fit (it mounts
  /// a /sys of its own, which slurmd cannot work with).
  std::string NamespacePath(int host) const { return "/run/netns/" + Namespace(host); }
  /// Starts `argv` on `host` (inside its namespaces, with its name and /etc/hosts).
  std::unique_ptr<ChildProcess> Start(
      int host, const std::vector<std::string>& argv,
      const std::map<std::string, std::optional<std::string>>& env = {});
  /// Cuts `host` off the switch (its link goes down: packets vanish, nothing is reset), or
  /// joins it again.
  absl::Status SetLinkUp(int host, bool up);
  /// Appends `line` ("10.213.0.1 job-master-0") to `host`'s /etc/hosts, which programs
  /// running there see at their next lookup: a name that starts to resolve, as a
  /// Kubernetes service's does once its pod is ready.
  absl::Status AddHostsLine(int host, const std::string& line);
  /// The processes that run in `host`'s namespace now.
  std::vector<int> ProcessesOn(int host) const;

 private:
  explicit NetnsCluster(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string Namespace(int host) const;  // host 0: the switch
  absl::Status Ip(const std::vector<std::string>& args) const;

  std::string prefix_;
  TempDir files_;  // each host's /etc/hosts
  int hosts_ = 0;
  bool switch_made_ = false;
};

}  // namespace ddprun::testing
