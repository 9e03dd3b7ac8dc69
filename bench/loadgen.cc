// ddprun-loadgen: plays N agents against one rendezvous master, from one process, to measure
// the master at cluster scale. Each simulated agent is a real client of the protocol: its own
// Session stream (the agent's SessionStream class), its own identity, the agent's channel
// settings, heartbeats every keep_alive_interval from round 0 on, and the agent's answers (a stop
// order is answered with a join for the next round, unless it carries that round: a restart
// in place, which the agents ask for as ddprun's do unless --restart-path=join). Streams share at
// most --connections connections, or each has its own (--connections=0), as agents on separate
// hosts would. With --tls-cert/--tls-key/--tls-ca every connection is mutual TLS, as an
// agent's with the same --rdzv-conf keys.
//
// Measured, from this side of the wire:
//   connect  - every connection up (channels created and READY)
//   open     - N Session streams opened (before any join, as agents on separate hosts
//              would have theirs)
//   round    - first join -> every agent holds its assignment for round 0
//   restart  - one agent reports a failed worker -> every agent stopped and holding its
//              assignment for the next round: rejoined for it on the join path; in place,
//              each has also said it stopped and group rank 0 was told its store may open
//              (repeated --restarts times)
//   news     - in each restart, from the failure report to each agent's stop order: p50,
//              p99 and max over every agent of every restart
//   silent   - with --silent-node, last: agent 0 stops heartbeating, as a host that froze
//              or fell off the network without a reset; from its last heartbeat to each
//              other agent's stop order, against keep_alive_interval x keep_alive_max_attempt
//   master restart - with --restart-master=CMD, last: the master (--master-pid) is SIGKILLed;
//              once every agent has lost it and --outage seconds have passed, CMD --port=PORT
//              starts a new one, and every agent asks for its place back in its round as
//              ddprun's agents do (a Join with resume): from the new master's start to every
//              agent holding its place (Resumed) and group rank 0 told its store may open
//   etcd     - with --etcd=MEMBERS, first: every agent takes an etcd lease and campaigns for
//              the run's leader key (bench/etcd_load.h), as the etcd-v3 backend's agents do;
//              from the first lease to every campaign answered (the one leader's address
//              must be --endpoint, the master under test), then to every other agent
//              watching the key. The leases are renewed every third of --etcd-lease-ttl
//              through every later phase.
// and, read from /proc/<master pid>: the master's peak RSS and its CPU time per phase.
// Every round is checked: group ranks 0..N-1 once each, one world size, one master address.
// Prints one JSON object on stdout.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#ifdef DDPRUN_ETCD  // built with the etcd-v3 backend (bench/CMakeLists.txt)
#include "bench/etcd_load.h"
#endif
#include "bench/measure.h"
#include "common/listen_socket.h"
#include "common/status_macros.h"
#include "master/master_server.h"
#include "net/grpc_rendezvous.h"
#include "rendezvous/tls_config.h"
#include "rpc/wire.h"

extern char** environ;

namespace ddprun {
namespace {

struct Options {
  std::string endpoint;
  std::string run_id = "loadgen";
  int agents = 1000;
  int connections = 64;  // 0: one per agent
  int restarts = 3;
  double hold_s = 0;  // after the restarts: heartbeats only, the master's CPU measured
  int local_world_size = 8;
  int master_pid = 0;  // 0: no /proc readings
  double timeout_s = 120;
  // The agents can be restarted in place (one message each), as ddprun's agents; false: they
  // rejoin after every stop order (stop, join, assignment: three messages).
  bool in_place = true;
  bool silent_node = false;
  double keep_alive_s = 5;        // the run's keep_alive_interval (3 attempts)
  TlsConfig tls;                  // disabled: plaintext
  std::string restart_master;     // set: the master restart phase, with this command
  double outage_s = 3;            // how long no master is up in it
  std::vector<std::string> etcd;  // set: the etcd phase, against these members
  double etcd_lease_ttl_s = 5;
};

class Loadgen;

/// One simulated agent. Its fields are touched only by its own stream's callbacks, which
/// gRPC runs one at a time per stream, and by the main thread before the stream opens.
struct SimulatedAgent {
  NodeInfo node;
  std::unique_ptr<SessionStream> stream;
  std::optional<Assignment> running;  // the round it holds, for a resume
};

class Loadgen {
 public:
  explicit Loadgen(Options options) : options_(std::move(options)) {
    settings_.min_nodes = settings_.max_nodes = options_.agents;
    settings_.max_restarts = options_.restarts;
    settings_.keep_alive_interval = absl::Seconds(options_.keep_alive_s);
  }

  absl::Status Run() {
    // One connection per agent needs a descriptor per agent, here and in the master.
    const long fd_limit = RaiseOpenFileLimit();  // -1: no limit
    const int channels = ChannelCount();
    if (fd_limit >= 0 && channels + 64 > fd_limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          channels, " connections need about ", channels + 64,
          " open files in this process (and as many in the master), but the hard limit "
          "(ulimit -Hn) is ",
          fd_limit, ": use fewer agents or --connections=64"));
    }
    if (!options_.etcd.empty()) {
#ifndef DDPRUN_ETCD
      return absl::FailedPreconditionError(
          "--etcd: this ddprun-loadgen was built without the etcd-v3 backend (DDPRUN_ETCD=OFF)");
#else
      EtcdLoadOptions load;
      load.etcd.endpoints = options_.etcd;
      load.etcd.lease_ttl = absl::Seconds(options_.etcd_lease_ttl_s);
      load.run_id = options_.run_id;
      load.self = options_.endpoint;
      load.agents = options_.agents;
      load.connections = channels;
      DDPRUN_ASSIGN_OR_RETURN(etcd_, EtcdLoad::Elect(load));
      if (etcd_->leader() != options_.endpoint) {
        return absl::InternalError(absl::StrCat("etcd names ", etcd_->leader(),
                                                " as the leader, not ", options_.endpoint));
      }
#endif
    }
    OpenChannels(channels);
    absl::Time start = absl::Now();
    if (absl::Status s = WaitConnected(); !s.ok()) return s;
    connect_ms_ = absl::ToDoubleMilliseconds(absl::Now() - start);

    start = absl::Now();
    OpenStreams();
    open_ms_ = absl::ToDoubleMilliseconds(absl::Now() - start);

    ProcessReading before = ReadProcess(options_.master_pid);
    ExpectRound(0);
    start = absl::Now();
    for (SimulatedAgent& agent : agents_) {
      agent.stream->Send(JoinMessage(agent.node, options_.run_id, "", settings_));
    }
    if (absl::Status s = AwaitRound(); !s.ok()) return s;
    round_ms_ = absl::ToDoubleMilliseconds(round_done_ - start);
    ProcessReading after = ReadProcess(options_.master_pid);
    round_cpu_ms_ = after.cpu_ms - before.cpu_ms;

    std::thread heartbeats([this] { SendHeartbeats(); });
    absl::Status status;
    for (int i = 1; i <= options_.restarts && status.ok(); ++i) {
      before = ReadProcess(options_.master_pid);
      start = absl::Now();
      ExpectRound(i);
      ReportFailureFromAgentZero(i - 1);
      status = AwaitRound();
      StopTimingNews();
      if (!status.ok()) break;
      restart_ms_.push_back(absl::ToDoubleMilliseconds(round_done_ - start));
      after = ReadProcess(options_.master_pid);
      restart_cpu_ms_.push_back(after.cpu_ms - before.cpu_ms);
    }
    if (status.ok() && options_.hold_s > 0) {
      // A steady job: every agent heartbeats, nothing else happens (bench/observability.py
      // scrapes the master meanwhile, or not).
      before = ReadProcess(options_.master_pid);
      absl::SleepFor(absl::Seconds(options_.hold_s));
      after = ReadProcess(options_.master_pid);
      hold_cpu_pct_ = (after.cpu_ms - before.cpu_ms) / (options_.hold_s * 1000) * 100;
    }
    if (status.ok() && options_.silent_node) status = TimeSilentNode();
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    heartbeats.join();
    master_peak_rss_mib_ = ReadProcess(options_.master_pid).peak_rss_mib;
    if (status.ok() && !options_.restart_master.empty()) status = TimeMasterRestart();
    for (SimulatedAgent& agent : agents_) agent.stream->Abandon();
    agents_.clear();            // each stream is cancelled and waited for
    if (new_master_pid_ > 0) {  // the master this process started ends with it
      ::kill(new_master_pid_, SIGTERM);
      ::waitpid(new_master_pid_, nullptr, 0);
    }
    return status;
  }

  std::string Json() const {
    const double n = options_.agents;
    std::vector<std::string> restarts, restart_cpu;
    for (double ms : restart_ms_) restarts.push_back(absl::StrFormat("%.2f", ms));
    for (double ms : restart_cpu_ms_) restart_cpu.push_back(absl::StrFormat("%.2f", ms * 1000 / n));
    return absl::StrCat(
        "{\"agents\": ", options_.agents, ", \"connections\": ", ChannelCount(),
        ", \"tls\": ", options_.tls.enabled() ? "true" : "false", ", \"restart_path\": \"",
        options_.in_place ? "in-place" : "join", "\"",
        ", \"connect_ms\": ", absl::StrFormat("%.2f", connect_ms_),
        ", \"round_ms\": ", absl::StrFormat("%.2f", round_ms_),
        ", \"open_ms\": ", absl::StrFormat("%.2f", open_ms_), ", \"restart_ms\": [",
        absl::StrJoin(restarts, ", "), "]",
        ", \"master_cpu_us_per_agent_round\": ", absl::StrFormat("%.2f", round_cpu_ms_ * 1000 / n),
        ", \"master_cpu_us_per_agent_restart\": [", absl::StrJoin(restart_cpu, ", "), "]",
        ", \"stop_news_ms\": ", Distribution(crash_news_ms_),
        ", \"silent_news_ms\": ", Distribution(silent_news_ms_), ", \"silent_bound_ms\": ",
        absl::StrFormat("%.0f", absl::ToDoubleMilliseconds(settings_.keep_alive_interval *
                                                           settings_.keep_alive_max_attempt)),
        ", \"master_peak_rss_mib\": ", absl::StrFormat("%.1f", master_peak_rss_mib_),
        ", \"etcd\": ", EtcdJson(), ", \"master_restart\": ",
        options_.restart_master.empty()
            ? std::string("null")
            : absl::StrFormat("{\"outage_ms\": %.1f, \"back_ms\": %.1f, \"new_master_rss_mib\": "
                              "%.1f}",
                              outage_ms_, back_ms_, new_master_rss_mib_),
        ", \"master_cpu_pct_held\": ", absl::StrFormat("%.2f", hold_cpu_pct_),
        ", \"loadgen_peak_rss_mib\": ", absl::StrFormat("%.1f", ReadProcess(getpid()).peak_rss_mib),
        "}");
  }

 private:
  static std::string Distribution(const std::vector<double>& ms) {
    if (ms.empty()) return "null";
    return absl::StrFormat("{\"p50\": %.2f, \"p99\": %.2f, \"max\": %.2f, \"n\": %d}",
                           Percentile(ms, 0.5), Percentile(ms, 0.99), Percentile(ms, 1.0),
                           ms.size());
  }

  // Agent 0 goes silent: no heartbeat, no answer, its connection open. Every other agent
  // must be told to stop within the keep-alive bound (the round cannot form again without
  // it: the run waits for nodes, which this does not time).
  absl::Status TimeSilentNode() {
    absl::MutexLock lock(&mu_);
    go_silent_ = true;  // after one more heartbeat, which the silence is timed from
    auto told = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(silent_news_ms_.size()) == options_.agents - 1 || !error_.empty();
    };
    const absl::Duration bound =
        settings_.keep_alive_interval * settings_.keep_alive_max_attempt + absl::Seconds(10);
    if (!mu_.AwaitWithTimeout(absl::Condition(&told), bound)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "agent 0 went silent, and only ", silent_news_ms_.size(), " of ", options_.agents - 1,
          " agents were told to stop within ", absl::FormatDuration(bound)));
    }
    news_ms_ = nullptr;
    if (!error_.empty()) return absl::InternalError(error_);
    return absl::OkStatus();
  }

  // The master is killed; every agent loses it; after the outage a new one starts on the same
  // port and every agent asks for its place back on a new stream. Heartbeats have stopped:
  // the whole phase is within the master's keep-alive window.
  absl::Status TimeMasterRestart() {
    const absl::Time killed = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      restarting_ = true;
    }
    if (::kill(options_.master_pid, SIGKILL) != 0) {
      return absl::InternalError(absl::StrCat("cannot kill the master (pid ", options_.master_pid,
                                              "): ", strerror(errno)));
    }
    {
      absl::MutexLock lock(&mu_);
      auto all_lost = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return lost_ == options_.agents; };
      if (!mu_.AwaitWithTimeout(absl::Condition(&all_lost), absl::Seconds(options_.timeout_s))) {
        return absl::DeadlineExceededError(absl::StrCat("the master was killed, and only ", lost_,
                                                        " of ", options_.agents, " agents saw it"));
      }
    }
    absl::SleepFor(killed + absl::Seconds(options_.outage_s) - absl::Now());
    const absl::Time started = absl::Now();
    outage_ms_ = absl::ToDoubleMilliseconds(started - killed);
    DDPRUN_ASSIGN_OR_RETURN(new_master_pid_, StartNewMaster());
    for (SimulatedAgent& agent : agents_) {  // their old streams have ended: no callback runs
      agent.stream->Abandon();
      agent.stream = OpenStream(agent);
      agent.node.resume = agent.running;
      agent.stream->Send(JoinMessage(agent.node, options_.run_id, "", settings_));
    }
    absl::MutexLock lock(&mu_);
    auto back = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return (resumed_ == options_.agents && store_open_round_ >= expected_round_) ||
             !error_.empty();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&back), absl::Seconds(options_.timeout_s))) {
      return absl::DeadlineExceededError(absl::StrCat("only ", resumed_, " of ", options_.agents,
                                                      " agents had their places back within ",
                                                      options_.timeout_s, " s"));
    }
    if (!error_.empty()) return absl::InternalError(error_);
    back_ms_ = absl::ToDoubleMilliseconds(absl::Now() - started);
    new_master_rss_mib_ = ReadProcess(new_master_pid_).peak_rss_mib;
    return absl::OkStatus();
  }

  // --restart-master's command, with --port of --endpoint, in a session of its own.
  absl::StatusOr<pid_t> StartNewMaster() {
    std::vector<std::string> argv = absl::StrSplit(options_.restart_master, ' ', absl::SkipEmpty());
    argv.push_back(
        absl::StrCat("--port=", options_.endpoint.substr(options_.endpoint.rfind(':') + 1)));
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", strerror(rc)));
    }
    return pid;
  }

  std::unique_ptr<SessionStream> OpenStream(SimulatedAgent& agent) {
    const size_t i = static_cast<size_t>(&agent - agents_.data());
    return std::make_unique<SessionStream>(
        stubs_[i % stubs_.size()].get(), options_.endpoint,
        [this, &agent](RendezvousEvent event) { OnEvent(agent, std::move(event)); });
  }

  // --connections, or one per agent when it is 0.
  int ChannelCount() const {
    return options_.connections == 0 ? options_.agents
                                     : std::min(options_.connections, options_.agents);
  }

  void OpenChannels(int count) {
    NetworkRendezvousOptions agent;
    agent.endpoint = options_.endpoint;
    agent.settings = settings_;
    agent.tls = options_.tls;
    // One set of credentials for every connection: each real agent loads its certificate
    // once, on its own host; here a copy per connection would cost the shared cores that
    // again per connection (OpenSSL 3 parses the PEM texts into a context of its own).
    const std::shared_ptr<grpc::ChannelCredentials> credentials = AgentCredentials(agent);
    for (int i = 0; i < count; ++i) {
      grpc::ChannelArguments args = AgentChannelArguments(agent);
      // A distinct argument and a local subchannel pool: otherwise gRPC shares one
      // connection between channels to the same address.
      args.SetInt("ddprun.loadgen.connection", i);
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      channels_.push_back(grpc::CreateCustomChannel(options_.endpoint, credentials, args));
      stubs_.push_back(v1::Rendezvous::NewStub(channels_.back()));
    }
  }

  absl::Status WaitConnected() {
    for (auto& channel : channels_) channel->GetState(/*try_to_connect=*/true);
    const auto deadline =
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000));
    for (size_t i = 0; i < channels_.size(); ++i) {
      if (!channels_[i]->WaitForConnected(deadline)) {
        int up = 0, connecting = 0;
        for (auto& channel : channels_) {
          const grpc_connectivity_state state = channel->GetState(false);
          up += state == GRPC_CHANNEL_READY;
          connecting += state == GRPC_CHANNEL_CONNECTING;
        }
        // Refused connections fail at once and wait out a back-off; connections still
        // connecting at the deadline are handshakes a busy master (or this process) has not
        // finished.
        return absl::DeadlineExceededError(absl::StrCat(
            "connection ", i, " of ", channels_.size(), " to ", options_.endpoint,
            " was not up within ", options_.timeout_s, " s (", up, " up, ", connecting,
            " connecting): ",
            up + connecting == 0
                ? "is the master running there?"
                : "handshakes did not complete in time on the master or here (gRPC gives "
                  "each attempt 20 s): fewer agents, or --connections=64"));
      }
    }
    return absl::OkStatus();
  }

  void OpenStreams() {
    // Where the simulated agents' stores are: one socket that listens for them all, as each
    // real agent's store listens for its whole life. A master that looks (a restarted one, at
    // group rank 0's place) finds them there; no store is served.
    if (store_.empty()) {
      absl::StatusOr<std::vector<UniqueFd>> store = ListenTcp("127.0.0.1", 0);
      if (store.ok()) store_ = std::move(*store);
    }
    const int store_port = store_.empty() ? 29500 : BoundPort(store_.front().get());
    agents_.resize(options_.agents);
    const int pid = getpid();
    for (int i = 0; i < options_.agents; ++i) {
      SimulatedAgent& agent = agents_[i];
      agent.node.host = absl::StrFormat("sim%05d", i);
      agent.node.addr = "127.0.0.1";
      agent.node.pid = pid;
      agent.node.incarnation = absl::StrCat("loadgen-", pid, "-", i);
      agent.node.local_world_size = options_.local_world_size;
      agent.node.master_port = store_port;
      agent.node.restarts_in_place = options_.in_place;
      agent.stream = OpenStream(agent);
    }
  }

  void OnEvent(SimulatedAgent& agent, RendezvousEvent event) {
    if (&agent == &agents_.front()) {
      absl::MutexLock lock(&mu_);
      if (silent_) return;  // it hears nothing any more
    }
    switch (event.kind) {
      case RendezvousEvent::Kind::kAssigned:
        agent.node.last_round = event.assignment.round;
        agent.node.restarts_seen = event.assignment.restart_count;
        agent.running = event.assignment;
        CountAssignment(event.assignment, /*in_place=*/false);
        return;
      case RendezvousEvent::Kind::kStop:  // as an agent does once its workers are stopped
        RecordNews();
        if (event.next) {
          agent.node.last_round = event.next->round;
          agent.node.restarts_seen = event.next->restart_count;
          agent.running = event.next;
          v1::AgentMessage stopped;
          stopped.mutable_stopped()->set_round(event.next->round - 1);
          agent.stream->Send(std::move(stopped));
          CountAssignment(*event.next, /*in_place=*/true);
        } else {
          agent.stream->Send(JoinMessage(agent.node, options_.run_id, "", settings_));
        }
        return;
      case RendezvousEvent::Kind::kEnd:
        Fail(absl::StrCat(agent.node.host, ": the master ended the run: ", event.detail));
        return;
      case RendezvousEvent::Kind::kLost: {
        absl::MutexLock lock(&mu_);
        if (restarting_) {
          ++lost_;  // the killed master: its place is asked back on a new stream
          return;
        }
        return FailLocked(absl::StrCat(agent.node.host, ": ", event.status.message()));
      }
      case RendezvousEvent::Kind::kRefused:
        Fail(absl::StrCat(agent.node.host, ": ", event.status.message()));
        return;
      case RendezvousEvent::Kind::kResumed: {
        absl::MutexLock lock(&mu_);
        ++resumed_;
        return;
      }
      case RendezvousEvent::Kind::kReach:
        return;
      case RendezvousEvent::Kind::kExcluded:  // the simulated agents never fail
        Fail(absl::StrCat(agent.node.host, ": the master excluded it: ", event.detail));
        return;
      case RendezvousEvent::Kind::kStoreOpen: {
        absl::MutexLock lock(&mu_);
        store_open_round_ = std::max(store_open_round_, event.store_round);
        MaybeRoundDone();
        return;
      }
      case RendezvousEvent::Kind::kHangReport:
      case RendezvousEvent::Kind::kProgress:
        return;
    }
  }

  // Later stop orders are not news of this failure: those of the run's end, when the streams
  // close, came once in the restart's figures.
  void StopTimingNews() {
    absl::MutexLock lock(&mu_);
    news_ms_ = nullptr;
  }

  // A stop order arrived: how long after the failure (or the silence) it was sent for.
  void RecordNews() {
    absl::MutexLock lock(&mu_);
    if (news_ms_ != nullptr)
      news_ms_->push_back(absl::ToDoubleMilliseconds(absl::Now() - news_from_));
  }

  void ExpectRound(int64_t round) {
    absl::MutexLock lock(&mu_);
    expected_round_ = round;
    assigned_ = 0;
    round_complete_ = false;
    round_in_place_ = false;
    rank_seen_.assign(options_.agents, false);
  }

  void CountAssignment(const Assignment& a, bool in_place) {
    absl::MutexLock lock(&mu_);
    round_in_place_ = round_in_place_ || in_place;
    if (a.round != expected_round_) {
      return FailLocked(absl::StrCat("an assignment for round ", a.round, " while round ",
                                     expected_round_, " was expected"));
    }
    if (a.group_rank < 0 || a.group_rank >= options_.agents || rank_seen_[a.group_rank] ||
        a.group_world_size != options_.agents ||
        a.world_size != options_.agents * options_.local_world_size) {
      return FailLocked(absl::StrCat("a bad assignment in round ", a.round, ": group rank ",
                                     a.group_rank, " of ", a.group_world_size, ", world size ",
                                     a.world_size));
    }
    rank_seen_[a.group_rank] = true;
    ++assigned_;
    MaybeRoundDone();
  }

  // Every agent holds its assignment and, after a restart in place, group rank 0 may open
  // its store: the round can make progress.
  void MaybeRoundDone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool store_open = !round_in_place_ || store_open_round_ >= expected_round_;
    if (!round_complete_ && assigned_ == options_.agents && store_open) {
      round_complete_ = true;
      round_done_ = absl::Now();
    }
  }

  void ReportFailureFromAgentZero(int64_t round) {
    ReportedFailure failure;
    failure.host = agents_[0].node.host;
    failure.exit_code = 1;
    failure.pid = getpid();
    failure.time = absl::Now();
    failure.message = "simulated by ddprun-loadgen";
    {
      absl::MutexLock lock(&mu_);
      news_from_ = absl::Now();
      news_ms_ = &crash_news_ms_;
    }
    agents_[0].stream->Send(FailureReportMessage(round, {failure}));
  }

  absl::Status AwaitRound() {
    absl::MutexLock lock(&mu_);
    auto done = [this]()
                    ABSL_SHARED_LOCKS_REQUIRED(mu_) { return round_complete_ || !error_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(options_.timeout_s))) {
      return absl::DeadlineExceededError(
          absl::StrCat("round ", expected_round_, ": only ", assigned_, " of ", options_.agents,
                       " agents were assigned within ", options_.timeout_s, " s"));
    }
    if (!error_.empty()) return absl::InternalError(error_);
    return absl::OkStatus();
  }

  // The first at once: the master has heard nothing from the agents since their joins, which
  // came before a round that takes seconds at 10,000 agents.
  void SendHeartbeats() {
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
    absl::Duration wait = absl::ZeroDuration();
    while (!mu_.AwaitWithTimeout(absl::Condition(&stopping),
                                 std::exchange(wait, settings_.keep_alive_interval))) {
      const bool silent = silent_;
      mu_.Unlock();
      const absl::Time sent = absl::Now();  // agent 0's goes first
      for (size_t i = silent ? 1 : 0; i < agents_.size(); ++i) {
        agents_[i].stream->Send(HeartbeatMessage());
      }
      mu_.Lock();
      if (go_silent_ && !silent_) {
        silent_ = true;
        news_from_ = sent;
        news_ms_ = &silent_news_ms_;
      }
    }
  }

  void Fail(const std::string& why) {
    absl::MutexLock lock(&mu_);
    FailLocked(why);
  }
  void FailLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (error_.empty() && !stopping_) error_ = why;
  }

  const Options options_;
  RendezvousSettings settings_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Rendezvous::Stub>> stubs_;

  absl::Mutex mu_;
  int64_t expected_round_ ABSL_GUARDED_BY(mu_) = 0;
  int assigned_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t store_open_round_ ABSL_GUARDED_BY(mu_) = -1;  // the last kStoreOpen's
  bool round_complete_ ABSL_GUARDED_BY(mu_) = false;
  bool round_in_place_ ABSL_GUARDED_BY(mu_) = false;  // it came with stop orders
  std::vector<bool> rank_seen_ ABSL_GUARDED_BY(mu_);
  absl::Time round_done_ ABSL_GUARDED_BY(mu_);
  std::string error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Agent 0 is to go silent after its next heartbeat; it has.
  bool go_silent_ ABSL_GUARDED_BY(mu_) = false;
  bool silent_ ABSL_GUARDED_BY(mu_) = false;
  // Stop orders are timed from news_from_ into *news_ms_ (null: not timed).
  absl::Time news_from_ ABSL_GUARDED_BY(mu_);
  std::vector<double>* news_ms_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<double> crash_news_ms_ ABSL_GUARDED_BY(mu_);
  // The master restart: the master was killed on purpose; agents that saw it, that are back.
  bool restarting_ ABSL_GUARDED_BY(mu_) = false;
  int lost_ ABSL_GUARDED_BY(mu_) = 0;
  int resumed_ ABSL_GUARDED_BY(mu_) = 0;
  double outage_ms_ = 0, back_ms_ = 0, new_master_rss_mib_ = 0;
  pid_t new_master_pid_ = 0;
  std::vector<double> silent_news_ms_ ABSL_GUARDED_BY(mu_);

  double connect_ms_ = 0, round_ms_ = 0, open_ms_ = 0, round_cpu_ms_ = 0, master_peak_rss_mib_ = 0;
  double hold_cpu_pct_ = 0;  // the master's CPU while held, in percent of one core
  std::vector<double> restart_ms_, restart_cpu_ms_;
#ifdef DDPRUN_ETCD
  std::unique_ptr<EtcdLoad> etcd_;  // with --etcd: the agents' leases and watches
  std::string EtcdJson() const {
    if (etcd_ == nullptr) return "null";
    return absl::StrCat("{\"campaign_ms\": ", absl::StrFormat("%.2f", etcd_->campaign_ms()),
                        ", \"watch_ms\": ", absl::StrFormat("%.2f", etcd_->watch_ms()),
                        ", \"keep_alives\": ", etcd_->keep_alives(), "}");
  }
#else
  static std::string EtcdJson() { return "null"; }
#endif
  std::vector<UniqueFd> store_;  // where the simulated agents' stores listen
  // Last, so destroyed first: a stream's end still reaches OnEvent, which needs mu_.
  std::vector<SimulatedAgent> agents_;
};

}  // namespace
}  // namespace ddprun

int main(int argc, char** argv) {
  ddprun::DisableMutexDeadlockDetection();
  ddprun::Options options;
  CLI::App app{"ddprun-loadgen: simulate N agents against one rendezvous master"};
  app.add_option("--endpoint", options.endpoint, "the master's host:port")->required();
  app.add_option("--agents", options.agents, "how many agents to simulate")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--connections", options.connections,
                 "connections the sessions share; 0: one per agent")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--restarts", options.restarts, "restart rounds to time")
      ->check(CLI::Range(0, 1000));
  app.add_option("--local-world-size", options.local_world_size, "workers per simulated agent")
      ->check(CLI::Range(1, 1024));
  app.add_option("--run-id", options.run_id, "the run id to join");
  app.add_option("--master-pid", options.master_pid, "the master's pid, to read its RSS and CPU");
  app.add_option("--timeout", options.timeout_s, "seconds each phase may take");
  app.add_option("--hold", options.hold_s,
                 "seconds to hold the job after the restarts, heartbeats only, timing the "
                 "master's CPU (master_cpu_pct_held)");
  std::string restart_path = "in-place";
  app.add_option("--restart-path", restart_path,
                 "in-place: the agents take the next round sent with a stop order, as ddprun's "
                 "do; join: they rejoin after every stop order (three messages each)")
      ->check(CLI::IsMember({"in-place", "join"}));
  app.add_flag("--silent-node", options.silent_node,
               "last, agent 0 stops heartbeating: time until every other agent is told to stop");
  app.add_option("--restart-master", options.restart_master,
                 "last, SIGKILL --master-pid and start this command (with --port of --endpoint) "
                 "after --outage seconds: time until every agent has its place back");
  app.add_option("--outage", options.outage_s, "seconds without a master in --restart-master")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--keep-alive", options.keep_alive_s,
                 "the run's keep_alive_interval in seconds (3 attempts)")
      ->check(CLI::Range(0.1, 60.0));
  std::string etcd;
  app.add_option("--etcd", etcd,
                 "etcd's members (HOST:PORT,...): first, every agent elects the run's leader "
                 "there as the etcd-v3 backend does; the leader is --endpoint");
  app.add_option("--etcd-lease-ttl", options.etcd_lease_ttl_s, "the agents' etcd lease TTL, s")
      ->check(CLI::Range(2.0, 3600.0));
  std::string tls_cert, tls_key, tls_ca;
  app.add_option("--tls-cert", tls_cert, "TLS: the agents' certificate (PEM) [default: plaintext]");
  app.add_option("--tls-key", tls_key, "TLS: the private key of --tls-cert (PEM)");
  app.add_option("--tls-ca", tls_ca, "TLS: the CA that signs the master's certificate (PEM)");
  CLI11_PARSE(app, argc, argv);
  options.in_place = restart_path == "in-place";
  if (!etcd.empty()) options.etcd = absl::StrSplit(etcd, ',', absl::SkipEmpty());
  absl::StatusOr<ddprun::TlsConfig> tls =
      ddprun::ReadTlsFiles(tls_cert, tls_key, tls_ca, "--tls-cert/--tls-key/--tls-ca");
  if (!tls.ok()) {
    std::fprintf(stderr, "ddprun-loadgen: %s\n", std::string(tls.status().message()).c_str());
    return 2;
  }
  options.tls = *std::move(tls);
  ddprun::RouteGrpcLogsToSpdlog();
  ddprun::Loadgen loadgen(options);
  if (absl::Status status = loadgen.Run(); !status.ok()) {
    std::fprintf(stderr, "ddprun-loadgen: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf("%s\n", loadgen.Json().c_str());
  return 0;
}
