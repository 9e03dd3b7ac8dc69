#include "agent/worker_env.h"

#include "absl/strings/str_replace.h"
#include "common/worker_env_names.h"

namespace ddprun {

bool WillDefaultOmpThreads(const EnvMap& base, int local_world_size) {
  return local_world_size > 1 && base.find("OMP_NUM_THREADS") == base.end();
}

EnvMap BuildWorkerEnv(const EnvMap& base, const WorkerPlacement& p) {
  EnvMap env = base;
  env[worker_env::kLocalRank] = std::to_string(p.virtual_local_rank ? 0 : p.local_rank);
  if (p.virtual_local_rank) env[p.device_variable] = p.device_value;
  env[worker_env::kRank] = std::to_string(p.rank);
  env[worker_env::kGroupRank] = std::to_string(p.group_rank);
  // ddprun runs one role per job, so role ranks and sizes equal the global ones.
  env[worker_env::kRoleRank] = std::to_string(p.rank);
  env[worker_env::kRoleName] = p.role_name;
  env[worker_env::kLocalWorldSize] = std::to_string(p.local_world_size);
  env[worker_env::kWorldSize] = std::to_string(p.world_size);
  env[worker_env::kGroupWorldSize] = std::to_string(p.group_world_size);
  env[worker_env::kRoleWorldSize] = std::to_string(p.world_size);
  env[worker_env::kMasterAddr] = p.master_addr;
  env[worker_env::kMasterPort] = std::to_string(p.master_port);
  env[worker_env::kRestartCount] = std::to_string(p.restart_count);
  env[worker_env::kMaxRestarts] = std::to_string(p.max_restarts);
  env[worker_env::kRunId] = p.run_id;
  // "True": init_process_group("env://") connects to the TCPStore an agent serves at
  // MASTER_ADDR:MASTER_PORT, as under torchrun's static backend (and c10d since 2.4);
  // "False": rank 0's worker hosts it there (one-node jobs). torch compares the exact string.
  env[worker_env::kUseAgentStore] = p.agent_store ? "True" : "False";
  env[worker_env::kErrorFile] = p.error_file;
  env.emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");  // emplace keeps the user's value
  if (!p.gloo_interface.empty()) env.emplace("GLOO_SOCKET_IFNAME", p.gloo_interface);
  env.emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  if (WillDefaultOmpThreads(base, p.local_world_size)) env["OMP_NUM_THREADS"] = "1";
  if (!p.signals_to_handle.empty()) env[worker_env::kSignalsToHandle] = p.signals_to_handle;
  env[worker_env::kRound] = std::to_string(p.round);
  env.erase(worker_env::kRdzvToken);  // the Store token comes in a file, not in the environment
  if (p.store_token_file.empty()) {
    env.erase(worker_env::kStoreTokenFile);
  } else {
    env[worker_env::kStoreTokenFile] = p.store_token_file;
  }
  if (p.store_addr.empty()) {
    env.erase(worker_env::kStoreAddr);  // never let a stale value from an outer launch leak in
  } else {
    env[worker_env::kStoreAddr] = p.store_addr;
  }
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string&>{worker_env::kTlsCert, p.tls_cert},
        {worker_env::kTlsKey, p.tls_key},
        {worker_env::kTlsCa, p.tls_ca}}) {
    if (value.empty() || p.store_addr.empty()) {
      env.erase(name);
    } else {
      env[name] = value;
    }
  }
  if (p.heartbeat_fd < 0) {
    env.erase(worker_env::kHeartbeatFd);
  } else {
    env[worker_env::kHeartbeatFd] = std::to_string(p.heartbeat_fd);
  }
  return env;
}

std::string SubstituteLocalRank(const std::string& arg, int local_rank) {
  return absl::StrReplaceAll(arg, {{"${local_rank}", std::to_string(local_rank)}});
}

}  // namespace ddprun
