#include "store/tcp_store_service.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ddprun {

using tcpstore::Dialect;
using tcpstore::EncodeI64;
using tcpstore::EncodeString;
using tcpstore::EncodeU8;
using tcpstore::Parsed;
using tcpstore::Request;
using tcpstore::Verb;

void TcpStoreService::NewStore() {
  store_ = KvStore();
  KvStore::Limits limits;
  limits.max_reply_bytes = limits_.max_reply_bytes;
  store_.set_limits(limits);
}

void TcpStoreService::Open(ConnectionId id) {
  connections_[id].phase = serving_ ? Phase::kServed : Phase::kHeld;
}

void TcpStoreService::Receive(ConnectionId id, absl::string_view bytes) {
  auto it = connections_.find(id);
  if (it == connections_.end() || it->second.phase == Phase::kRetired) return;
  Connection& connection = it->second;
  const size_t before = connection.input.size();
  connection.input.append(bytes.data(), bytes.size());
  InputResized(before, connection.input.size());
  if (input_bytes_ > limits_.max_input_total) {
    Refuse(id, absl::StrCat("its requests would make the store's unread input, every "
                            "connection together, pass ",
                            limits_.max_input_total >> 20, " MiB"));
    return;
  }
  if (connection.input.size() - connection.parsed > tcpstore::kMaxRequestBytes) {
    Refuse(id, absl::StrCat("it sent more than ", tcpstore::kMaxRequestBytes >> 20,
                            " MiB of requests that could not be served yet (",
                            connection.phase == Phase::kHeld ? "its round had not begun"
                                                             : "it does not read its replies",
                            ")"));
    return;
  }
  if (connection.phase == Phase::kServed) Serve(id);
}

void TcpStoreService::Closed(ConnectionId id) { Forget(id); }

void TcpStoreService::Drained(ConnectionId id) {
  auto it = connections_.find(id);
  if (it == connections_.end() || it->second.owed == 0) return;
  const bool waited = it->second.owed >= limits_.max_owed_per_connection;
  owed_bytes_ -= it->second.owed;
  it->second.owed = 0;
  if (waited && it->second.phase == Phase::kServed) Serve(id);
}

void TcpStoreService::BeginRound(int64_t round, int world_size) {
  if (serving_) EndRound();  // never two rounds in one store
  std::vector<ConnectionId> held;
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->second.phase == Phase::kRetired) {
      Output out;
      out.connection = it->first;
      out.close = true;
      output_.push_back(std::move(out));
      it = connections_.erase(it);
      continue;
    }
    it->second.phase = Phase::kServed;
    held.push_back(it->first);
    ++it;
  }
  NewStore();
  serving_ = true;
  round_ = round;
  world_size_ = world_size;
  connected_marked_ = false;
  barrier_marked_ = false;
  for (ConnectionId id : held) Serve(id);
}

void TcpStoreService::EndRound() {
  for (auto& [id, connection] : connections_) {
    connection.phase = Phase::kRetired;
    InputResized(connection.input.size(), 0);
    connection.input.clear();
    connection.parsed = 0;
    connection.progress = {};
    connection.waits.clear();
  }
  NewStore();  // its waiters belonged to the retired connections
  serving_ = false;
}

std::vector<TcpStoreService::Output> TcpStoreService::TakeOutput() {
  std::vector<Output> out;
  out.swap(output_);
  return out;
}

void TcpStoreService::Serve(ConnectionId id) {
  while (true) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& c = it->second;
    if (c.owed >= limits_.max_owed_per_connection) break;  // until its client reads (Drained)
    const absl::string_view unhandled = absl::string_view(c.input).substr(c.parsed);
    if (unhandled.empty() || unhandled.size() < c.needed) break;
    if (c.dialect == Dialect::kUnknown) {
      c.dialect = tcpstore::DetectDialect(unhandled);
      if (c.dialect == Dialect::kUnknown) {
        c.needed = 5;  // a 0 byte: VALIDATE or a torch 1.13 SET
        break;
      }
    }
    Parsed parsed = tcpstore::ParseRequest(unhandled, c.dialect, &c.progress);
    if (parsed.kind == Parsed::Kind::kNeedMore) {
      c.needed = parsed.needed;
      break;
    }
    if (parsed.kind == Parsed::Kind::kRefused) {
      Refuse(id, absl::StrCat("it sent ", parsed.why));
      return;
    }
    c.parsed += parsed.consumed;
    c.needed = 0;
    Execute(id, c, parsed.request);  // `c` may be gone after this
    RunCompletions();                // answers in request order: a WAIT released at once
  }
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& c = it->second;
  const size_t before = c.input.size();
  if (c.parsed == c.input.size()) {
    c.input.clear();
    c.parsed = 0;
  } else if (c.parsed > 1024 * 1024) {
    c.input.erase(0, c.parsed);  // keep a slow, large request from growing the buffer
    c.parsed = 0;
  }
  InputResized(before, c.input.size());
}

bool TcpStoreService::Execute(ConnectionId id, Connection& c, Request& r) {
  calls_[static_cast<size_t>(r.verb)].fetch_add(1, std::memory_order_relaxed);
  return (this->*HandlerOf(r.verb))(id, c, r);
}

TcpStoreService::Handler TcpStoreService::HandlerOf(Verb verb) {
  switch (verb) {
    case Verb::kValidate:
      return &TcpStoreService::OnValidate;
    case Verb::kPing:
      return &TcpStoreService::OnPing;
    case Verb::kSet:
    case Verb::kAppend:
    case Verb::kMultiSet:
    case Verb::kQueuePush:
      return &TcpStoreService::OnWrite;
    case Verb::kCompareSet:
      return &TcpStoreService::OnCompareSet;
    case Verb::kGet:
    case Verb::kMultiGet:
      return &TcpStoreService::OnGet;
    case Verb::kAdd:
      return &TcpStoreService::OnAdd;
    case Verb::kCheck:
      return &TcpStoreService::OnCheck;
    case Verb::kNumKeys:
      return &TcpStoreService::OnNumKeys;
    case Verb::kDelete:
      return &TcpStoreService::OnDelete;
    case Verb::kListKeys:
      return &TcpStoreService::OnListKeys;
    case Verb::kQueuePop:
      return &TcpStoreService::OnQueuePop;
    case Verb::kQueueLen:
      return &TcpStoreService::OnQueueLen;
    case Verb::kWait:
    case Verb::kBarrier:
      return &TcpStoreService::OnWait;
    case Verb::kCancelWait:
      return &TcpStoreService::OnCancelWait;
    case Verb::kWatchKey:
      return &TcpStoreService::OnWatchKey;
  }
  return &TcpStoreService::OnWatchKey;  // not reached: every verb is above
}

bool TcpStoreService::OnValidate(ConnectionId id, Connection& c, Request& r) {
  if (c.validated || c.dialect != Dialect::kValidated || r.number != tcpstore::kValidationMagic) {
    return Refuse(id, "it sent VALIDATE after its first request");
  }
  c.validated = true;
  return true;
}

bool TcpStoreService::OnPing(ConnectionId id, Connection&, Request& r) {
  Reply(id, tcpstore::EncodeU32(static_cast<uint32_t>(r.number)));
  return true;
}

bool TcpStoreService::OnWrite(ConnectionId id, Connection&, Request& r) {
  absl::Status s;
  if (r.verb == Verb::kMultiSet) {
    if (r.keys.empty()) return true;  // nothing to store, as PyTorch's servers
    s = store_.MultiSet(r.keys, std::move(r.values));
  } else if (r.verb == Verb::kSet) {
    s = store_.Set(r.keys[0], std::move(r.values[0]));
  } else if (r.verb == Verb::kAppend) {
    s = store_.Append(r.keys[0], r.values[0]);
  } else {
    s = store_.QueuePush(r.keys[0], std::move(r.values[0]));
  }
  return s.ok() || Failed(id, s);
}

bool TcpStoreService::OnCompareSet(ConnectionId id, Connection&, Request& r) {
  absl::StatusOr<std::string> value =
      store_.CompareSet(r.keys[0], r.values[0], std::move(r.values[1]));
  if (!value.ok()) return Failed(id, value.status());
  if (!AdmitReply(id, 8 + value->size())) return false;  // a stored 8 MiB, for a few bytes
  Reply(id, EncodeString(*value));
  return true;
}

bool TcpStoreService::OnGet(ConnectionId id, Connection&, Request& r) {
  // Sized before it is built: a MULTI_GET naming one 8 MiB key 131,072 times asks for 1 TiB.
  absl::StatusOr<int64_t> values = store_.ReplyBytes(r.keys);
  if (!values.ok()) return Failed(id, values.status());
  const size_t size = static_cast<size_t>(*values) + 8 * r.keys.size();  // and each length
  if (!AdmitReply(id, size)) return false;
  // A client always WAITs before it GETs; a missing key reads as empty, as in libuv.
  std::string reply;
  reply.reserve(size);
  for (const std::string& key : r.keys) reply += EncodeString(store_.Find(key).value_or(""));
  Reply(id, std::move(reply));
  return true;
}

bool TcpStoreService::OnAdd(ConnectionId id, Connection& c, Request& r) {
  absl::StatusOr<int64_t> value = store_.Add(r.keys[0], r.number);
  if (!value.ok()) return Failed(id, value.status());
  Reply(id, EncodeI64(*value));
  if (r.number > 0) NoteProgress(c, r.keys[0], *value);
  return true;
}

void TcpStoreService::NoteProgress(const Connection& c, const std::string& key, int64_t value) {
  if (world_size_ <= 0 || value != world_size_) return;
  StoreMark mark;
  mark.round = round_;
  if (key == "init/" && !connected_marked_) {  // sent raw, without the client's "/" (§3)
    connected_marked_ = true;
    mark.legacy_client = c.dialect == tcpstore::Dialect::kLegacy;
    marks_.push_back(mark);
  } else if (absl::StrContains(key, "store_based_barrier_key:") && !barrier_marked_) {
    barrier_marked_ = true;
    mark.kind = StoreMark::Kind::kBarrierPassed;
    marks_.push_back(mark);
  }
}

bool TcpStoreService::OnCheck(ConnectionId id, Connection&, Request& r) {
  absl::StatusOr<bool> all = r.keys.empty() ? true : store_.Check(r.keys);  // none: all there
  if (!all.ok()) return Failed(id, all.status());
  Reply(id, EncodeU8(*all ? tcpstore::kReady : tcpstore::kNotReady));
  return true;
}

bool TcpStoreService::OnNumKeys(ConnectionId id, Connection&, Request&) {
  Reply(id, EncodeI64(store_.NumKeys()));
  return true;
}

bool TcpStoreService::OnDelete(ConnectionId id, Connection&, Request& r) {
  absl::StatusOr<bool> deleted = store_.Delete(r.keys[0]);
  if (!deleted.ok()) return Failed(id, deleted.status());
  Reply(id, EncodeI64(*deleted ? 1 : 0));
  return true;
}

bool TcpStoreService::OnListKeys(ConnectionId id, Connection&, Request&) {
  // Measured before the names are copied: a store of 256 MiB of key names is a reply of
  // that much, as a read of many values is (max_reply_bytes holds for both).
  const int64_t names = store_.KeyBytes();
  if (names > limits_.max_reply_bytes) {
    return Refuse(id, absl::StrCat("it sent LIST_KEYS, whose reply would hold ", names,
                                   " bytes of key names, more than the ",
                                   limits_.max_reply_bytes >> 20, " MiB one reply holds"));
  }
  const size_t size = 8 + static_cast<size_t>(names) + 8 * static_cast<size_t>(store_.NumKeys());
  if (!AdmitReply(id, size)) return false;
  const std::vector<std::string> keys = store_.Keys();
  std::string reply = EncodeI64(static_cast<int64_t>(keys.size()));
  for (const std::string& key : keys) reply += EncodeString(key);
  Reply(id, std::move(reply));
  return true;
}

bool TcpStoreService::OnQueuePop(ConnectionId id, Connection&, Request& r) {
  absl::StatusOr<KvStore::Popped> popped = store_.QueuePop(r.keys[0]);
  if (!popped.ok()) return Failed(id, popped.status());
  if (popped->value && !AdmitReply(id, 16 + popped->value->size())) return false;
  std::string reply = EncodeI64(popped->length_before);
  if (popped->value) reply += EncodeString(*popped->value);
  Reply(id, std::move(reply));
  return true;
}

bool TcpStoreService::OnQueueLen(ConnectionId id, Connection&, Request& r) {
  absl::StatusOr<int64_t> length = store_.QueueLength(r.keys[0]);
  if (!length.ok()) return Failed(id, length.status());
  Reply(id, EncodeI64(*length));
  return true;
}

bool TcpStoreService::OnWait(ConnectionId id, Connection& c, Request& r) {
  if (r.keys.empty()) {  // nothing to wait for, as PyTorch's servers
    Reply(id, EncodeU8(tcpstore::kStopWaiting));
    return true;
  }
  if (c.waits.size() >= limits_.max_waits_per_connection) {
    return Refuse(id, absl::StrCat("it has ", c.waits.size(),
                                   " WAITs or BARRIERs parked at once, the most one connection "
                                   "may have"));
  }
  auto slot = std::make_shared<KvStore::WaiterId>(0);
  const KvStore::WaiterId waiter =
      r.verb == Verb::kBarrier
          ? store_.Barrier(r.keys[0], r.number, Answer(id, slot))
          : store_.WaitFor(std::move(r.keys), absl::InfiniteFuture(), Answer(id, slot),
                           /*want_values=*/false);
  if (waiter != 0) {  // 0: answered (or refused) at once
    *slot = waiter;
    c.waits.insert(waiter);
  }
  return true;
}

bool TcpStoreService::OnCancelWait(ConnectionId id, Connection& c, Request&) {
  // Always answered, also when nothing waits (the client may race a release).
  for (KvStore::WaiterId waiter : c.waits) store_.Cancel(waiter);
  c.waits.clear();
  Reply(id, EncodeU8(tcpstore::kWaitCanceled));
  return true;
}

bool TcpStoreService::OnWatchKey(ConnectionId id, Connection&, Request&) {
  return Refuse(id,
                "it sent WATCH_KEY (key callbacks, in torch 1.13's C++ API only), which "
                "this store does not serve");
}

KvStore::Done TcpStoreService::Answer(ConnectionId id, std::shared_ptr<KvStore::WaiterId> slot) {
  return [this, id, slot](absl::StatusOr<std::vector<std::string>> result) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    it->second.waits.erase(*slot);
    if (!result.ok()) {
      Failed(id, result.status());
      return;
    }
    Reply(id, EncodeU8(tcpstore::kStopWaiting));
  };
}

void TcpStoreService::RunCompletions() {
  for (auto& completion : store_.TakeCompletions()) completion();
}

bool TcpStoreService::AdmitReply(ConnectionId id, size_t size) {
  if (owed_bytes_ + size <= limits_.max_owed_total) return true;
  return Refuse(id,
                absl::StrCat("it asked for a reply of ", size,
                             " bytes while the store's clients have not read ", owed_bytes_ >> 20,
                             " MiB of replies (at most ", limits_.max_owed_total >> 20, " MiB)"));
}

void TcpStoreService::Reply(ConnectionId id, std::string bytes) {
  if (auto it = connections_.find(id); it != connections_.end()) {
    it->second.owed += bytes.size();
    owed_bytes_ += bytes.size();
  }
  if (!output_.empty() && output_.back().connection == id && !output_.back().close) {
    output_.back().bytes += bytes;  // one write for replies that come together
    return;
  }
  Output out;
  out.connection = id;
  out.bytes = std::move(bytes);
  output_.push_back(std::move(out));
}

bool TcpStoreService::Refuse(ConnectionId id, std::string why) {
  Output out;
  out.connection = id;
  out.close = true;
  out.why = std::move(why);
  output_.push_back(std::move(out));
  Forget(id);
  return false;
}

bool TcpStoreService::Failed(ConnectionId id, const absl::Status& status) {
  return Refuse(id, absl::StrCat("its request failed: ", status.message()));
}

void TcpStoreService::Forget(ConnectionId id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  for (KvStore::WaiterId waiter : it->second.waits) store_.Cancel(waiter);
  owed_bytes_ -= it->second.owed;
  InputResized(it->second.input.size(), 0);
  connections_.erase(it);
}

}  // namespace ddprun
