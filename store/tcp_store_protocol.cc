#include "store/tcp_store_protocol.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "store/kv_store.h"

namespace ddprun::tcpstore {
namespace {

// Query codes in order; torch 1.13 (legacy) numbers the first nine from 0, torch 2.2+ puts
// VALIDATE first. The legacy list also has the four codes main had in mid-2023 (9-12),
// which no release sent before VALIDATE came; they mean the same in both.
constexpr Verb kLegacyCodes[] = {
    Verb::kSet,      Verb::kCompareSet, Verb::kGet,       Verb::kAdd,    Verb::kCheck,
    Verb::kWait,     Verb::kNumKeys,    Verb::kWatchKey,  Verb::kDelete, Verb::kAppend,
    Verb::kMultiGet, Verb::kMultiSet,   Verb::kCancelWait};
constexpr Verb kValidatedCodes[] = {
    Verb::kValidate, Verb::kSet,      Verb::kCompareSet, Verb::kGet,    Verb::kAdd,
    Verb::kCheck,    Verb::kWait,     Verb::kNumKeys,    Verb::kDelete, Verb::kAppend,
    Verb::kMultiGet, Verb::kMultiSet, Verb::kCancelWait, Verb::kPing,   Verb::kQueuePush,
    Verb::kQueuePop, Verb::kQueueLen, Verb::kListKeys,   Verb::kBarrier};

// Reads fields from the front of a request. A field that is not all there yet stops the
// reader with `needed` set; one over its limit stops it with `why`. Without `copy` it only
// measures: a large request arriving in pieces is measured as each piece comes (its keys
// from where the last piece left off: MeasureProgress), and is copied once, when it is whole.
class Reader {
 public:
  Reader(absl::string_view input, bool copy) : input_(input), copy_(copy) {}

  bool copying() const { return copy_; }
  void Skip(size_t pos) { pos_ = pos; }  // to a place measured before
  bool ok() const { return needed_ == 0 && why_.empty(); }
  size_t pos() const { return pos_; }
  size_t needed() const { return needed_; }
  const std::string& why() const { return why_; }

  template <typename T>
  bool Number(T& out) {
    if (!Have(sizeof(T))) return false;
    std::memcpy(&out, input_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool String(std::string& out, size_t limit, const char* what) {
    uint64_t length = 0;
    if (!Number(length)) return false;
    if (length > limit)
      return Refuse(absl::StrCat(what, " of ", length, " bytes; the limit is ", limit));
    if (!Have(length)) return false;
    if (copy_) out.assign(input_.data() + pos_, length);
    pos_ += length;
    return true;
  }
  bool Key(std::string& out) { return String(out, KvStore::kMaxKeyBytes, "a key"); }
  bool Value(std::string& out) { return String(out, KvStore::kMaxValueBytes, "a value"); }

  bool Count(uint64_t& out) {
    if (!Number(out)) return false;
    if (out > KvStore::kMaxKeysPerCall) {
      return Refuse(
          absl::StrCat(out, " keys in one request; the limit is ", KvStore::kMaxKeysPerCall));
    }
    return true;
  }

  bool Refuse(std::string why) {
    why_ = std::move(why);
    return false;
  }

 private:
  bool Have(uint64_t bytes) {
    if (bytes > kMaxRequestBytes || pos_ + bytes > kMaxRequestBytes) {
      return Refuse(absl::StrCat("a request of more than ", kMaxRequestBytes, " bytes"));
    }
    if (input_.size() - pos_ >= bytes) return true;
    needed_ = pos_ + bytes;
    return false;
  }

  absl::string_view input_;
  const bool copy_;
  size_t pos_ = 0;
  size_t needed_ = 0;
  std::string why_;
};

// A count, then that many keys (and a value after each key, `with_values`). A measuring
// reader with `progress` starts at the item it reached last time, and records the next.
bool ReadCounted(Reader& in, Request& r, bool with_values, MeasureProgress* progress) {
  std::string scratch;  // where a measuring reader "reads" counted keys and values
  uint64_t count = 0;
  if (!in.Count(count)) return false;
  if (in.copying()) {
    r.keys.resize(count);
    if (with_values) r.values.resize(count);
  }
  uint64_t i = 0;
  if (progress != nullptr && progress->items > 0 && !in.copying()) {
    i = progress->items;
    in.Skip(progress->pos);
  }
  for (; i < count; ++i) {
    if (progress != nullptr && !in.copying()) *progress = {i, in.pos()};
    if (!in.Key(in.copying() ? r.keys[i] : scratch)) return false;
    if (with_values && !in.Value(in.copying() ? r.values[i] : scratch)) return false;
  }
  return true;
}

// The fields of `verb` after its code byte (only measured unless `in` copies).
bool ReadFields(Reader& in, Request& r, MeasureProgress* progress = nullptr) {
  switch (r.verb) {
    case Verb::kValidate:
    case Verb::kPing: {
      uint32_t value = 0;
      if (!in.Number(value)) return false;
      r.number = value;
      return true;
    }
    case Verb::kNumKeys:
    case Verb::kCancelWait:
    case Verb::kListKeys:
      return true;
    case Verb::kGet:
    case Verb::kDelete:
    case Verb::kWatchKey:
    case Verb::kQueuePop:
    case Verb::kQueueLen:
      r.keys.resize(1);
      return in.Key(r.keys[0]);
    case Verb::kSet:
    case Verb::kAppend:
    case Verb::kQueuePush:
      r.keys.resize(1);
      r.values.resize(1);
      return in.Key(r.keys[0]) && in.Value(r.values[0]);
    case Verb::kCompareSet:
      r.keys.resize(1);
      r.values.resize(2);
      return in.Key(r.keys[0]) && in.Value(r.values[0]) && in.Value(r.values[1]);
    case Verb::kAdd:
    case Verb::kBarrier:
      r.keys.resize(1);
      return in.Key(r.keys[0]) && in.Number(r.number);
    case Verb::kCheck:
    case Verb::kWait:
    case Verb::kMultiGet:
      return ReadCounted(in, r, /*with_values=*/false, progress);
    case Verb::kMultiSet:
      return ReadCounted(in, r, /*with_values=*/true, progress);
  }
  return false;
}

}  // namespace

const char* VerbName(Verb verb) {
  switch (verb) {
    case Verb::kValidate:
      return "VALIDATE";
    case Verb::kSet:
      return "SET";
    case Verb::kCompareSet:
      return "COMPARE_SET";
    case Verb::kGet:
      return "GET";
    case Verb::kAdd:
      return "ADD";
    case Verb::kCheck:
      return "CHECK";
    case Verb::kWait:
      return "WAIT";
    case Verb::kNumKeys:
      return "GETNUMKEYS";
    case Verb::kWatchKey:
      return "WATCH_KEY";
    case Verb::kDelete:
      return "DELETE_KEY";
    case Verb::kAppend:
      return "APPEND";
    case Verb::kMultiGet:
      return "MULTI_GET";
    case Verb::kMultiSet:
      return "MULTI_SET";
    case Verb::kCancelWait:
      return "CANCEL_WAIT";
    case Verb::kPing:
      return "PING";
    case Verb::kQueuePush:
      return "QUEUE_PUSH";
    case Verb::kQueuePop:
      return "QUEUE_POP";
    case Verb::kQueueLen:
      return "QUEUE_LEN";
    case Verb::kListKeys:
      return "LIST_KEYS";
    case Verb::kBarrier:
      return "BARRIER";
  }
  return "?";
}

Dialect DetectDialect(absl::string_view first) {
  if (first.empty()) return Dialect::kUnknown;
  if (first[0] != 0) return Dialect::kLegacy;  // a validated connection starts with 0
  if (first.size() < 5) return Dialect::kUnknown;
  uint32_t magic = 0;
  std::memcpy(&magic, first.data() + 1, sizeof magic);
  return magic == kValidationMagic ? Dialect::kValidated : Dialect::kLegacy;
}

int QueryCode(Verb verb, Dialect dialect) {
  const Verb* begin =
      dialect == Dialect::kValidated ? std::begin(kValidatedCodes) : std::begin(kLegacyCodes);
  const Verb* end =
      dialect == Dialect::kValidated ? std::end(kValidatedCodes) : std::end(kLegacyCodes);
  for (const Verb* v = begin; v != end; ++v) {
    if (*v == verb) return static_cast<int>(v - begin);
  }
  return -1;
}

Parsed ParseRequest(absl::string_view input, Dialect dialect, MeasureProgress* progress) {
  Parsed out;
  if (input.empty()) {
    out.needed = 1;
    return out;
  }
  const uint8_t code = static_cast<uint8_t>(input[0]);
  const size_t known =
      dialect == Dialect::kValidated ? std::size(kValidatedCodes) : std::size(kLegacyCodes);
  if (code >= known) {
    out.kind = Parsed::Kind::kRefused;
    out.why =
        absl::StrCat("query code ", code, ", which this store does not know (",
                     dialect == Dialect::kValidated ? "torch 2.2 or later" : "torch 1.13 to 2.0",
                     " dialect); is the worker's PyTorch newer than this ddprun?");
    return out;
  }
  const Verb verb = dialect == Dialect::kValidated ? kValidatedCodes[code] : kLegacyCodes[code];
  Request measured;
  measured.verb = verb;
  Reader measure(input.substr(1), /*copy=*/false);
  if (!ReadFields(measure, measured, progress)) {
    if (!measure.why().empty()) {
      out.kind = Parsed::Kind::kRefused;
      out.why = absl::StrCat(VerbName(verb), " with ", measure.why());
      if (progress != nullptr) *progress = {};
    } else {
      out.needed = measure.needed() + 1;
    }
    return out;
  }
  if (progress != nullptr) *progress = {};
  out.request.verb = verb;
  Reader copy(input.substr(1, measure.pos()), /*copy=*/true);
  (void)ReadFields(copy, out.request);  // whole, within the limits: measured just now
  out.kind = Parsed::Kind::kRequest;
  out.consumed = measure.pos() + 1;
  return out;
}

std::string EncodeU8(uint8_t value) { return std::string(1, static_cast<char>(value)); }

std::string EncodeU32(uint32_t value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

std::string EncodeI64(int64_t value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

std::string EncodeString(absl::string_view bytes) {
  const uint64_t length = bytes.size();
  std::string out(reinterpret_cast<const char*>(&length), sizeof length);
  out.append(bytes.data(), bytes.size());
  return out;
}

}  // namespace ddprun::tcpstore
