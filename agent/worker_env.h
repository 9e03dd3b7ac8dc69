#pragma once
// The environment each worker starts with: the agent's own, plus torchrun's contract
// (docs/environment.md). Pure: no getenv, so every rule is unit-tested.

#include <string>

#include "common/env_map.h"

namespace ddprun {

/// Where one worker sits in the job during one round.
struct WorkerPlacement {
  int local_rank = 0;
  int rank = 0;
  int group_rank = 0;
  int local_world_size = 1;
  int world_size = 1;
  int group_world_size = 1;
  std::string role_name = "default";
  std::string master_addr;
  int master_port = 0;
  // An agent serves torch's TCPStore at MASTER_ADDR:MASTER_PORT (multi-node jobs); else the
  // worker with RANK 0 hosts it there.
  bool agent_store = false;
  // GLOO_SOCKET_IFNAME unless the agent's environment has one; empty: not set. gloo listens
  // where the host's name resolves, and that is loopback on many clusters.
  std::string gloo_interface;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;
  int round = 0;
  std::string error_file;        // empty when error files are disabled
  std::string store_addr;        // host:port of the master's Store service; empty: none
  std::string store_token_file;  // DDPRUN_STORE_TOKEN_FILE; empty: the Store needs no token
  int heartbeat_fd = -1;         // the worker's end of its heartbeat pipe; -1: none
  // With TLS to the master: the files, for the SDK's Store client (DDPRUN_TLS_CERT, _KEY,
  // _CA); empty: plaintext.
  std::string tls_cert, tls_key, tls_ca;
  std::string signals_to_handle;  // "SIGTERM,SIGINT,..." as torchrun exports it
  // --virtual-local-rank: LOCAL_RANK is 0, and `device_variable` (CUDA_VISIBLE_DEVICES, ...)
  // holds `device_value`, this worker's own accelerator.
  bool virtual_local_rank = false;
  std::string device_variable;
  std::string device_value;
};

/// `base` (the agent's environment) overlaid with the variables of `placement`.
EnvMap BuildWorkerEnv(const EnvMap& base, const WorkerPlacement& placement);

/// Whether BuildWorkerEnv will set OMP_NUM_THREADS=1 (so the agent can say so once).
bool WillDefaultOmpThreads(const EnvMap& base, int local_world_size);

/// `arg` with every `${local_rank}` replaced by `local_rank`, as torchrun's macros do.
std::string SubstituteLocalRank(const std::string& arg, int local_rank);

}  // namespace ddprun
