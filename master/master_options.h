#pragma once
// What a rendezvous master is started with (MasterServer::Start, the network plugin's
// host_master): where it listens, who may join, and the bounds on what clients can make it
// hold. Plain data, so that the master's state, its server and the agent that hosts it share
// one declaration.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "observability/master_metrics_sink.h"
#include "rendezvous/round_state_machine.h"
#include "rendezvous/tls_config.h"
#include "store/run_stores.h"

namespace ddprun {

/// Everything a client can make the master hold is bounded (docs/security.md lists these):
/// its runs' Stores (StoreLimits), and the master's own.
struct MasterLimits : StoreLimits {
  int max_runs = 1000;  // runs held at once
  // Places a restarted master holds, over every run, for nodes whose round it takes up from a
  // resume and that have not come back yet (each resume names up to --nnodes' maximum).
  int max_places_held = 100000;
  // A run no agent holds a session in is forgotten after this (its Store too).
  absl::Duration idle_run_ttl = absl::Minutes(10);
  // A Session stream that has not joined by then is closed.
  absl::Duration join_deadline = absl::Seconds(30);
  // Session streams on one connection that have not joined yet (a stream is opened, then
  // joins at once): what a client that never joins can hold. Joined ones are not counted, so
  // that a proxy, or the load generator, may carry thousands of agents on one connection.
  int max_unjoined_streams_per_connection = 1024;
  int max_streams_per_connection = 65536;        // every stream, joined or not (gRPC's limit)
  int64_t grpc_memory_bytes = int64_t{1} << 30;  // gRPC's resource quota
  // A connection whose TLS or HTTP/2 handshake has not finished by then is closed. Not 10 s:
  // when 16,384 agents connect at once (2 shared cores), handshakes queue behind each other
  // past 10 s; closed, their clients backed off and retried, and connecting took 47 s instead
  // of 20. Out of descriptors, the master sheds new connections (MasterListener) either way.
  absl::Duration handshake_timeout = absl::Seconds(60);
};

struct MasterOptions {
  std::string host = "0.0.0.0";  // address to listen on
  int port = 0;                  // 0: the kernel picks one
  // No listening socket: connections come through AdoptConnection from whoever listens on
  // `port` (the agent's TCPStore, which shares the port with this master).
  bool adopt_connections = false;
  std::string token;                       // empty: joins need no token
  std::optional<std::string> only_run_id;  // set: refuse joins for any other run id
  // How long a blocking Store read without its own timeout waits (torchrun's read_timeout).
  absl::Duration store_timeout = absl::Seconds(60);
  TlsConfig tls;  // enabled: clients must show a certificate signed by tls.ca_pem
  // Set: the run's settings, as the agent that hosts this master was started with; a join
  // with other settings is refused, naming the setting. Unset (ddprun-master): the first
  // join of a run fixes them.
  std::optional<RendezvousSettings> run_settings;
  MasterLimits limits;
  // Set: what the last master of the run `only_run_id` remembered (RunMemory), taken over when
  // the run is made: an elected leader's master gets its predecessor's (docs/etcd.md).
  std::optional<RunMemory> recalled;
  // Set: given what a run's master must not forget whenever that changed, on the master's
  // threads and under its lock: it must only take a copy.
  std::function<void(const std::string& run_id, const RunMemory& memory)> remember;
  // Where the master counts rounds and Store calls (MasterMetrics, for --metrics-port); not
  // owned, and it must outlive the master. Null: it counts nothing.
  MasterMetricsSink* metrics = nullptr;
};

}  // namespace ddprun
