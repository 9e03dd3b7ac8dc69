#pragma once
// What the load generators measure: the server they load, from /proc/<pid>, and percentiles
// of their samples.

#include <vector>

namespace ddprun {

/// A process's CPU time so far (user + system) and its peak RSS.
struct ProcessReading {
  double cpu_ms = 0;
  double peak_rss_mib = 0;
};

/// Zeros for pid <= 0 or a process that is gone.
ProcessReading ReadProcess(int pid);

/// The value below which a fraction `p` (0..1) of `values` lies; 0 for none.
double Percentile(std::vector<double> values, double p);

}  // namespace ddprun
