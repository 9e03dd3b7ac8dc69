// ddprun-storebench: the Store's throughput and latency, against the floor of a plain gRPC
// unary round trip, on loopback.
//
//   ddprun-storebench --store HOST:PORT --bare HOST:PORT
//
// --store is a ddprun-master (what DDPRUN_STORE_ADDR points at in a multi-node job); --bare
// is ddprun-bare-master, whose Store answers NumKeys at once without touching anything.
// 1, 16 and 256 clients (threads, each with its own worker-SDK Store client) time set, get
// (of a key that exists), add and wait (for a key that exists) against the master, and the
// bare unary call. Prints one JSON object: for each client count and op, ops per second
// and the p50/p99 latency in microseconds.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "ddp/worker/store.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "rpc/wire.h"

namespace {

struct Result {
  double ops_per_s = 0, p50_us = 0, p99_us = 0;
};

using Op = std::function<absl::Status(ddp::worker::Store&, int client, int i)>;

// `clients` threads each run `ops_per_client` calls of `op` on their own Store client.
absl::StatusOr<Result> Measure(const std::string& address, int clients, int ops_per_client,
                               const Op& op) {
  std::vector<std::unique_ptr<ddp::worker::Store>> stores;
  for (int c = 0; c < clients; ++c) {
    stores.push_back(ddp::worker::Store::Connect(address, "bench", absl::Seconds(30)));
    // The first call connects; it is not timed.
    if (absl::StatusOr<int64_t> n = stores.back()->NumKeys(); !n.ok()) return n.status();
  }
  std::vector<std::vector<double>> latencies(clients);
  std::vector<absl::Status> errors(clients);
  absl::Barrier* start = new absl::Barrier(clients + 1);  // deletes itself (absl's contract)
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      latencies[c].reserve(ops_per_client);
      if (start->Block()) delete start;
      for (int i = 0; i < ops_per_client && errors[c].ok(); ++i) {
        const absl::Time t0 = absl::Now();
        errors[c] = op(*stores[c], c, i);
        latencies[c].push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
      }
    });
  }
  const absl::Time t0 = absl::Now();
  if (start->Block()) delete start;
  for (std::thread& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  std::vector<double> all;
  for (int c = 0; c < clients; ++c) {
    if (!errors[c].ok()) return errors[c];
    all.insert(all.end(), latencies[c].begin(), latencies[c].end());
  }
  std::sort(all.begin(), all.end());
  Result r;
  r.ops_per_s = static_cast<double>(all.size()) / seconds;
  r.p50_us = all[all.size() / 2];
  r.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return r;
}

// A master serves the Store of runs an agent has joined: one session joins run "bench"
// (one node) and is held while the bench runs, as an agent's is while its workers run.
class HeldRun {
 public:
  explicit HeldRun(const std::string& address)
      : stub_(ddprun::v1::Rendezvous::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    stream_ = stub_->Session(&context_);
  }
  absl::Status Join() {
    ddprun::NodeInfo node;
    node.host = "storebench";
    node.addr = "127.0.0.1";
    node.incarnation = "storebench";
    node.master_port = 1;
    ddprun::RendezvousSettings settings;  // one node
    ddprun::v1::MasterMessage reply;
    if (!stream_->Write(ddprun::JoinMessage(node, "bench", "", settings)) ||
        !stream_->Read(&reply) || !reply.has_assignment()) {
      return absl::UnavailableError("the master did not take the bench's join");
    }
    return absl::OkStatus();
  }
  ~HeldRun() { context_.TryCancel(); }

 private:
  std::unique_ptr<ddprun::v1::Rendezvous::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<ddprun::v1::AgentMessage, ddprun::v1::MasterMessage>>
      stream_;
};

std::string Json(const Result& r) {
  return absl::StrFormat("{\"ops_per_s\": %.0f, \"p50_us\": %.1f, \"p99_us\": %.1f}", r.ops_per_s,
                         r.p50_us, r.p99_us);
}

}  // namespace

int main(int argc, char** argv) {
  int total_ops = 8000;
  std::string master_addr, bare_addr;
  CLI::App app{"ddprun-storebench: Store ops/s and latency against a bare gRPC round trip"};
  app.add_option("--store", master_addr, "a ddprun-master's host:port")->required();
  app.add_option("--bare", bare_addr, "a ddprun-bare-master's host:port")->required();
  app.add_option("--ops", total_ops, "calls per measurement, shared among the clients")
      ->check(CLI::Range(256, 10000000));
  CLI11_PARSE(app, argc, argv);

  HeldRun run(master_addr);
  if (absl::Status s = run.Join(); !s.ok()) {
    std::fprintf(stderr, "ddprun-storebench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const std::string value(64, 'v');
  const std::vector<std::pair<std::string, Op>> ops = {
      {"set",
       [&](ddp::worker::Store& s, int c, int) { return s.Set(absl::StrCat("k", c), value); }},
      {"get", [](ddp::worker::Store& s, int c,
                 int) { return s.Get(absl::StrCat("k", c), absl::Seconds(10)).status(); }},
      {"add", [](ddp::worker::Store& s, int, int) { return s.Add("counter", 1).status(); }},
      {"wait", [](ddp::worker::Store& s, int c,
                  int) { return s.Wait({absl::StrCat("k", c)}, absl::Seconds(10)); }},
  };
  std::vector<std::string> rows;
  for (int clients : {1, 16, 256}) {
    const int per_client = std::max(1, total_ops / clients);
    std::vector<std::string> cells;
    for (const auto& [name, op] : ops) {
      absl::StatusOr<Result> r = Measure(master_addr, clients, per_client, op);
      if (!r.ok()) {
        std::fprintf(stderr, "ddprun-storebench: %s with %d clients: %s\n", name.c_str(), clients,
                     std::string(r.status().message()).c_str());
        return 1;
      }
      cells.push_back(absl::StrCat("\"", name, "\": ", Json(*r)));
    }
    absl::StatusOr<Result> floor =
        Measure(bare_addr, clients, per_client,
                [](ddp::worker::Store& s, int, int) { return s.NumKeys().status(); });
    if (!floor.ok()) {
      std::fprintf(stderr, "ddprun-storebench: bare round trip: %s\n",
                   std::string(floor.status().message()).c_str());
      return 1;
    }
    cells.push_back(absl::StrCat("\"bare_grpc_unary\": ", Json(*floor)));
    rows.push_back(absl::StrCat("\"", clients, "\": {", absl::StrJoin(cells, ", "), "}"));
  }
  std::printf("{%s}\n", absl::StrJoin(rows, ", ").c_str());
  return 0;
}
