#include "master/master_http.h"

#include <string>
#include <utility>

namespace ddprun {

absl::StatusOr<std::unique_ptr<MetricsHttp>> ServeMasterMetrics(MasterServer& master,
                                                                const MasterMetrics& metrics,
                                                                MetricsHttpOptions http) {
  http.master_status = [&master](const std::string& run_id, bool lists) {
    return master.Status(run_id, lists);
  };
  http.master_metrics = [&metrics](const v1::StatusReply& status) {
    return metrics.Collect(status);
  };
  return MetricsHttp::Start(std::move(http));
}

}  // namespace ddprun
