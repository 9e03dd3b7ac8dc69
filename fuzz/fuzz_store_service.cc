// The Store service's requests as a client sends them: protobuf messages parsed from the
// fuzzer's bytes, with or without the token, for runs of any id, applied through the access
// checks and limits every Store host shares (CheckStoreAccess, RunStores), by a Store served
// alone (StoreOnlyHost, as the gRPC handlers call it; runs are made by Store calls, with no
// sessions in a fuzzer). Every blocking read completes exactly once with a reply within its
// bound, and the bytes accounted for always equal what the stores hold and stay within the
// budget.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddprun/v1/store.pb.h"
#include "fuzz/fuzz_input.h"
#include "rpc/store_only_server.h"

namespace {

namespace pb = ::ddprun::v1;

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

ddprun::StoreOnlyOptions Options() {
  ddprun::StoreOnlyOptions options;
  options.token = "t0ken";
  options.max_runs = 4;
  options.limits.max_keys_per_run = 64;
  options.limits.max_bytes_per_run = 16 * 1024;
  options.limits.max_store_bytes = 40 * 1024;
  options.limits.max_waiters_per_run = 8;
  options.limits.max_reply_bytes = 300;
  return options;
}

template <typename Request>
Request Parse(ddprun::fuzz::FuzzInput& in) {
  Request request;
  const std::string bytes = in.String(255);
  (void)request.ParseFromString(bytes);
  if (in.Below(2) == 0) request.set_run_id(std::string(1, static_cast<char>('a' + in.Below(5))));
  return request;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddprun::fuzz::FuzzInput in(data, size);
  const ddprun::StoreOnlyOptions options = Options();
  ddprun::StoreOnlyHost master(options);
  std::vector<std::shared_ptr<int>> completions;
  for (int steps = 0; !in.empty() && steps < 500; ++steps) {
    const int pick = in.Below(3);
    const std::string token = pick == 0 ? "t0ken" : pick == 1 ? "" : "t0kem";
    using ddprun::KvStore;
    switch (in.Below(6)) {
      case 0: {
        auto r = Parse<pb::SetRequest>(in);
        (void)master.WithStore(token, r.run_id(),
                               [&](KvStore& s) { return s.Set(r.key(), r.value()); });
        break;
      }
      case 1: {
        auto r = Parse<pb::AddRequest>(in);
        (void)master.WithStore(token, r.run_id(),
                               [&](KvStore& s) { return s.Add(r.key(), r.delta()).status(); });
        break;
      }
      case 2: {
        auto r = Parse<pb::CompareSetRequest>(in);
        (void)master.WithStore(token, r.run_id(), [&](KvStore& s) {
          return s.CompareSet(r.key(), r.expected(), r.desired()).status();
        });
        break;
      }
      case 3: {
        auto r = Parse<pb::MultiSetRequest>(in);
        (void)master.WithStore(token, r.run_id(), [&](KvStore& s) {
          return s.MultiSet({r.keys().begin(), r.keys().end()},
                            {r.values().begin(), r.values().end()});
        });
        break;
      }
      case 4: {
        auto r = Parse<pb::DeleteRequest>(in);
        (void)master.WithStore(token, r.run_id(),
                               [&](KvStore& s) { return s.Delete(r.key()).status(); });
        break;
      }
      case 5: {
        auto r = Parse<pb::MultiGetRequest>(in);
        auto count = std::make_shared<int>(0);
        completions.push_back(count);
        master.StoreWait(token, "peer", r.run_id(), {r.keys().begin(), r.keys().end()},
                         absl::InfiniteFuture(),
                         [count, &options](absl::StatusOr<std::vector<std::string>> values) {
                           ++*count;
                           if (!values.ok()) return;
                           int64_t reply = 0;  // a reply is bounded, not only what is held
                           for (const std::string& v : *values) reply += v.size();
                           Require(reply <= options.limits.max_reply_bytes);
                         });
        break;
      }
    }
    const auto [accounted, held] = master.StoreBytes();
    Require(accounted == held);
    Require(accounted <= options.limits.max_store_bytes);
  }
  master.AbortStoreReads();
  for (const auto& count : completions) Require(*count == 1);
  return 0;
}
