#pragma once
// A master's page on --metrics-port: the HTTP server (observability/metrics_http.h) reading
// the master's status and its MasterMetrics. In a library of its own (ddprun_master_http), so
// that what links the master alone (the worker SDK's store) links no HTTP server and no
// metrics library.

#include <memory>

#include "absl/status/statusor.h"
#include "master/master_server.h"
#include "observability/master_metrics.h"
#include "observability/metrics_http.h"

namespace ddprun {

/// Serves `master`'s status and page, and `metrics` (the sink `master` was started with), plus
/// whatever else `http` says (an agent's metrics). Both must outlive the server.
absl::StatusOr<std::unique_ptr<MetricsHttp>> ServeMasterMetrics(MasterServer& master,
                                                                const MasterMetrics& metrics,
                                                                MetricsHttpOptions http);

}  // namespace ddprun
