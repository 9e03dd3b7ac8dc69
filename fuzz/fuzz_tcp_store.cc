// The workers' TCPStore (TcpStoreService) fed what clients might send: well-formed requests
// of both dialects, raw bytes, split anywhere, on several connections, with rounds beginning
// and ending, with small limits so that they are reached. Nothing may crash; output goes only
// to open connections, and nothing but a close while no round is served; replies not yet
// read (Drained) stay within their budgets, per connection and together; when every
// connection has gone, no waiter is left behind.

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "fuzz/fuzz_input.h"
#include "store/tcp_store_service.h"
#include "store/tests/tcp_store_requests.h"

namespace {

using ddprun::tcpstore::Dialect;
using ddprun::tcpstore::Verb;
using ddprun::tcpstore::testing::RequestBytes;

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

std::string Key(ddprun::fuzz::FuzzInput& in) {
  return std::string("/") + static_cast<char>('a' + in.Below(4));
}

std::string Request(ddprun::fuzz::FuzzInput& in, Dialect d) {
  const Verb verbs[] = {Verb::kSet,      Verb::kCompareSet, Verb::kGet,      Verb::kAdd,
                        Verb::kCheck,    Verb::kWait,       Verb::kNumKeys,  Verb::kDelete,
                        Verb::kAppend,   Verb::kMultiGet,   Verb::kMultiSet, Verb::kCancelWait,
                        Verb::kPing,     Verb::kQueuePush,  Verb::kQueuePop, Verb::kQueueLen,
                        Verb::kListKeys, Verb::kBarrier,    Verb::kValidate};
  const Verb verb = verbs[in.Below(sizeof verbs / sizeof verbs[0])];
  if (ddprun::tcpstore::QueryCode(verb, d) < 0) return in.String(4);
  RequestBytes r(verb, d);
  switch (verb) {
    case Verb::kSet:
    case Verb::kAppend:
    case Verb::kQueuePush:
      r.Str(Key(in)).Str(in.String(6));
      break;
    case Verb::kCompareSet:
      r.Str(Key(in)).Str(in.String(2)).Str(in.String(2));
      break;
    case Verb::kGet:
    case Verb::kDelete:
    case Verb::kQueuePop:
    case Verb::kQueueLen:
      r.Str(Key(in));
      break;
    case Verb::kAdd:
      r.Str(Key(in)).I64(static_cast<int8_t>(in.Byte()));
      break;
    case Verb::kBarrier:
      r.Str(Key(in)).I64(in.Below(4));
      break;
    case Verb::kCheck:
    case Verb::kWait:
    case Verb::kMultiGet:
      r.U64(2).Str(Key(in)).Str(Key(in));
      break;
    case Verb::kMultiSet:
      r.U64(1).Str(Key(in)).Str(in.String(3));
      break;
    case Verb::kPing:
    case Verb::kValidate:
      r.U32(in.Below(2) ? ddprun::tcpstore::kValidationMagic : in.Byte());
      break;
    default:
      break;
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddprun::fuzz::FuzzInput in(data, size);
  ddprun::TcpStoreService::Limits limits;
  limits.max_owed_per_connection = 64;
  limits.max_owed_total = 160;
  limits.max_input_total = 256;
  limits.max_waits_per_connection = 3;
  limits.max_reply_bytes = 24;
  // The largest reply one request gets past the owed check: a read of two keys (the
  // fuzzer's most) at the reply bound, each with its length; or a LIST_KEYS of the few keys.
  const size_t largest_reply = limits.max_reply_bytes + 2 * 8 + 64;
  ddprun::TcpStoreService service(limits);
  std::set<uint64_t> open;
  std::map<uint64_t, size_t> unread;  // reply bytes given to a connection since it drained
  Dialect dialect[5] = {};
  for (int steps = 0; !in.empty() && steps < 2000; ++steps) {
    const uint64_t id = 1 + in.Below(4);
    switch (in.Below(8)) {
      case 0:
        if (open.insert(id).second) {
          service.Open(id);
          dialect[id] = in.Below(2) ? Dialect::kValidated : Dialect::kLegacy;
          if (dialect[id] == Dialect::kValidated)
            service.Receive(id, ddprun::tcpstore::testing::ValidateBytes());
        }
        break;
      case 1:
        if (open.erase(id) > 0) service.Closed(id);
        unread.erase(id);
        break;
      case 2:
        service.Receive(id, in.String(24));
        break;
      case 3:
        if (in.Below(2) == 0 && open.count(id) > 0) {  // its client read every reply
          service.Drained(id);
          unread[id] = 0;
        } else if (in.Below(8) == 0) {
          if (in.Below(2)) {
            service.EndRound();
          } else {
            service.BeginRound(steps);
          }
        }
        break;
      default: {
        const std::string bytes =
            Request(in, dialect[id] == Dialect::kUnknown ? Dialect::kLegacy : dialect[id]);
        const size_t cut = in.Below(static_cast<int>(bytes.size()) + 1);  // split anywhere
        service.Receive(id, bytes.substr(0, cut));
        service.Receive(id, bytes.substr(cut));
        break;
      }
    }
    const bool serving = service.serving();
    for (const ddprun::TcpStoreService::Output& out : service.TakeOutput()) {
      Require(open.count(out.connection) > 0);
      Require(serving || out.close || out.bytes.empty());
      unread[out.connection] += out.bytes.size();
      Require(unread[out.connection] <= limits.max_owed_per_connection + largest_reply);
      if (out.close) {
        open.erase(out.connection);
        unread.erase(out.connection);
      }
    }
    size_t unread_total = 0;
    for (const auto& [connection, bytes] : unread) unread_total += bytes;
    Require(unread_total <= limits.max_owed_total + 4 * 16);  // small replies are not admitted
    Require(service.connections() == static_cast<int>(open.size()));
  }
  service.EndRound();
  service.BeginRound(-1);  // closes the ended round's connections
  for (const ddprun::TcpStoreService::Output& out : service.TakeOutput()) {
    if (out.close) open.erase(out.connection);
  }
  for (uint64_t id : open) service.Closed(id);
  Require(service.connections() == 0);
  Require(service.store().Waiting() == 0);
  return 0;
}
