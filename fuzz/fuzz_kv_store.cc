// The Store's rules: a KvStore fed an arbitrary sequence of its verbs (the TCPStore's
// append, queues and barriers included), blocking reads with deadlines, expiries and
// aborts. Every blocking read and barrier must complete exactly once (or be cancelled), and
// a completed read must return as many values as it asked for.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "store/kv_store.h"

namespace {

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

std::string Key(ddprun::fuzz::FuzzInput& in) {
  // Mostly a few short keys that collide; sometimes one over the 8 KiB limit.
  if (in.Below(64) == 0) return std::string(ddprun::KvStore::kMaxKeyBytes + 1, 'k');
  return std::string(1, static_cast<char>('a' + in.Below(4)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddprun::fuzz::FuzzInput in(data, size);
  ddprun::KvStore store;
  absl::Time now = absl::UnixEpoch();
  struct Read {
    size_t keys = 0;
    int completions = 0;
    bool cancelled = false;
  };
  std::vector<std::shared_ptr<Read>> reads;
  std::vector<ddprun::KvStore::WaiterId> ids;
  for (int steps = 0; !in.empty() && steps < 2000; ++steps) {
    switch (in.Below(14)) {
      case 0:
        (void)store.Set(Key(in), in.String(16));
        break;
      case 1: {
        const int64_t delta = static_cast<int8_t>(in.Byte());
        (void)store.Add(Key(in), in.Below(16) == 0 ? INT64_MAX : delta);
        break;
      }
      case 2:
        (void)store.CompareSet(Key(in), in.String(4), in.String(4));
        break;
      case 3:
        (void)store.Delete(Key(in));
        break;
      case 4:
        (void)store.Check({Key(in), Key(in)});
        break;
      case 5:
        (void)store.MultiSet({Key(in), Key(in)}, {in.String(4), in.String(4)});
        break;
      case 6: {
        auto read = std::make_shared<Read>();
        std::vector<std::string> keys(1 + in.Below(3));
        for (auto& k : keys) k = Key(in);
        read->keys = keys.size();
        reads.push_back(read);
        ids.push_back(store.WaitFor(keys, now + absl::Milliseconds(in.Byte()),
                                    [read](absl::StatusOr<std::vector<std::string>> values) {
                                      ++read->completions;
                                      if (values.ok()) Require(values->size() == read->keys);
                                    }));
        break;
      }
      case 7:
        if (!ids.empty()) {
          const size_t i = in.Below(static_cast<int>(ids.size()));
          store.Cancel(ids[i]);
          reads[i]->cancelled = true;
        }
        break;
      case 8:
        now += absl::Milliseconds(in.Byte());
        store.Expire(now);
        break;
      case 9:
        (void)store.Append(Key(in), in.String(4));
        break;
      case 10:
        (void)store.QueuePush(Key(in), in.String(4));
        break;
      case 11: {
        absl::StatusOr<ddprun::KvStore::Popped> popped = store.QueuePop(Key(in));
        if (popped.ok()) Require(popped->value.has_value() == (popped->length_before > 0));
        (void)store.Find(Key(in));
        break;
      }
      case 12: {
        auto read = std::make_shared<Read>();
        reads.push_back(read);
        ids.push_back(store.Barrier(Key(in), 1 + in.Below(4),
                                    [read](absl::StatusOr<std::vector<std::string>> values) {
                                      ++read->completions;
                                      if (values.ok()) Require(values->empty());
                                    }));
        break;
      }
      default:
        if (in.Below(8) == 0) store.AbortAll(absl::AbortedError("round over"));
        break;
    }
    for (auto& completion : store.TakeCompletions()) completion();
  }
  store.AbortAll(absl::AbortedError("end"));
  for (auto& completion : store.TakeCompletions()) completion();
  for (const auto& read : reads) {
    Require(read->completions <= 1);
    Require(read->completions == 1 || read->cancelled);
  }
  Require(store.Waiting() == 0);
  return 0;
}
