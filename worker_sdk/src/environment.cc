#include "ddp/worker/environment.h"

#include <stdlib.h>

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/worker_env_names.h"

extern char** environ;

namespace ddp::worker {
namespace {

namespace names = ::ddprun::worker_env;

// Reads vars[name] as a whole number in [lo, hi). `range` says the bounds in words.
class Reader {
 public:
  explicit Reader(const std::map<std::string, std::string>& vars) : vars_(vars) {}

  std::optional<std::string> Get(const std::string& name) const {
    auto it = vars_.find(name);
    if (it == vars_.end()) return std::nullopt;
    return it->second;
  }

  absl::StatusOr<std::string> Required(const std::string& name, const std::string& meaning) const {
    std::optional<std::string> value = Get(name);
    if (!value || value->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " is not set: expected ", meaning,
          "; start this program with ddprun or torchrun, or export the variable yourself"));
    }
    return *value;
  }

  absl::StatusOr<int64_t> Int(const std::string& name, const std::string& value, int64_t lo,
                              int64_t hi, const std::string& range) const {
    int64_t n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < lo || n >= hi) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "='", value, "' is not valid: expected ", range));
    }
    return n;
  }

 private:
  const std::map<std::string, std::string>& vars_;
};

constexpr int64_t kIntMax = 1LL << 31;

// WORLD_SIZE, RANK, LOCAL_WORLD_SIZE, LOCAL_RANK, GROUP_RANK.
absl::Status ParseRanks(const Reader& r, Environment& env) {
  absl::StatusOr<std::string> world =
      r.Required(names::kWorldSize, "the number of workers in the job");
  if (!world.ok()) return world.status();
  absl::StatusOr<int64_t> world_size =
      r.Int(names::kWorldSize, *world, 1, kIntMax, "a whole number >= 1");
  if (!world_size.ok()) return world_size.status();
  env.world_size = static_cast<int>(*world_size);

  absl::StatusOr<std::string> rank = r.Required(names::kRank, "this worker's global rank");
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int64_t> rank_n =
      r.Int(names::kRank, *rank, 0, env.world_size,
            absl::StrCat("a whole number in [0, WORLD_SIZE=", env.world_size, ")"));
  if (!rank_n.ok()) return rank_n.status();
  env.rank = static_cast<int>(*rank_n);

  env.local_world_size = env.world_size;
  if (std::optional<std::string> v = r.Get(names::kLocalWorldSize)) {
    absl::StatusOr<int64_t> n =
        r.Int(names::kLocalWorldSize, *v, 1, env.world_size + 1,
              absl::StrCat("a whole number in [1, WORLD_SIZE=", env.world_size, "]"));
    if (!n.ok()) return n.status();
    env.local_world_size = static_cast<int>(*n);
  }

  absl::StatusOr<std::string> local =
      r.Required(names::kLocalRank, "this worker's rank on its node");
  if (!local.ok()) return local.status();
  absl::StatusOr<int64_t> local_rank =
      r.Int(names::kLocalRank, *local, 0, env.local_world_size,
            absl::StrCat("a whole number in [0, LOCAL_WORLD_SIZE=", env.local_world_size, ")"));
  if (!local_rank.ok()) return local_rank.status();
  env.local_rank = static_cast<int>(*local_rank);

  env.group_rank = env.rank / env.local_world_size;
  if (std::optional<std::string> v = r.Get(names::kGroupRank)) {
    absl::StatusOr<int64_t> n = r.Int(names::kGroupRank, *v, 0, env.world_size,
                                      "a whole number >= 0 "
                                      "and below WORLD_SIZE");
    if (!n.ok()) return n.status();
    env.group_rank = static_cast<int>(*n);
  }
  return absl::OkStatus();
}

// MASTER_ADDR, MASTER_PORT.
absl::Status ParseMaster(const Reader& r, Environment& env) {
  absl::StatusOr<std::string> addr = r.Required(names::kMasterAddr, "the address of rank 0's node");
  if (!addr.ok()) return addr.status();
  env.master_addr = *addr;
  absl::StatusOr<std::string> port = r.Required(names::kMasterPort, "a TCP port on rank 0's node");
  if (!port.ok()) return port.status();
  absl::StatusOr<int64_t> port_n = r.Int(names::kMasterPort, *port, 1, 65536, "a port in 1-65535");
  if (!port_n.ok()) return port_n.status();
  env.master_port = static_cast<int>(*port_n);
  return absl::OkStatus();
}

// TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT, DDPRUN_ROUND, TORCHELASTIC_USE_AGENT_STORE.
absl::Status ParseRun(const Reader& r, Environment& env) {
  if (std::optional<std::string> v = r.Get(names::kRunId); v && !v->empty()) {
    env.run_id = *v;
  }
  if (std::optional<std::string> v = r.Get(names::kRestartCount)) {
    absl::StatusOr<int64_t> n = r.Int(names::kRestartCount, *v, 0, kIntMax, "a whole number >= 0");
    if (!n.ok()) return n.status();
    env.restart_count = static_cast<int>(*n);
  }
  env.round = env.restart_count;
  if (std::optional<std::string> v = r.Get(names::kRound)) {
    absl::StatusOr<int64_t> n = r.Int(names::kRound, *v, 0, INT64_MAX, "a whole number >= 0");
    if (!n.ok()) return n.status();
    env.round = *n;
  }
  if (std::optional<std::string> v = r.Get(names::kUseAgentStore)) {
    env.agent_store_at_master_port = *v == "True" || *v == "true" || *v == "1";
  }
  return absl::OkStatus();
}

// DDPRUN_HEARTBEAT_FD, DDPRUN_TLS_*, DDPRUN_STORE_TOKEN_FILE, DDPRUN_STORE_ADDR.
absl::Status ParseDdprun(const Reader& r, Environment& env) {
  if (std::optional<std::string> v = r.Get(names::kHeartbeatFd); v && !v->empty()) {
    absl::StatusOr<int64_t> n =
        r.Int(names::kHeartbeatFd, *v, 0, kIntMax, "a file descriptor number");
    if (!n.ok()) return n.status();
    env.heartbeat_fd = static_cast<int>(*n);
  }
  env.tls_cert = r.Get(names::kTlsCert).value_or("");
  env.tls_key = r.Get(names::kTlsKey).value_or("");
  env.tls_ca = r.Get(names::kTlsCa).value_or("");
  if (const int given = !env.tls_cert.empty() + !env.tls_key.empty() + !env.tls_ca.empty();
      given != 0 && given != 3) {
    return absl::InvalidArgumentError(
        "DDPRUN_TLS_CERT, DDPRUN_TLS_KEY and DDPRUN_TLS_CA must be set together (or none)");
  }
  env.store_token_file = r.Get(names::kStoreTokenFile).value_or("");
  if (std::optional<std::string> v = r.Get(names::kStoreAddr); v && !v->empty()) {
    const size_t colon = v->rfind(':');
    int port_value = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(v->substr(colon + 1), &port_value) || port_value < 1 ||
        port_value > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DDPRUN_STORE_ADDR='", *v, "' is not valid: expected HOST:PORT with a port in 1-65535"));
    }
    env.store_addr = *v;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Environment> ParseEnvironment(const std::map<std::string, std::string>& vars) {
  Reader r(vars);
  Environment env;
  for (auto* part : {ParseRanks, ParseMaster, ParseRun, ParseDdprun}) {
    if (absl::Status s = part(r, env); !s.ok()) return s;
  }
  return env;
}

absl::StatusOr<Environment> EnvironmentFromProcess() {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) vars.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return ParseEnvironment(vars);
}

}  // namespace ddp::worker
