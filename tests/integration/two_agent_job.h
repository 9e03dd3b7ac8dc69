#pragma once
// Test support: a 2-agent c10d job on this machine, started as users start it (no
// --local-addr), two workers each. The first agent hosts the master and serves
// --metrics-port; the second is told it does not host (is_host=0), so that the test knows
// which one serves the status page. `ddprun status`/`stop` against it, and its metrics.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/http_get.h"

namespace ddprun::testing {

struct TwoAgentJob {
  int port = FreeLoopbackPort();          // the rendezvous master's
  int metrics_port = FreeLoopbackPort();  // the hosting agent's --metrics-port
  std::unique_ptr<ChildProcess> host, other;

  std::vector<std::string> Agent(bool hosts, const std::vector<std::string>& worker_args) const {
    std::vector<std::string> options = {
        "--nnodes=2",          "--nproc-per-node=2",
        "--rdzv-backend=c10d", absl::StrCat("--rdzv-endpoint=127.0.0.1:", port),
        "--rdzv-id=job",       "--max-restarts=3"};
    if (hosts) {
      options.push_back(absl::StrCat("--metrics-port=", metrics_port));
    } else {
      options.push_back("--rdzv-conf=is_host=0");
    }
    return DdprunWithTestWorker(options, worker_args);
  }
  void Start(const std::vector<std::string>& worker_args,
             const std::map<std::string, std::optional<std::string>>& env = {}) {
    StartHost(worker_args, env);
    StartOther(worker_args, env);
  }
  void StartHost(const std::vector<std::string>& worker_args,
                 const std::map<std::string, std::optional<std::string>>& env = {}) {
    host = ChildProcess::Start(Agent(true, worker_args), env);
  }
  void StartOther(const std::vector<std::string>& worker_args,
                  const std::map<std::string, std::optional<std::string>>& env = {}) {
    other = ChildProcess::Start(Agent(false, worker_args), env);
  }
  ProcessResult Admin(std::vector<std::string> args,
                      const std::map<std::string, std::optional<std::string>>& env = {}) const {
    args.insert(args.begin(), kDdprun);
    args.push_back(absl::StrCat("--rdzv-endpoint=127.0.0.1:", port));
    return RunProcess(args, env, absl::Seconds(30));
  }
  std::string Metrics() const { return HttpGet(metrics_port, "/metrics").body; }
};

}  // namespace ddprun::testing
