#pragma once
// The names of the variables a worker starts with (docs/environment.md): torchrun's contract
// and ddprun's own. The agent sets them (agent/worker_env.cc) and the worker SDK reads them
// (worker_sdk/src/environment.cc), both from here.

namespace ddprun::worker_env {

// torchrun's.
inline constexpr char kRank[] = "RANK";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kGroupRank[] = "GROUP_RANK";
inline constexpr char kRoleRank[] = "ROLE_RANK";
inline constexpr char kRoleName[] = "ROLE_NAME";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kGroupWorldSize[] = "GROUP_WORLD_SIZE";
inline constexpr char kRoleWorldSize[] = "ROLE_WORLD_SIZE";
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kRestartCount[] = "TORCHELASTIC_RESTART_COUNT";
inline constexpr char kMaxRestarts[] = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr char kRunId[] = "TORCHELASTIC_RUN_ID";
inline constexpr char kUseAgentStore[] = "TORCHELASTIC_USE_AGENT_STORE";
inline constexpr char kErrorFile[] = "TORCHELASTIC_ERROR_FILE";
inline constexpr char kSignalsToHandle[] = "TORCHELASTIC_SIGNALS_TO_HANDLE";

// ddprun's.
inline constexpr char kRound[] = "DDPRUN_ROUND";
inline constexpr char kStoreAddr[] = "DDPRUN_STORE_ADDR";
// A file holding the token Store calls must carry (never the token itself: see
// store/store_token_file.h).
inline constexpr char kStoreTokenFile[] = "DDPRUN_STORE_TOKEN_FILE";
// The rendezvous token of the agent's own environment, which workers never get.
inline constexpr char kRdzvToken[] = "DDPRUN_RDZV_TOKEN";
inline constexpr char kTlsCert[] = "DDPRUN_TLS_CERT";
inline constexpr char kTlsKey[] = "DDPRUN_TLS_KEY";
inline constexpr char kTlsCa[] = "DDPRUN_TLS_CA";
inline constexpr char kHeartbeatFd[] = "DDPRUN_HEARTBEAT_FD";

}  // namespace ddprun::worker_env
