#include "rendezvous/tcp_store_service.h"

#include <memory>

#include "absl/strings/str_cat.h"

namespace ddprun {

using tcpstore::Dialect;
using tcpstore::Parsed;
using tcpstore::Request;
using tcpstore::Verb;

void TcpStoreService::Open(ConnectionId id) { connections_[id]; }

void TcpStoreService::Receive(ConnectionId id, absl::string_view bytes) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& connection = it->second;
  connection.input.append(bytes.data(), bytes.size());
  if (serving_) return Serve(id);
  if (connection.input.size() > tcpstore::kMaxRequestBytes) {
    Refuse(id, absl::StrCat("it sent more than ", tcpstore::kMaxRequestBytes,
                            " bytes before its round began"));
  }
}

void TcpStoreService::Closed(ConnectionId id) { Forget(id); }

void TcpStoreService::BeginRound(int64_t round) {
  if (serving_) EndRound();  // never two rounds in one store
  store_ = KvStore();
  serving_ = true;
  round_ = round;
  std::vector<ConnectionId> held;
  for (const auto& [id, connection] : connections_) held.push_back(id);
  for (ConnectionId id : held) Serve(id);
}

void TcpStoreService::EndRound() {
  for (const auto& [id, connection] : connections_) {
    Output out;
    out.connection = id;
    out.close = true;
    output_.push_back(std::move(out));
  }
  connections_.clear();
  store_ = KvStore();  // its waiters belonged to the connections just closed
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
    const absl::string_view unhandled = absl::string_view(c.input).substr(c.parsed);
    if (unhandled.empty() || unhandled.size() < c.needed) break;
    if (c.dialect == Dialect::kUnknown) {
      c.dialect = tcpstore::DetectDialect(unhandled);
      if (c.dialect == Dialect::kUnknown) {
        c.needed = 5;  // a 0 byte: VALIDATE or a torch 1.13 SET
        break;
      }
    }
    Parsed parsed = tcpstore::ParseRequest(unhandled, c.dialect);
    if (parsed.kind == Parsed::Kind::kNeedMore) {
      c.needed = parsed.needed;
      break;
    }
    if (parsed.kind == Parsed::Kind::kRefused) return Refuse(id, std::move(parsed.why));
    c.parsed += parsed.consumed;
    c.needed = 0;
    Execute(id, c, parsed.request);  // `c` may be gone after this
    RunCompletions();                // answers in request order: a WAIT released at once
  }
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& c = it->second;
  if (c.parsed == c.input.size()) {
    c.input.clear();
    c.parsed = 0;
  } else if (c.parsed > 1024 * 1024) {
    c.input.erase(0, c.parsed);  // keep a slow, large request from growing the buffer
    c.parsed = 0;
  }
}

bool TcpStoreService::Execute(ConnectionId id, Connection& c, Request& r) {
  using tcpstore::EncodeI64;
  using tcpstore::EncodeString;
  using tcpstore::EncodeU8;
  const auto fail = [&](const absl::Status& s) {
    Refuse(id, absl::StrCat(s.message()));
    return false;
  };
  switch (r.verb) {
    case Verb::kValidate:
      if (c.validated || c.dialect != Dialect::kValidated || r.number != tcpstore::kValidationMagic) {
        Refuse(id, "VALIDATE after the first request");
        return false;
      }
      c.validated = true;
      return true;
    case Verb::kPing:
      Reply(id, tcpstore::EncodeU32(static_cast<uint32_t>(r.number)));
      return true;
    case Verb::kSet:
      if (absl::Status s = store_.Set(r.keys[0], std::move(r.values[0])); !s.ok()) return fail(s);
      return true;
    case Verb::kAppend:
      if (absl::Status s = store_.Append(r.keys[0], r.values[0]); !s.ok()) return fail(s);
      return true;
    case Verb::kMultiSet:
      if (absl::Status s = store_.MultiSet(r.keys, std::move(r.values)); !s.ok()) return fail(s);
      return true;
    case Verb::kQueuePush:
      if (absl::Status s = store_.QueuePush(r.keys[0], std::move(r.values[0])); !s.ok()) return fail(s);
      return true;
    case Verb::kCompareSet: {
      absl::StatusOr<std::string> value = store_.CompareSet(r.keys[0], r.values[0], std::move(r.values[1]));
      if (!value.ok()) return fail(value.status());
      Reply(id, EncodeString(*value));
      return true;
    }
    case Verb::kGet:
      // A client always WAITs before it GETs; a missing key reads as empty, as in libuv.
      Reply(id, EncodeString(store_.Find(r.keys[0]).value_or("")));
      return true;
    case Verb::kMultiGet: {
      std::string reply;
      for (const std::string& key : r.keys) reply += EncodeString(store_.Find(key).value_or(""));
      Reply(id, std::move(reply));
      return true;
    }
    case Verb::kAdd: {
      absl::StatusOr<int64_t> value = store_.Add(r.keys[0], r.number);
      if (!value.ok()) return fail(value.status());
      Reply(id, EncodeI64(*value));
      return true;
    }
    case Verb::kCheck: {
      absl::StatusOr<bool> all = store_.Check(r.keys);
      if (!all.ok()) return fail(all.status());
      Reply(id, EncodeU8(*all ? tcpstore::kReady : tcpstore::kNotReady));
      return true;
    }
    case Verb::kNumKeys:
      Reply(id, EncodeI64(store_.NumKeys()));
      return true;
    case Verb::kDelete: {
      absl::StatusOr<bool> deleted = store_.Delete(r.keys[0]);
      if (!deleted.ok()) return fail(deleted.status());
      Reply(id, EncodeI64(*deleted ? 1 : 0));
      return true;
    }
    case Verb::kListKeys: {
      const std::vector<std::string> keys = store_.Keys();
      std::string reply = EncodeI64(static_cast<int64_t>(keys.size()));
      for (const std::string& key : keys) reply += EncodeString(key);
      Reply(id, std::move(reply));
      return true;
    }
    case Verb::kQueuePop: {
      absl::StatusOr<KvStore::Popped> popped = store_.QueuePop(r.keys[0]);
      if (!popped.ok()) return fail(popped.status());
      std::string reply = EncodeI64(popped->length_before);
      if (popped->value) reply += EncodeString(*popped->value);
      Reply(id, std::move(reply));
      return true;
    }
    case Verb::kQueueLen: {
      absl::StatusOr<int64_t> length = store_.QueueLength(r.keys[0]);
      if (!length.ok()) return fail(length.status());
      Reply(id, EncodeI64(*length));
      return true;
    }
    case Verb::kWait: {
      auto slot = std::make_shared<KvStore::WaiterId>(0);
      Park(id, store_.WaitFor(std::move(r.keys), absl::InfiniteFuture(), Answer(id, slot),
                              /*want_values=*/false),
           slot);
      return true;
    }
    case Verb::kBarrier: {
      auto slot = std::make_shared<KvStore::WaiterId>(0);
      Park(id, store_.Barrier(r.keys[0], r.number, Answer(id, slot)), slot);
      return true;
    }
    case Verb::kCancelWait:
      // Always answered, also when nothing waits (the client may race a release).
      for (KvStore::WaiterId waiter : c.waits) store_.Cancel(waiter);
      c.waits.clear();
      Reply(id, EncodeU8(tcpstore::kWaitCanceled));
      return true;
    case Verb::kWatchKey:
      Refuse(id, "WATCH_KEY (key callbacks, in torch 1.13's C++ API only), which this store does "
                 "not serve");
      return false;
  }
  return true;
}

void TcpStoreService::Park(ConnectionId id, KvStore::WaiterId waiter,
                           const std::shared_ptr<KvStore::WaiterId>& slot) {
  if (waiter == 0) return;  // answered (or refused) at once
  *slot = waiter;
  connections_.at(id).waits.insert(waiter);
}

KvStore::Done TcpStoreService::Answer(ConnectionId id, std::shared_ptr<KvStore::WaiterId> slot) {
  return [this, id, slot](absl::StatusOr<std::vector<std::string>> result) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    it->second.waits.erase(*slot);
    if (!result.ok()) return Refuse(id, std::string(result.status().message()));
    Reply(id, tcpstore::EncodeU8(tcpstore::kStopWaiting));
  };
}

void TcpStoreService::RunCompletions() {
  for (auto& completion : store_.TakeCompletions()) completion();
}

void TcpStoreService::Reply(ConnectionId id, std::string bytes) {
  if (!output_.empty() && output_.back().connection == id && !output_.back().close) {
    output_.back().bytes += bytes;  // one write for replies that come together
    return;
  }
  Output out;
  out.connection = id;
  out.bytes = std::move(bytes);
  output_.push_back(std::move(out));
}

void TcpStoreService::Refuse(ConnectionId id, std::string why) {
  Output out;
  out.connection = id;
  out.close = true;
  out.why = std::move(why);
  output_.push_back(std::move(out));
  Forget(id);
}

void TcpStoreService::Forget(ConnectionId id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  for (KvStore::WaiterId waiter : it->second.waits) store_.Cancel(waiter);
  connections_.erase(it);
}

}  // namespace ddprun
