#include "agent/worker_env.h"

#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/process_status.h"
#include "common/worker_env_names.h"

namespace ddprun {

bool WillDefaultOmpThreads(const EnvMap& base, int local_world_size) {
  return local_world_size > 1 && base.find("OMP_NUM_THREADS") == base.end();
}

namespace {

// A variable set to `value`, or removed when it is empty: never let a stale value from an
// outer launch leak in.
void SetOrErase(EnvMap& env, const char* name, const std::string& value) {
  if (value.empty()) {
    env.erase(name);
  } else {
    env[name] = value;
  }
}

}  // namespace

EnvMap NodeWorkerEnv(const EnvMap& base, const AgentConfig& config) {
  EnvMap env = base;
  env[worker_env::kRoleName] = config.role;
  env[worker_env::kLocalWorldSize] = std::to_string(config.nproc_per_node);
  env[worker_env::kMaxRestarts] = std::to_string(config.rendezvous.max_restarts);
  env[worker_env::kRunId] = config.run_id;
  env.emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");  // emplace keeps the user's value
  env.emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  if (WillDefaultOmpThreads(base, config.nproc_per_node)) env["OMP_NUM_THREADS"] = "1";
  if (!config.signals_to_handle.empty()) {
    env[worker_env::kSignalsToHandle] = SignalNames(config.signals_to_handle);
  }
  env.erase(worker_env::kRdzvToken);  // the Store token comes in a file, not in the environment
  return env;
}

EnvMap BuildWorkerEnv(const EnvMap& base, const AgentConfig& config, const AttemptPlan& plan,
                      const WorkerSeat& worker) {
  const Assignment& round = plan.assignment;
  EnvMap env = NodeWorkerEnv(base, config);
  env[worker_env::kLocalRank] = std::to_string(config.virtual_local_rank ? 0 : worker.local_rank);
  if (config.virtual_local_rank) {
    env[config.device_variable] = config.device_values.at(worker.local_rank);
  }
  env[worker_env::kRank] = std::to_string(worker.rank);
  // ddprun runs one role per job, so role ranks and sizes equal the global ones.
  env[worker_env::kRoleRank] = std::to_string(worker.rank);
  // What the master decided, each value as its variables (GROUP_RANK, WORLD_SIZE and
  // ROLE_WORLD_SIZE, MASTER_ADDR, TORCHELASTIC_RESTART_COUNT, DDPRUN_ROUND, ...).
  ForEachAssignmentField(round, [&](const AssignmentField& field, const auto& value) {
    using Value = std::decay_t<decltype(value)>;
    if constexpr (!std::is_same_v<Value, std::vector<std::string>>) {
      for (const char* name : field.variables) {
        if (name != nullptr) env[name] = absl::StrCat(value);
      }
    }
  });
  // "True": init_process_group("env://") connects to the TCPStore an agent serves at
  // MASTER_ADDR:MASTER_PORT, as under torchrun's static backend (and c10d since 2.4);
  // "False": rank 0's worker hosts it there (one-node jobs). torch compares the exact string.
  env[worker_env::kUseAgentStore] = plan.agent_store ? "True" : "False";
  env[worker_env::kErrorFile] = worker.error_file;
  if (!plan.gloo_interface.empty()) env.emplace("GLOO_SOCKET_IFNAME", plan.gloo_interface);
  SetOrErase(env, worker_env::kStoreTokenFile, plan.store_token_file);
  SetOrErase(env, worker_env::kStoreAddr, plan.store_addr);
  // The SDK's Store client needs the TLS files only where there is a Store to reach.
  const TlsConfig& tls = config.tls;
  const bool store = !plan.store_addr.empty();
  SetOrErase(env, worker_env::kTlsCert, store ? tls.cert_path : "");
  SetOrErase(env, worker_env::kTlsKey, store ? tls.key_path : "");
  SetOrErase(env, worker_env::kTlsCa, store ? tls.ca_path : "");
  SetOrErase(env, worker_env::kHeartbeatFd,
             worker.heartbeat_fd < 0 ? "" : std::to_string(worker.heartbeat_fd));
  return env;
}

std::string SubstituteLocalRank(const std::string& arg, int local_rank) {
  return absl::StrReplaceAll(arg, {{"${local_rank}", std::to_string(local_rank)}});
}

}  // namespace ddprun
