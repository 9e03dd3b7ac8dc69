#pragma once
// TcpStoreService: the rules of the TCPStore an agent serves its workers (torch's
// TORCHELASTIC_USE_AGENT_STORE=True): each connection's requests in order against one
// KvStore, and rounds that give each attempt a store of its own. Pure: the I/O layer
// (TcpStoreServer) opens connections, feeds their bytes, and writes and closes what comes out.
//
// Rounds. torch 2.x workers put no attempt prefix in their keys, so a store kept across
// restarts hands the next attempt the keys of the last one (a dead peer's address: PyTorch
// issue #135712). Here a round's store starts empty, and a connection belongs to one round:
//
//   HOLDING --BeginRound--> SERVING --EndRound (every connection closed)--> HOLDING
//
// While holding, connections are accepted and their bytes kept, but nothing is served: they
// come from workers of the next round whose node got its assignment before this one did
// (or from dying workers of the last round). BeginRound is called when this agent gets its
// own assignment, once every worker of the last round has exited: connections whose peer
// has hung up by then are gone, and the others are served from their first byte.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "rendezvous/kv_store.h"
#include "rendezvous/tcp_store_protocol.h"

namespace ddprun {

class TcpStoreService {
 public:
  using ConnectionId = uint64_t;

  /// Bytes for a connection, in order; `close` after them, with `why` (empty: an orderly
  /// close at the end of a round).
  struct Output {
    ConnectionId connection = 0;
    std::string bytes;
    bool close = false;
    std::string why;
  };

  void Open(ConnectionId id);
  void Receive(ConnectionId id, absl::string_view bytes);
  /// The connection is gone (its peer hung up, or the I/O layer gave up on it).
  void Closed(ConnectionId id);

  /// This agent's round `round` has begun: an empty store, and the held connections served.
  void BeginRound(int64_t round);
  /// The round is over: every connection is closed and new ones are held.
  void EndRound();

  std::vector<Output> TakeOutput();

  bool serving() const { return serving_; }
  int64_t round() const { return round_; }
  int connections() const { return static_cast<int>(connections_.size()); }
  const KvStore& store() const { return store_; }

 private:
  struct Connection {
    tcpstore::Dialect dialect = tcpstore::Dialect::kUnknown;
    std::string input;
    size_t parsed = 0;  // bytes of `input` already handled
    size_t needed = 0;  // nothing to parse before `input` has this many unhandled bytes
    bool validated = false;
    std::set<KvStore::WaiterId> waits;  // WAITs and BARRIERs not answered yet
  };

  void Serve(ConnectionId id);
  // False when the connection was closed.
  bool Execute(ConnectionId id, Connection& connection, tcpstore::Request& request);
  void Reply(ConnectionId id, std::string bytes);
  void Refuse(ConnectionId id, std::string why);
  void Forget(ConnectionId id);
  // Parks a WAIT or BARRIER of `id`; it is answered with STOP_WAITING when released.
  void Park(ConnectionId id, KvStore::WaiterId waiter, const std::shared_ptr<KvStore::WaiterId>& slot);
  KvStore::Done Answer(ConnectionId id, std::shared_ptr<KvStore::WaiterId> slot);
  void RunCompletions();

  KvStore store_;
  std::map<ConnectionId, Connection> connections_;
  bool serving_ = false;
  int64_t round_ = -1;
  std::vector<Output> output_;
};

}  // namespace ddprun
