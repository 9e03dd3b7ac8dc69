#include "launcher/rendezvous_start.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/logs/log_format.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/ip_address.h"
#include "common/listen_socket.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "launcher/name_wait.h"
#include "net/network_plugin.h"
#include "node/host_info.h"
#include "rendezvous/run_access.h"
#include "spdlog/spdlog.h"
#include "store/store_address.h"
#include "store/tcp_store_server.h"

namespace ddprun {
namespace {

// The master a node hosts while it leads an elected run: the workers' store hands
// it the gRPC connections that arrive on the store's port, and closes them while the node
// does not lead.
struct LeaderSlot {
  absl::Mutex mu;
  HostedMaster* master ABSL_GUARDED_BY(mu) = nullptr;
};

// The rendezvous master this agent hosts (if any) and the TCPStore it serves its workers.
struct Served {
  std::unique_ptr<HostedMaster> master;
  std::unique_ptr<TcpStoreServer> store;
  WorkerStore worker_store;
  std::shared_ptr<LeaderSlot> leader_slot;  // elected runs only
};

void LogRefusedStoreClient(const std::string& peer, const std::string& why) {
  spdlog::warn(
      "closed a connection to the workers' store from {}: {}; only that connection is "
      "closed, and the store call on it fails",
      peer, why);
}

NetworkRendezvousOptions RendezvousOptions(const AgentConfig& config);

// The master a node hosts for its job, on its workers' store's `port`.
MasterOptions HostedMasterOptions(const AgentConfig& config, int port) {
  MasterOptions options;
  options.port = port;
  options.adopt_connections = true;  // the store listens, on every address, and hands them over
  options.token = config.token;
  options.only_run_id = config.run_id;
  // The run's settings are this agent's: a stranger's early join cannot define them.
  options.run_settings = config.rendezvous;
  options.store_timeout = config.read_timeout;
  options.tls = config.tls;
  return options;
}

// The port this agent meant to host the master on is in use. Another agent of the job on
// this machine that won the race, or a ddprun-master, is joined; any other program there
// (a leftover server, another job's TCPStore) would only keep this node waiting in
// silence: Unavailable, naming the port (exit 75).
absl::Status JoinOnlyAMaster(const NetworkPlugin& network, const AgentConfig& config) {
  constexpr absl::Duration kAnswerWithin = absl::Seconds(5);
  absl::Status master = network.probe_master(RendezvousOptions(config), kAnswerWithin);
  if (master.ok()) return master;
  return absl::FailedPreconditionError(absl::StrCat(
      "port ", config.endpoint_port,
      " on this machine, where this node would host the rendezvous master, is held by a "
      "program that is not a ddprun rendezvous master (",
      master.message(), "); stop that program (ss -ltnp 'sport = :", config.endpoint_port,
      "' shows it) or give every node another port"));
}

// The agent on the --rdzv-endpoint host (is_host, inferred as torchrun does unless
// --rdzv-conf is_host= says) serves the master in-process, and its workers' TCPStore on the
// same port, as torchrun's static agent does: one port for the whole job. When several
// agents on one host race for the port, the losers simply join the winner's master.
absl::Status MaybeHostMaster(const NetworkPlugin& network, const AgentConfig& config,
                             Served& served) {
  const bool is_host = config.is_host ? *config.is_host : IsThisHost(config.endpoint_host);
  if (!is_host) return absl::OkStatus();
  // Every agent and worker of the job may hold a connection to it.
  RaiseOpenFileLimit();
  absl::StatusOr<std::unique_ptr<HostedMaster>> master =
      network.host_master(HostedMasterOptions(config, config.endpoint_port));
  absl::Status hosting = master.status();
  std::unique_ptr<TcpStoreServer> store;
  if (hosting.ok()) {
    TcpStoreServerOptions store_options;
    store_options.port = config.endpoint_port;
    store_options.grpc_handoff = [hosted = master->get()](int listen_fd, int fd) {
      hosted->AdoptConnection(listen_fd, fd);
    };
    store_options.on_refused = LogRefusedStoreClient;
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> started = TcpStoreServer::Start(store_options);
    if (started.ok()) store = std::move(*started);
    hosting = started.status();
  }
  if (!hosting.ok()) {
    // A port in use: another agent on this machine won the race, a detail. Anything else
    // is worth seeing: this agent meant to host and cannot.
    if (absl::IsUnavailable(hosting)) {
      DDPRUN_RETURN_IF_ERROR(JoinOnlyAMaster(network, config));
    }
    const auto level = absl::IsUnavailable(hosting) ? spdlog::level::info : spdlog::level::warn;
    spdlog::log(level, "not hosting the rendezvous master ({}); joining the one at {}:{}",
                hosting.message(), config.endpoint_host, config.endpoint_port);
    return absl::OkStatus();
  }
  spdlog::info("hosting the rendezvous master for run '{}' and the workers' store on {}:{}",
               config.run_id, config.endpoint_host, config.endpoint_port);
  if (config.token.empty()) {
    spdlog::warn("{}", NoTokenWarning(config.endpoint_port, "set DDPRUN_RDZV_TOKEN on every node"));
  }
  served.master = std::move(*master);
  served.store = std::move(store);
  return absl::OkStatus();
}

// Every multi-node agent that may get group rank 0 serves its workers a TCPStore: beside the
// master it hosts, else on a port of its own (c10d: --master-port when given), held for its
// whole life, so that no worker binds a port and the port stays the same across rounds.
absl::Status ServeMasterAndStore(const NetworkPlugin& network, const AgentConfig& config,
                                 bool elected, Served& served) {
  const bool is_static = config.fixed_node_rank;
  if (!elected) DDPRUN_RETURN_IF_ERROR(MaybeHostMaster(network, config, served));
  // Static: node 0's store is the one on --master-port; the other nodes never get rank 0.
  const bool on_master_port = served.store != nullptr || (is_static && config.node_rank != 0);
  if (!on_master_port) {
    // Every worker of the job connects to it when this node gets group rank 0: the soft
    // limit (often 1,024, or 256) would run out at a few hundred nodes' workers.
    RaiseOpenFileLimit();
    TcpStoreServerOptions options;
    options.port = !is_static && config.master_port ? *config.master_port : 0;
    options.on_refused = LogRefusedStoreClient;
    if (elected) {
      served.leader_slot = std::make_shared<LeaderSlot>();
      options.grpc_handoff = [slot = served.leader_slot](int listen_fd, int fd) {
        absl::MutexLock lock(&slot->mu);
        if (slot->master != nullptr) {
          slot->master->AdoptConnection(listen_fd, fd);
        } else {
          ::close(fd);  // this node does not lead (any more): the client asks the election again
        }
      };
    }
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> store = TcpStoreServer::Start(options);
    if (!store.ok()) {
      return absl::Status(
          store.status().code(),
          absl::StrCat("cannot serve the workers' store",
                       options.port != 0 ? absl::StrCat(" on --master-port=", options.port) : "",
                       ": ", store.status().message()));
    }
    served.store = std::move(*store);
  }
  StoreAddressFacts facts;
  facts.store_on_master_port = on_master_port;
  // An elected backend's endpoint names its store's members, which say nothing of where this
  // node is reached (a store gateway on every node is "localhost" everywhere).
  facts.endpoint_host = elected ? "" : config.endpoint_host;
  facts.endpoint_is_this_host = !elected && IsThisHost(config.endpoint_host);
  facts.local_addr = config.local_addr;
  facts.host_name = HostName();
  facts.host_name_beyond_loopback = ResolvesBeyondLoopback(facts.host_name);
  served.worker_store.server = served.store.get();
  served.worker_store.offer = OfferStoreAddress(facts);
  served.worker_store.port = on_master_port ? config.endpoint_port : served.store->port();
  served.worker_store.pick_gloo_interface = !facts.host_name_beyond_loopback;
  return absl::OkStatus();
}

// Starts the HTTP server of --metrics-port into `endpoint`, and says where it is.
absl::Status ServeMetricsWith(const NetworkPlugin& network, int port, HostedMaster* master,
                              const AgentMetricsBoard* agent,
                              std::unique_ptr<MetricsEndpoint>& endpoint) {
  MetricsEndpointOptions options;
  options.port = port;
  options.master = master;
  options.agent = agent;
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> served = network.serve_metrics(options);
  if (!served.ok()) return served.status();
  endpoint = std::move(*served);
  // Seen at the default log level: the URL is what a user opens next.
  const std::string base = absl::StrCat("http://", HostName(), ":", endpoint->port());
  spdlog::warn("metrics on {}/metrics{}", base,
               master != nullptr ? absl::StrCat(", the job's status page on ", base, "/") : "");
  return absl::OkStatus();
}

// An agent that hosts the master cannot leave while other nodes still use it or may still
// come (after the exit barrier timed out on this node, or when this node is excluded or
// unhealthy): it serves on until the run has ended and they are gone, or until one of the
// signals it handles asks it to stop.
void ServeWhileOthersRun(const HostedMaster& master, const AgentConfig& config) {
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : config.signals_to_handle) sigaddset(&stop, sig);
  UniqueFd signals(::signalfd(-1, &stop, SFD_CLOEXEC));
  spdlog::warn(
      "other nodes still run and this node hosts their rendezvous master: serving "
      "it until they finish (send SIGTERM to stop now, which ends their run)");
  while (master.RunGoesOn(config.run_id)) {
    pollfd fds[2] = {{master.session_end_fd(), POLLIN, 0}, {signals.get(), POLLIN, 0}};
    // The fd says when a session or the run ends; a run that ends with no node left in it
    // (its join_timeout, say) says nothing, so look again every second too.
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    uint64_t count = 0;
    (void)!::read(master.session_end_fd(), &count, sizeof count);
  }
}

NetworkRendezvousOptions RendezvousOptions(const AgentConfig& config) {
  NetworkRendezvousOptions options;
  options.endpoint = HostPort(config.endpoint_host, config.endpoint_port);
  options.run_id = config.run_id;
  options.token = config.token;
  options.settings = config.rendezvous;
  options.heartbeat_timeout = config.heartbeat_timeout;
  options.tls = config.tls;
  options.endpoint_named_by = config.rdzv_backend == "static" ? "--master-addr and --master-port"
                              : config.rdzv_backend == "c10d" ? "--rdzv-endpoint"
                                                              : "the elected leader's address";
  return options;
}

// Waits for the endpoint's host name to resolve (launcher/name_wait.h), stopped early by the
// signals the agent handles, which are blocked by now (run_ddprun.cc).
absl::Status WaitForEndpointName(const AgentConfig& config, const std::string& option) {
  NameWait wait;
  wait.host = config.endpoint_host;
  wait.what = option;
  wait.bound = config.rendezvous.join_timeout;
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : config.signals_to_handle) sigaddset(&stops, sig);
  NameWaitWorld world;
  world.resolve = [&] { return CheckResolves(wait.host, option); };
  world.now = [] { return MonotonicNow(); };
  world.pause = [&stops](absl::Duration d) {
    const timespec pause = absl::ToTimespec(d);
    const int signal = ::sigtimedwait(&stops, nullptr, &pause);
    return signal > 0 ? signal : 0;
  };
  world.warn = [](const std::string& line) { spdlog::warn("{}", line); };
  world.info = [](const std::string& line) { spdlog::info("{}", line); };
  return WaitUntilResolves(wait, world);
}

// The multi-node half: the network plugin, the master this agent may host, the workers'
// store and the connection to the master.
class NetworkRendezvous : public StartedRendezvous {
 public:
  NetworkRendezvous(const AgentConfig& config, NetworkPlugin network, bool elected)
      : config_(config), network_(std::move(network)), elected_run_(elected) {}

  int Start(const std::string& endpoint_option) {
    // Every node must reach the master there, and its workers the store when it is there
    // too: a name that does not resolve is waited for, saying so, up to join_timeout.
    if (absl::Status s = WaitForEndpointName(config_, endpoint_option); !s.ok()) {
      int signal = 0;
      if (absl::IsCancelled(s) && absl::SimpleAtoi(s.message(), &signal)) {
        return ExitCodeForSignal(signal);
      }
      spdlog::error("{}", s.message());
      return kExitRendezvous;
    }
    if (absl::Status s = ServeMasterAndStore(network_, config_, elected_run_, served_); !s.ok()) {
      spdlog::error("{}", s.message());
      // Another program on the master's port: the rendezvous cannot happen here.
      return absl::IsFailedPrecondition(s) ? kExitRendezvous : kExitInternal;
    }
    if (elected_run_) {
      // Any node may be elected to host the master, on its workers' store's port: each says
      // what c10d's and static's hosting node says.
      if (config_.token.empty()) {
        spdlog::warn("{}", NoTokenWarning(served_.worker_store.port,
                                          "set DDPRUN_RDZV_TOKEN, with TLS, on every node"));
      }
      std::unique_ptr<ElectedRendezvous> elected = network_.elect(ElectionOptionsFor());
      elected_ = elected.get();
      connection_ = std::move(elected);
    } else {
      connection_ = network_.connect(RendezvousOptions(config_));
    }
    return 0;
  }

  RendezvousConnection& connection() override { return *connection_; }
  std::optional<WorkerStore> worker_store() const override { return served_.worker_store; }
  absl::Status ServeMetrics(int port, const AgentMetricsBoard* agent) override {
    return ServeMetricsWith(network_, port, served_.master.get(), agent, metrics_);
  }
  void Stop(bool others_still_run) override {
    if (elected_ != nullptr) {
      // A leader serves on as c10d's hosting agent does; then leaves the election.
      elected_->CloseSession();
      HostedMaster* leading = elected_->hosted_master();
      if (leading != nullptr && others_still_run) ServeWhileOthersRun(*leading, config_);
      elected_ = nullptr;
    }
    connection_.reset();
    if (served_.master) {
      if (others_still_run) ServeWhileOthersRun(*served_.master, config_);
    }
    metrics_.reset();  // it reads the master's state and the store's counts
    if (served_.master) served_.master->Shutdown(config_.close_timeout);
    served_.store.reset();  // after the master: it hands the master its connections
  }

 private:
  // Elected runs: where the others reach the master this node hosts when it leads (its
  // workers' store's port), and how its store hands that master its connections.
  ElectionOptions ElectionOptionsFor() const {
    ElectionOptions options;
    options.rendezvous = RendezvousOptions(config_);
    options.backend = config_.backend;
    options.master = HostedMasterOptions(config_, served_.worker_store.port);
    // The address it offers for MASTER_ADDR (--local-addr), else the one it reaches its
    // store from: an address the other nodes, which reach the store too, most likely reach;
    // never loopback (a store gateway on every node), which the others would take for their
    // own.
    std::string addr = served_.worker_store.offer.addr;
    if (addr.empty()) {
      addr = AddressToward(config_.endpoint_host);
      if (addr.empty() || IsLoopbackOrUnspecified(addr)) {
        const std::vector<std::string> own = OwnIpAddresses(1);
        addr = own.empty() ? HostName() : own.front();
      }
    }
    options.self = HostPort(addr, served_.worker_store.port);
    options.on_lead = [slot = served_.leader_slot](HostedMaster* master) {
      absl::MutexLock lock(&slot->mu);
      slot->master = master;
    };
    return options;
  }

  const AgentConfig& config_;
  NetworkPlugin network_;
  const bool elected_run_;  // its backend's hosting rule is kElected
  Served served_;
  std::unique_ptr<MetricsEndpoint> metrics_;          // goes before the master it reads
  std::unique_ptr<RendezvousConnection> connection_;  // last: closed first
  ElectedRendezvous* elected_ = nullptr;              // connection_, when the run is elected
};

// A one-node job: the master's rules in-process (LocalRendezvous), no network. Given an
// endpoint (--rdzv-endpoint, without --standalone), its agent serves the workers' TCPStore
// there, as torchrun does: workers get MASTER_ADDR as given, the endpoint's port and
// TORCHELASTIC_USE_AGENT_STORE=True. Otherwise rank 0's worker hosts it on a free port.
class LocalStart : public StartedRendezvous {
 public:
  explicit LocalStart(const AgentConfig& config) : config_(config), local_(config.rendezvous) {}

  int Start() {
    if (config_.standalone || config_.rdzv_endpoint.empty()) return 0;
    // The store is served here and the workers are told the endpoint: a name of another
    // machine would leave them waiting there until TCPStore's timeout.
    if (!IsThisHost(config_.endpoint_host)) {
      spdlog::error(
          "--rdzv-endpoint={} is not an address of this machine, but a one-node job's "
          "workers meet at this one: give this machine's name or address (the workers' "
          "MASTER_ADDR), or leave --rdzv-endpoint out",
          config_.rdzv_endpoint);
      return kExitUsage;
    }
    TcpStoreServerOptions options;
    options.port = config_.endpoint_port;
    options.on_refused = LogRefusedStoreClient;
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> store = TcpStoreServer::Start(options);
    if (!store.ok()) {
      spdlog::error(
          "cannot serve the workers' store on --rdzv-endpoint={}: {}; another job on this "
          "machine may hold the port: give each job a port of its own, or use --standalone",
          config_.rdzv_endpoint, store.status().message());
      return kExitInternal;
    }
    store_ = std::move(*store);
    return 0;
  }

  RendezvousConnection& connection() override { return local_; }
  std::optional<WorkerStore> worker_store() const override {
    if (!store_) return std::nullopt;
    WorkerStore served;
    served.server = store_.get();
    served.offer.addr = config_.endpoint_host;
    served.port = store_->port();
    return served;
  }
  void Stop(bool) override {
    metrics_.reset();  // it reads the agent's board
    store_.reset();
  }
  // The agent's metrics only: a one-node job has no master to show (docs/observability.md).
  // The plugin is loaded for it then, and only then.
  absl::Status ServeMetrics(int port, const AgentMetricsBoard* agent) override {
    absl::StatusOr<NetworkPlugin> network = LoadNetworkPlugin();
    if (!network.ok()) return network.status();
    network_ = std::move(*network);
    return ServeMetricsWith(network_, port, nullptr, agent, metrics_);
  }

 private:
  const AgentConfig& config_;
  LocalRendezvous local_;
  std::unique_ptr<TcpStoreServer> store_;
  NetworkPlugin network_{};
  std::unique_ptr<MetricsEndpoint> metrics_;
};

}  // namespace

std::unique_ptr<StartedRendezvous> StartRendezvous(const RendezvousBackend& backend,
                                                   const AgentConfig& config,
                                                   const std::string& endpoint_option,
                                                   int& exit_code) {
  if (config.rendezvous.max_nodes == 1) {
    auto local = std::make_unique<LocalStart>(config);
    exit_code = local->Start();
    if (exit_code != 0) return nullptr;
    return local;
  }
  const std::string& network = backend.network;
  absl::StatusOr<NetworkPlugin> plugin = LoadNetworkPlugin(network);
  if (!plugin.ok()) {
    spdlog::error("{}", plugin.status().message());
    exit_code = kExitInternal;
    return nullptr;
  }
  const bool elected = backend.hosting == HostingRule::kElected;
  if (elected && plugin->elect == nullptr) {
    spdlog::error(
        "--rdzv-backend={} elects the node that hosts the rendezvous master, but the network "
        "plugin's half '{}' cannot elect: install the libddprun_network.so of this ddprun",
        config.rdzv_backend, network);
    exit_code = kExitInternal;
    return nullptr;
  }
  auto started = std::make_unique<NetworkRendezvous>(config, std::move(*plugin), elected);
  exit_code = started->Start(endpoint_option);
  if (exit_code != 0) return nullptr;
  return started;
}

}  // namespace ddprun
