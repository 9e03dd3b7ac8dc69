#include "ddp/worker/context.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/ip_address.h"
#include "common/small_file.h"
#include "src/context_state.h"
#include "src/root_blobs.h"

namespace ddp::worker {

#if !DDP_WORKER_HAS_NCCL
Context::State::~State() { Unregister(); }  // with NCCL: in nccl.cc, where the watchdog is complete
#endif

namespace {

std::string HostPort(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return v6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

// "rank 3" or "ranks 1, 5".
std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

// The store's host must resolve here: a name that does not would make every call wait out
// its whole timeout (60 s and more) before saying anything.
absl::Status CheckStoreHostResolves(const std::string& address, const char* variable) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  absl::Status resolves =
      ddprun::CheckResolves(host, absl::StrCat("the store's host (", variable, ")"));
  return resolves.ok() ? resolves : absl::UnavailableError(resolves.message());
}

// Ranks r whose key `prefix + r` is absent, for naming who never came.
std::vector<int> MissingRanks(Store& store, const std::string& prefix,
                              const std::vector<int>& ranks) {
  std::vector<int> missing;
  for (int r : ranks) {
    absl::StatusOr<bool> present = store.Check({absl::StrCat(prefix, r)});
    if (present.ok() && !*present) missing.push_back(r);
  }
  return missing;
}

std::vector<int> AllRanks(int world_size) {
  std::vector<int> ranks(world_size);
  for (int r = 0; r < world_size; ++r) ranks[r] = r;
  return ranks;
}

// Each rank leaves a collective by counting itself out; the last one out deletes its keys,
// so that a barrier per training step does not grow the store.
absl::Status Leave(Store& store, const std::string& prefix, int world_size,
                   const std::vector<std::string>& keys) {
  absl::StatusOr<int64_t> left = store.Add(prefix + "/left", 1);
  if (!left.ok()) return left.status();
  if (*left < world_size) return absl::OkStatus();
  for (const std::string& key : keys) {
    if (absl::StatusOr<bool> deleted = store.Delete(key); !deleted.ok()) return deleted.status();
  }
  return store.Delete(prefix + "/left").status();
}

}  // namespace

// One live Context per rank per process, and a generation number in every key, so that a
// second Context (after the first is gone) never meets the first one's keys.
namespace {
absl::Mutex g_ranks_mu;
std::map<int, int>* g_generations ABSL_GUARDED_BY(g_ranks_mu) = new std::map<int, int>;
std::set<int>* g_live_ranks ABSL_GUARDED_BY(g_ranks_mu) = new std::set<int>;
}  // namespace

absl::StatusOr<int> Context::State::Register(int rank) {
  absl::MutexLock lock(&g_ranks_mu);
  if (!g_live_ranks->insert(rank).second) {
    return absl::FailedPreconditionError(
        absl::StrCat("a Context for rank ", rank,
                     " already exists in this process: use that one (two would "
                     "share the store's keys)"));
  }
  registered_rank = rank;
  return (*g_generations)[rank]++;
}

void Context::State::Unregister() {
  if (registered_rank < 0) return;
  absl::MutexLock lock(&g_ranks_mu);
  g_live_ranks->erase(registered_rank);
  registered_rank = -1;
}

std::string Context::State::KeyRoot() const {
  return absl::StrCat("ddp/r", env.round, "/g", generation);
}

void Context::State::Close() {
  if (store == nullptr || !env.store_addr.empty() || env.world_size == 1) return;
  // Rank 0 serves the store: each other rank says when it is done with it, and rank 0 keeps
  // it until they all have (see ContextOptions::close_timeout).
  const std::string closed = KeyRoot() + "/closed/";
  if (server == nullptr) {
    // A short deadline: rank 0 may be gone already (it crashed, or called exit()).
    auto closing = Store::Connect(store->address(), env.run_id, absl::Seconds(2), true, tls);
    (void)closing->Set(absl::StrCat(closed, env.rank), "");
    return;
  }
  if (failed->load()) return;  // the job is failing: its failure must reach the agent now
  std::vector<std::string> keys;
  for (int r = 1; r < env.world_size; ++r) keys.push_back(absl::StrCat(closed, r));
  absl::Status waited = store->Wait(keys, options.close_timeout);
  if (!waited.ok()) {
    std::fprintf(stderr,
                 "ddp-worker: rank 0 stops serving the store (%s) before every other rank "
                 "was done with it: %s\n",
                 store->address().c_str(), std::string(waited.message()).c_str());
  }
}

Context::Context(std::unique_ptr<State> state) : state_(std::move(state)) {}
Context::Context(Context&&) noexcept = default;

Context& Context::operator=(Context&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->Close();
    state_ = std::move(other.state_);
  }
  return *this;
}

Context::~Context() {
  if (state_ != nullptr) state_->Close();
}

namespace {

// Whether every address `host` resolves to here is a loopback address.
bool ResolvesToLoopbackOnly(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool loopback_only = true;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      loopback_only &= (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      loopback_only &=
          IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    }
  }
  ::freeaddrinfo(found);
  return loopback_only;
}

// Rank 0's own store (no launcher store) listens where the others reach it, MASTER_ADDR,
// not on every address of the host; it serves this run only, and with the launcher's
// token when there is one. Every address instead when MASTER_ADDR is a name that means
// loopback here in a job that spans nodes (Debian's 127.0.1.1 entry for the host name: the
// other nodes resolve it to the host's network address), or is not an address of this host.
absl::StatusOr<std::unique_ptr<StoreServer>> StartRankZeroStore(const Environment& env, int port,
                                                                const std::string& token) {
  StoreServerOptions options;
  options.port = port;
  options.run_id = env.run_id;
  options.token = token;
  const bool spans_nodes = env.world_size > env.local_world_size;
  if (!(spans_nodes && ResolvesToLoopbackOnly(env.master_addr))) {
    options.bind_host = env.master_addr;
    absl::StatusOr<std::unique_ptr<StoreServer>> server = StoreServer::Start(options);
    if (server.ok()) return server;
    std::fprintf(stderr,
                 "ddp-worker: rank 0's store cannot listen at MASTER_ADDR=%s (%s); it listens "
                 "on every address instead\n",
                 env.master_addr.c_str(), std::string(server.status().message()).c_str());
    options.bind_host.clear();
  }
  return StoreServer::Start(options);
}

}  // namespace

absl::StatusOr<Context> Context::FromEnv(const ContextOptions& options) {
  absl::StatusOr<Environment> env = EnvironmentFromProcess();
  if (!env.ok()) return env.status();
  return Create(*env, options);
}

absl::StatusOr<Context> Context::Create(const Environment& env, const ContextOptions& options) {
  auto state = std::make_unique<State>();
  state->env = env;
  state->options = options;
  absl::StatusOr<int> generation = state->Register(env.rank);
  if (!generation.ok()) return generation.status();
  state->generation = *generation;
  std::string token;
  if (!env.store_token_file.empty()) {
    absl::StatusOr<std::string> read =
        ddprun::ReadTokenFile(env.store_token_file, "DDPRUN_STORE_TOKEN_FILE");
    if (!read.ok()) return read.status();
    token = std::move(*read);
  }
  std::string address = env.store_addr;
  if (address.empty()) {
    // No launcher store (torchrun, srun, mpirun, one-node ddprun): rank 0 serves one where
    // torch's TCPStore would be, or next to it when torchrun's agent serves that one.
    const int port = env.master_port + (env.agent_store_at_master_port ? 1 : 0);
    if (port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("MASTER_PORT=", env.master_port,
                       " leaves no port for rank 0's store (MASTER_PORT + 1, "
                       "as TORCHELASTIC_USE_AGENT_STORE=True); choose a lower --master-port"));
    }
    if (env.rank == 0) {
      absl::StatusOr<std::unique_ptr<StoreServer>> server = StartRankZeroStore(env, port, token);
      if (!server.ok()) return server.status();
      state->server = std::move(*server);
    }
    address = HostPort(env.master_addr, port);
  }
  StoreAccess tls;
  tls.token = token;
  // TLS is for the master's Store only; rank 0's own store is plaintext.
  if (!env.tls_cert.empty() && !env.store_addr.empty()) {
    for (const auto& [path, pem] :
         {std::pair<const std::string&, std::string*>{env.tls_cert, &tls.cert_pem},
          {env.tls_key, &tls.key_pem},
          {env.tls_ca, &tls.ca_pem}}) {
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      if (!in) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the TLS file '", path, "' (DDPRUN_TLS_CERT/_KEY/_CA) cannot be read by this worker"));
      }
      *pem = text.str();
    }
  }
  state->tls = tls;
  if (absl::Status s = CheckStoreHostResolves(
          address, env.store_addr.empty() ? "MASTER_ADDR" : "DDPRUN_STORE_ADDR");
      !s.ok()) {
    return s;
  }
  state->store = Store::Connect(address, env.run_id, options.store_call_timeout, true, tls);
  return Context(std::move(state));
}

const Environment& Context::env() const { return state_->env; }

Store& Context::store() { return *state_->store; }

absl::Status Context::Heartbeat() {
  const int fd = state_->env.heartbeat_fd;
  if (fd < 0) return absl::OkStatus();
  if (::write(fd, ".", 1) == 1 || errno == EAGAIN || errno == EINTR) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("heartbeat to DDPRUN_HEARTBEAT_FD=", fd, " failed: ", strerror(errno)));
}

std::string Context::NextKeyPrefix(absl::string_view kind, absl::string_view name) {
  const int n = state_->uses[absl::StrCat(kind, "/", name)]++;
  return absl::StrCat(state_->KeyRoot(), "/", kind, "/", name, "/", n);
}

absl::Status Context::Barrier(absl::string_view name, absl::Duration timeout) {
  return state_->Note([&]() -> absl::Status {
    Store& store = this->store();
    const Environment& env = state_->env;
    const std::string prefix = NextKeyPrefix("barrier", name);
    const std::string arrived = prefix + "/arrived/";
    if (absl::Status s = store.Set(absl::StrCat(arrived, env.rank), ""); !s.ok()) return s;
    absl::StatusOr<int64_t> count = store.Add(prefix + "/count", 1);
    if (!count.ok()) return count.status();
    if (*count == env.world_size) {
      if (absl::Status s = store.Set(prefix + "/done", ""); !s.ok()) return s;
    }
    absl::Status waited = store.Wait({prefix + "/done"}, timeout);
    if (absl::IsDeadlineExceeded(waited)) {
      const std::vector<int> missing = MissingRanks(store, arrived, AllRanks(env.world_size));
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", env.rank, ": barrier '", name, "' timed out after ",
                       absl::FormatDuration(timeout), ": ", RankList(missing), " never arrived (",
                       missing.size(), " of ", env.world_size,
                       "); they may have crashed or be stuck elsewhere - see their logs"));
    }
    if (!waited.ok()) return waited;
    std::vector<std::string> keys = {prefix + "/count", prefix + "/done"};
    for (int r = 0; r < env.world_size; ++r) keys.push_back(absl::StrCat(arrived, r));
    return Leave(store, prefix, env.world_size, keys);
  }());
}

absl::StatusOr<std::string> Context::Broadcast(absl::string_view name, int root,
                                               const std::string& value, absl::Duration timeout) {
  return state_->Note([&]() -> absl::StatusOr<std::string> {
    Store& store = this->store();
    const Environment& env = state_->env;
    if (root < 0 || root >= env.world_size) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast '", name, "': root ", root,
                                                     " is not a rank (WORLD_SIZE=", env.world_size,
                                                     ")"));
    }
    const std::string prefix = NextKeyPrefix("broadcast", name);
    const std::string key = prefix + "/data";
    std::string result = value;
    if (env.rank == root) {
      if (absl::Status s = store.Set(key, value); !s.ok()) return s;
    } else {
      absl::StatusOr<std::string> got = store.Get(key, timeout);
      if (absl::IsDeadlineExceeded(got.status())) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", env.rank, ": broadcast '", name, "': no value from root rank ", root,
            " under key '", key, "' after ", absl::FormatDuration(timeout), "; rank ", root,
            " may have crashed or not reached this broadcast - see its log"));
      }
      if (!got.ok()) return got.status();
      result = std::move(*got);
    }
    if (absl::Status s = Leave(store, prefix, env.world_size, {key}); !s.ok()) return s;
    return result;
  }());
}

absl::StatusOr<std::vector<std::string>> Context::AllGather(absl::string_view name,
                                                            const std::string& value,
                                                            absl::Duration timeout) {
  return state_->Note([&]() -> absl::StatusOr<std::vector<std::string>> {
    Store& store = this->store();
    const Environment& env = state_->env;
    const std::string base = NextKeyPrefix("all_gather", name);
    const std::string prefix = base + "/data/";
    if (absl::Status s = store.Set(absl::StrCat(prefix, env.rank), value); !s.ok()) return s;
    std::vector<std::string> keys;
    for (int r = 0; r < env.world_size; ++r) keys.push_back(absl::StrCat(prefix, r));
    absl::StatusOr<std::vector<std::string>> values = store.MultiGet(keys, timeout);
    if (absl::IsDeadlineExceeded(values.status())) {
      const std::vector<int> missing = MissingRanks(store, prefix, AllRanks(env.world_size));
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", env.rank, ": all_gather '", name, "' timed out after ",
                       absl::FormatDuration(timeout), ": ", RankList(missing), " never arrived (",
                       missing.size(), " of ", env.world_size,
                       "); they may have crashed or be stuck elsewhere "
                       "- see their logs"));
    }
    if (!values.ok()) return values.status();
    if (absl::Status s = Leave(store, base, env.world_size, keys); !s.ok()) return s;
    return values;
  }());
}

int RootCount(int world_size, int ranks_per_root) {
  return (world_size + ranks_per_root - 1) / ranks_per_root;
}

// NCCL's split of ranks among ids (ncclCommInitRankScalable): `roots` groups as even as can
// be, the first world_size % roots of them one rank larger.
int FirstRankOfRoot(int root, int world_size, int roots) {
  const int per_root = world_size / roots;
  return root * per_root + std::min(root, world_size % roots);
}

int RootOfRank(int rank, int world_size, int roots) {
  const int per_root = world_size / roots;
  const int larger = world_size % roots;
  const int limit = larger * (per_root + 1);
  return rank < limit ? rank / (per_root + 1) : larger + (rank - limit) / per_root;
}

absl::StatusOr<std::vector<std::string>> ExchangeRootBlobs(
    Context& ctx, const std::string& key_prefix, int roots,
    const std::function<absl::StatusOr<std::string>()>& make, absl::Duration timeout,
    const std::string& what) {
  Store& store = ctx.store();
  const Environment& env = ctx.env();
  if (roots < 1 || roots > env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the number of roots must be in [1, WORLD_SIZE=", env.world_size, "], not ", roots));
  }
  // A value is 'K' + the blob, or 'E' + why the root could not make it.
  const std::string prefix = key_prefix + "/id/";
  const int my_root = RootOfRank(env.rank, env.world_size, roots);
  if (FirstRankOfRoot(my_root, env.world_size, roots) == env.rank) {
    absl::StatusOr<std::string> blob = make();
    const std::string value = blob.ok() ? "K" + *blob : "E" + std::string(blob.status().message());
    if (absl::Status s = store.Set(absl::StrCat(prefix, my_root), value); !s.ok()) return s;
    if (!blob.ok()) return blob.status();
  }
  std::vector<std::string> keys;
  for (int i = 0; i < roots; ++i) keys.push_back(absl::StrCat(prefix, i));
  absl::StatusOr<std::vector<std::string>> values = store.MultiGet(keys, timeout);
  if (absl::IsDeadlineExceeded(values.status())) {
    std::vector<int> root_ids(roots);
    for (int i = 0; i < roots; ++i) root_ids[i] = i;
    const std::vector<int> missing_roots = MissingRanks(store, prefix, root_ids);
    std::vector<int> missing;
    for (int i : missing_roots) missing.push_back(FirstRankOfRoot(i, env.world_size, roots));
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", env.rank, ": no ", what, " from ", RankList(missing), " under key '",
                     prefix, missing_roots.empty() ? 0 : missing_roots.front(), "' after ",
                     absl::FormatDuration(timeout), "; ", RankList(missing),
                     missing.size() == 1 ? " may have crashed - see its log"
                                         : " may have crashed - see their logs"));
  }
  if (!values.ok()) return values.status();
  std::vector<std::string> blobs;
  for (int i = 0; i < roots; ++i) {
    const std::string& v = (*values)[i];
    if (v.empty() || v[0] != 'K') {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", env.rank, ": rank ", FirstRankOfRoot(i, env.world_size, roots),
          " could not create the ", what, ": ", v.empty() ? "(no message)" : v.substr(1)));
    }
    blobs.push_back(v.substr(1));
  }
  if (absl::Status s = Leave(store, key_prefix, env.world_size, keys); !s.ok()) return s;
  return blobs;
}

}  // namespace ddp::worker
