#pragma once
// TcpStoreServer: the TCPStore a multi-node agent serves its workers, as torchrun's agent
// does (TORCHELASTIC_USE_AGENT_STORE=True: `init_process_group("env://")` connects to
// MASTER_ADDR:MASTER_PORT as a client, and no worker binds a port). The rules are
// TcpStoreService's; this is the I/O around them, on a thread of its own: one listening
// socket on every address (dual-stack), and the connections, all non-blocking on one epoll.
//
// One port for the whole job: when the agent also hosts the rendezvous master, the master
// has no listening socket of its own. Connections that open as gRPC (an HTTP/2 preface,
// "PRI * HTTP/2.0", or a TLS handshake, byte 0x16) go to `grpc_handoff`, which gives them
// to the master; every other one is a TCPStore client (its first byte is a query code,
// 0 to 18, or nothing yet: torch 1.13's second connection never sends a byte).
//
// Who may use it: torch's wire protocol has no authentication, so the store serves only
// connections from the round's nodes (their addresses come with group rank 0's assignment),
// this host and loopback. Connections handed to gRPC are the master's to check (its token).
//
// Its own thread, not the agent's event loop: a store that shares the master's port must
// go on handing connections to the master while the agent has ended its run and serves
// the master for nodes that still run.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/tcp_store_service.h"

namespace ddprun {

struct TcpStoreServerOptions {
  int port = 0;  // 0: the kernel picks one
  /// Takes a connection that opened as gRPC (and `fd` with it); unset: such connections are
  /// closed. `listen_fd` is the socket it was accepted on.
  std::function<void(int listen_fd, int fd)> grpc_handoff;
  /// Told, on the server's thread, when a connection is closed for a request it cannot
  /// serve: the peer's address and why.
  std::function<void(const std::string& peer, const std::string& why)> on_refused;
};

class TcpStoreServer {
 public:
  /// Listens on every address at `options.port`. The error says when the port is in use.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(TcpStoreServerOptions options);
  /// Stops the thread; every connection and the listening socket are closed.
  ~TcpStoreServer();

  int port() const;
  /// This host's address at which the first connection from another host arrived (a
  /// worker, or an agent joining the master behind this port): an address other nodes
  /// reach. Empty until one did. Thread-safe.
  std::string ArrivalAddress() const;
  /// This agent's round `round` has begun (TcpStoreService::BeginRound). Thread-safe; returns
  /// once the server's thread has applied it. From now on, and until the next BeginRound,
  /// it serves only connections from loopback, this host's own addresses and `clients`
  /// (group rank 0's assignment lists the round's nodes' addresses); others are closed, and
  /// connections held since the last round from elsewhere are closed now.
  /// `world_size`: the round's ranks, whose progress TakeMarks reports (0: not followed).
  void BeginRound(int64_t round, std::vector<std::string> clients = {}, int world_size = 0);
  /// Requests served so far, by operation (torch's names, lower case: set, get, wait, ...);
  /// those never asked for are left out. Thread-safe.
  std::map<std::string, int64_t> OperationCounts() const;
  /// What the round's ranks have reached (StoreMark), each with the monotonic time the
  /// server's thread saw it. Thread-safe.
  struct TimedMark {
    StoreMark mark;
    absl::Time at;
  };
  std::vector<TimedMark> TakeMarks();
  /// Readable (an eventfd) while TakeMarks has something to give.
  int marks_fd() const;
  /// Its round is over: nothing more is answered, new connections wait for the next round,
  /// and the round's connections are closed when it begins. Returns once applied.
  void EndRound();

  class Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddprun
