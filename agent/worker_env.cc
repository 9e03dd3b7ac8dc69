#include "agent/worker_env.h"

#include <unistd.h>

#include "absl/strings/str_replace.h"

extern char** environ;

namespace ddprun {

bool WillDefaultOmpThreads(const EnvMap& base, int local_world_size) {
  return local_world_size > 1 && base.find("OMP_NUM_THREADS") == base.end();
}

EnvMap BuildWorkerEnv(const EnvMap& base, const WorkerPlacement& p) {
  EnvMap env = base;
  env["LOCAL_RANK"] = std::to_string(p.local_rank);
  env["RANK"] = std::to_string(p.rank);
  env["GROUP_RANK"] = std::to_string(p.group_rank);
  // ddprun runs one role per job, so role ranks and sizes equal the global ones.
  env["ROLE_RANK"] = std::to_string(p.rank);
  env["ROLE_NAME"] = p.role_name;
  env["LOCAL_WORLD_SIZE"] = std::to_string(p.local_world_size);
  env["WORLD_SIZE"] = std::to_string(p.world_size);
  env["GROUP_WORLD_SIZE"] = std::to_string(p.group_world_size);
  env["ROLE_WORLD_SIZE"] = std::to_string(p.world_size);
  env["MASTER_ADDR"] = p.master_addr;
  env["MASTER_PORT"] = std::to_string(p.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(p.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(p.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = p.run_id;
  // "True": init_process_group("env://") connects to the TCPStore an agent serves at
  // MASTER_ADDR:MASTER_PORT, as under torchrun's static backend (and c10d since 2.4);
  // "False": rank 0's worker hosts it there (one-node jobs). torch compares the exact string.
  env["TORCHELASTIC_USE_AGENT_STORE"] = p.agent_store ? "True" : "False";
  env["TORCHELASTIC_ERROR_FILE"] = p.error_file;
  env.emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");  // emplace keeps the user's value
  if (!p.gloo_interface.empty()) env.emplace("GLOO_SOCKET_IFNAME", p.gloo_interface);
  env.emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  if (WillDefaultOmpThreads(base, p.local_world_size)) env["OMP_NUM_THREADS"] = "1";
  if (!p.signals_to_handle.empty()) env["TORCHELASTIC_SIGNALS_TO_HANDLE"] = p.signals_to_handle;
  env["DDPRUN_ROUND"] = std::to_string(p.round);
  if (p.store_addr.empty()) {
    env.erase("DDPRUN_STORE_ADDR");  // never let a stale value from an outer launch leak in
  } else {
    env["DDPRUN_STORE_ADDR"] = p.store_addr;
  }
  for (const auto& [name, value] : {std::pair<const char*, const std::string&>{"DDPRUN_TLS_CERT", p.tls_cert},
                                     {"DDPRUN_TLS_KEY", p.tls_key},
                                     {"DDPRUN_TLS_CA", p.tls_ca}}) {
    if (value.empty() || p.store_addr.empty()) {
      env.erase(name);
    } else {
      env[name] = value;
    }
  }
  if (p.heartbeat_fd < 0) {
    env.erase("DDPRUN_HEARTBEAT_FD");
  } else {
    env["DDPRUN_HEARTBEAT_FD"] = std::to_string(p.heartbeat_fd);
  }
  return env;
}

EnvMap CurrentEnvironment() {
  EnvMap env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string kv(*entry);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> FlattenEnv(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

std::string SubstituteLocalRank(const std::string& arg, int local_rank) {
  return absl::StrReplaceAll(arg, {{"${local_rank}", std::to_string(local_rank)}});
}

}  // namespace ddprun
