#pragma once
// The worker environment that torchrun, ddprun (and a launcher script that exports the same
// variables under srun or mpirun) give each worker, parsed and checked.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace ddp::worker {

struct Environment {
  int rank = 0;                 // RANK
  int local_rank = 0;           // LOCAL_RANK
  int world_size = 1;           // WORLD_SIZE
  int local_world_size = 1;     // LOCAL_WORLD_SIZE (default: WORLD_SIZE, one node)
  int group_rank = 0;           // GROUP_RANK (default: RANK / LOCAL_WORLD_SIZE)
  std::string master_addr;      // MASTER_ADDR
  int master_port = 0;          // MASTER_PORT
  std::string run_id = "none";  // TORCHELASTIC_RUN_ID
  int restart_count = 0;        // TORCHELASTIC_RESTART_COUNT
  int64_t round = 0;            // DDPRUN_ROUND (default: the restart count)
  // DDPRUN_STORE_ADDR: host:port of the ddprun master's Store. Empty when the launcher gives
  // none (torchrun, srun, mpirun, a one-node ddprun job): rank 0 then serves a store itself
  // at MASTER_ADDR:MASTER_PORT.
  std::string store_addr;
  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent itself serves a TCPStore at
  // MASTER_ADDR:MASTER_PORT (static rendezvous; c10d since PyTorch 2.4), so rank 0's store
  // uses MASTER_PORT + 1 instead.
  bool agent_store_at_master_port = false;
  // DDPRUN_HEARTBEAT_FD: where Context::Heartbeat writes, when ddprun runs with
  // --worker-heartbeat-timeout; -1: not asked for.
  int heartbeat_fd = -1;
  // DDPRUN_TLS_CERT, DDPRUN_TLS_KEY, DDPRUN_TLS_CA: files for TLS to the master's Store, set
  // by ddprun when its agents use TLS (--rdzv-conf tls_*); empty: plaintext.
  std::string tls_cert, tls_key, tls_ca;
  // DDPRUN_STORE_TOKEN_FILE: a file (readable by this user only) holding the token every
  // Store call carries; set by ddprun. Empty: no token.
  std::string store_token_file;
};

/// Parses `vars` (name -> value). RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
/// are required; the rest have the defaults above. An error names the variable, its value
/// and what was expected.
absl::StatusOr<Environment> ParseEnvironment(const std::map<std::string, std::string>& vars);

/// ParseEnvironment over this process's environment.
absl::StatusOr<Environment> EnvironmentFromProcess();

}  // namespace ddp::worker
