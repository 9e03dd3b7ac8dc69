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
//   connection:  HELD --BeginRound--> SERVED --EndRound--> RETIRED --BeginRound--> closed
//                (opened while no round runs)                (unanswered until then)
//
// A connection opened while no round runs is held: its bytes are kept, nothing is answered.
// It comes from a worker of the next round whose node got its assignment before this agent
// did (or from a dying worker of the last round). BeginRound is called when this agent gets
// its own assignment, once every worker of the last round has exited: held connections
// whose peer has hung up by then are gone with what they sent, the others are served from
// their first byte. EndRound (a stop order) answers nothing more on the round's connections
// but closes them only at the next BeginRound: the workers on them are being stopped by
// their own agents, and a reset would make them fail first, with the store as the cause.

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "store/kv_store.h"
#include "store/tcp_store_protocol.h"

namespace ddprun {

// What clients can make the agent hold (docs/security.md), past which a connection waits
// or is closed with a sentence saying why.
struct TcpStoreLimits {
  // Replies given to the I/O layer that the client has not read: at this much, the
  // connection's next request waits until they are read (Drained): a client that
  // pipelines reads without reading its replies must not grow the agent.
  size_t max_owed_per_connection = 16 * 1024 * 1024;
  // The same, every connection together: a reply past it closes its connection.
  size_t max_owed_total = 512 * 1024 * 1024;
  // Bytes received and not yet served, every connection together.
  size_t max_input_total = 256 * 1024 * 1024;
  // WAITs and BARRIERs of one connection parked at once (torch's client has one).
  size_t max_waits_per_connection = 64;
  // The values one read returns together (KvStore::Limits).
  int64_t max_reply_bytes = int64_t{32} << 20;
};

/// How far a round's workers have come in `init_process_group`, as their requests show it:
/// each rank's store client ADDs 1 to `init/` as it connects, and torch 1.13 to 2.0 (2.1 and
/// later with TORCH_DIST_INIT_BARRIER=1) then ADD 1 to `.../store_based_barrier_key:N`,
/// which releases every rank once it reaches the world size.
struct StoreMark {
  enum class Kind { kEveryRankConnected, kBarrierPassed };
  Kind kind = Kind::kEveryRankConnected;
  int64_t round = 0;
  // kEveryRankConnected: the last rank spoke the protocol of torch 1.13 to 2.0, whose
  // init_process_group passes the store barrier without being asked to.
  bool legacy_client = false;
};

class TcpStoreService {
 public:
  using ConnectionId = uint64_t;

  using Limits = TcpStoreLimits;
  explicit TcpStoreService(Limits limits = {}) : limits_(limits) { NewStore(); }

  /// Bytes for a connection, in order; `close` after them, with `why` (empty: an orderly
  /// close at the end of a round; else a sentence saying what the client did).
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
  /// The I/O layer has written every byte it was given for the connection: its requests
  /// are served again if they waited for that.
  void Drained(ConnectionId id);

  /// This agent's round `round` has begun: the last round's connections are closed, the
  /// store is empty, and the held connections are served. `world_size`: its ranks, whose
  /// progress TakeMarks reports (0: none is).
  void BeginRound(int64_t round, int world_size = 0);
  /// The round is over: nothing more is answered, and new connections are held.
  void EndRound();

  std::vector<Output> TakeOutput();
  /// What the round's ranks have reached since the last call, each once per round.
  std::vector<StoreMark> TakeMarks() { return std::exchange(marks_, {}); }

  bool serving() const { return serving_; }
  int64_t round() const { return round_; }
  int connections() const { return static_cast<int>(connections_.size()); }
  const KvStore& store() const { return store_; }
  /// Requests of `verb` executed so far. Thread-safe: the metrics server reads them from its
  /// own thread (the counts are atomic; nothing else here is).
  int64_t calls(tcpstore::Verb verb) const {
    return calls_[static_cast<size_t>(verb)].load(std::memory_order_relaxed);
  }

 private:
  enum class Phase { kHeld, kServed, kRetired };
  struct Connection {
    Phase phase = Phase::kHeld;
    tcpstore::Dialect dialect = tcpstore::Dialect::kUnknown;
    std::string input;
    size_t parsed = 0;  // bytes of `input` already handled
    size_t needed = 0;  // nothing to parse before `input` has this many unhandled bytes
    tcpstore::MeasureProgress progress;  // of the request at `parsed`, not whole yet
    bool validated = false;
    std::set<KvStore::WaiterId> waits;  // WAITs and BARRIERs not answered yet
    size_t owed = 0;                    // reply bytes given out since the last Drained
  };
  // One verb's rules; false when it closed the connection.
  using Handler = bool (TcpStoreService::*)(ConnectionId, Connection&, tcpstore::Request&);

  void Serve(ConnectionId id);
  bool Execute(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnValidate(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnPing(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnWrite(ConnectionId id, Connection& c,
               tcpstore::Request& r);  // SET, APPEND, MULTI_SET, QUEUE_PUSH
  bool OnCompareSet(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnGet(ConnectionId id, Connection& c, tcpstore::Request& r);  // GET, MULTI_GET
  bool OnAdd(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnCheck(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnNumKeys(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnDelete(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnListKeys(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnQueuePop(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnQueueLen(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnWait(ConnectionId id, Connection& c, tcpstore::Request& r);  // WAIT, BARRIER
  bool OnCancelWait(ConnectionId id, Connection& c, tcpstore::Request& r);
  bool OnWatchKey(ConnectionId id, Connection& c, tcpstore::Request& r);
  static Handler HandlerOf(tcpstore::Verb verb);

  void Reply(ConnectionId id, std::string bytes);
  // A reply of `size` bytes may be given (kMaxOwedTotal); else the connection is closed.
  bool AdmitReply(ConnectionId id, size_t size);
  // `input` of a connection changed size: keeps input_bytes_ right.
  void InputResized(size_t before, size_t after) { input_bytes_ += after - before; }
  // Closes the connection after a bad request; `why` says what the client did.
  bool Refuse(ConnectionId id, std::string why);
  bool Failed(ConnectionId id, const absl::Status& status);
  void Forget(ConnectionId id);
  KvStore::Done Answer(ConnectionId id, std::shared_ptr<KvStore::WaiterId> slot);
  void RunCompletions();

  // An empty store with this service's reply bound.
  void NewStore();
  // An ADD made `key` `value`: a mark when it is the round's last rank to connect or to
  // reach the store barrier.
  void NoteProgress(const Connection& c, const std::string& key, int64_t value);

  Limits limits_;
  KvStore store_;
  std::map<ConnectionId, Connection> connections_;
  bool serving_ = false;
  int64_t round_ = -1;
  int world_size_ = 0;  // of round_; 0: unknown, no marks
  bool connected_marked_ = false;
  bool barrier_marked_ = false;
  std::vector<StoreMark> marks_;
  std::vector<Output> output_;
  size_t owed_bytes_ = 0;   // every connection's `owed`
  size_t input_bytes_ = 0;  // every connection's `input`
  std::array<std::atomic<int64_t>, static_cast<size_t>(tcpstore::Verb::kBarrier) + 1> calls_{};
};

}  // namespace ddprun
