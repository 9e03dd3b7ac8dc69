#pragma once
// MetricsHttp: the HTTP server of --metrics-port (docs/observability.md). It serves
//   /metrics          Prometheus' text format: the master's metrics, the agent's, or both;
//   /api/v1/status    the master's StatusReply as JSON (what `ddprun status --json` prints);
//   /                 the live status page, which fetches /api/v1/status by itself.
// Read-only: it changes nothing, and it asks for no token (docs/security.md).
// civetweb's threads serve it; the master's state is read under the master's mutex.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddprun/v1/admin.pb.h"
#include "prometheus/metric_family.h"

class CivetServer;
struct mg_connection;

namespace ddprun {

class Route;

struct MetricsHttpOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0: the kernel picks one
  // Set: this process serves a rendezvous master, whose status (one run, or every run for
  // an empty run id; `lists`: with each run's node lists) and metrics these read. Read on
  // civetweb's threads, at each request.
  std::function<absl::StatusOr<v1::StatusReply>(const std::string& run_id, bool lists)>
      master_status;
  std::function<std::vector<prometheus::MetricFamily>(const v1::StatusReply&)> master_metrics;
  // Set: the agent's own metrics, read at each scrape.
  std::function<std::vector<prometheus::MetricFamily>()> agent_metrics;
};

class MetricsHttp {
 public:
  /// Listens and serves. The error names the address and says when it is in use.
  static absl::StatusOr<std::unique_ptr<MetricsHttp>> Start(MetricsHttpOptions options);
  ~MetricsHttp();
  int port() const { return port_; }

 private:
  MetricsHttp() = default;
  // civetweb's begin_request: every request, answered by its route.
  static int BeginRequest(mg_connection* conn);

  MetricsHttpOptions options_;
  // Before server_, which is stopped first: by URI, and the one for every other URI.
  std::map<std::string, std::unique_ptr<Route>> routes_;
  std::unique_ptr<Route> other_;
  std::unique_ptr<CivetServer> server_;
  int port_ = 0;
};

/// The status page (status_page.html, built in).
extern const char kStatusPageHtml[];

}  // namespace ddprun
