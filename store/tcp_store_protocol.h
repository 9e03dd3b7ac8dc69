#pragma once
// PyTorch's TCPStore wire protocol, the server's half: a client's requests parsed from the
// bytes it sent, and the replies encoded. Pure. The protocol, as PyTorch's clients speak it
// from 1.13 to main (docs/protocol.md#the-workers-tcpstore):
//   - a request is a one-byte query code and its fields, with no frame around it; strings
//     are a u64 length and the bytes, integers are in the client's (little-endian) order;
//   - two dialects: torch 1.13 to 2.0 send requests at once (SET is 0); torch 2.2 and later
//     open every connection with VALIDATE (00 CE F7 85 3C), and every code below 8 is one
//     higher (SET is 1). The first bytes of a connection tell which. torch 2.1 may speak
//     a third (codes from 7 one lower, mid-2023 main), which no release here had to check.
//   - there are no error replies: a server that cannot serve a request closes the
//     connection, as PyTorch's own servers do.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ddprun::tcpstore {

/// The dialect of one connection.
enum class Dialect {
  kUnknown,    // too few bytes yet to tell
  kLegacy,     // torch 1.13 to 2.0 (2.1: not known which): no handshake
  kValidated,  // torch 2.2 and later: VALIDATE first, codes shifted by one
};

enum class Verb {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kWatchKey,
  kDelete,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kListKeys,
  kBarrier,
};

/// The verb as torch's TCPStore names it ("SET", "MULTI_GET", ...).
const char* VerbName(Verb verb);

/// VALIDATE's magic number, and the most a request may hold in all (PyTorch's libuv server
/// has no bound on a whole request; this one does, so that no client can make it buffer
/// without end). Keys, values and key counts have KvStore's limits, which are libuv's.
inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;
inline constexpr size_t kMaxRequestBytes = 64 * 1024 * 1024;

struct Request {
  Verb verb = Verb::kGet;
  std::vector<std::string> keys;
  // SET, APPEND, QUEUE_PUSH: the value; COMPARE_SET: expected, desired; MULTI_SET: one per key.
  std::vector<std::string> values;
  int64_t number = 0;  // ADD: the delta; BARRIER: the world size; PING, VALIDATE: the u32
};

struct Parsed {
  enum class Kind { kNeedMore, kRequest, kRefused };
  Kind kind = Kind::kNeedMore;
  Request request;      // kRequest
  size_t consumed = 0;  // kRequest: the request's length in bytes
  size_t needed = 0;    // kNeedMore: nothing can be parsed before the input has this many bytes
  std::string why;      // kRefused: what was wrong, for a log line
};

/// The dialect of a connection whose first bytes are `first` (kUnknown while they do not
/// tell yet: a 0 byte is VALIDATE or a 1.13 SET until 5 bytes are in).
Dialect DetectDialect(absl::string_view first);

/// How far a request that names many keys (CHECK, WAIT, MULTI_GET, MULTI_SET) was measured
/// while it was not all there: the next call goes on from there instead of walking its
/// keys again from the start at every piece (quadratic in the keys of a large request).
struct MeasureProgress {
  uint64_t items = 0;  // keys (with their values) measured whole
  size_t pos = 0;      // where the next one begins, after the code byte
};

/// The request at the front of `input`, or what is missing, or why the connection must close.
/// `progress` (may be null) is the caller's, kept between calls for the same request: the
/// same input, longer; it is reset once the request is parsed or refused.
Parsed ParseRequest(absl::string_view input, Dialect dialect, MeasureProgress* progress = nullptr);

/// The query code of `verb` in `dialect`; -1 if the dialect has none.
int QueryCode(Verb verb, Dialect dialect);

// Replies, in the client's byte order.
std::string EncodeU8(uint8_t value);
std::string EncodeU32(uint32_t value);
std::string EncodeI64(int64_t value);
std::string EncodeString(absl::string_view bytes);

/// WAIT and BARRIER replies, and CANCEL_WAIT's; CHECK's.
inline constexpr uint8_t kStopWaiting = 0, kWaitCanceled = 1;
inline constexpr uint8_t kReady = 0, kNotReady = 1;

}  // namespace ddprun::tcpstore
