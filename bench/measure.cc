#include "bench/measure.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ddprun {

ProcessReading ReadProcess(int pid) {
  ProcessReading reading;
  if (pid <= 0) return reading;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (text.rfind(')') == std::string::npos) return reading;
  // Fields after the command name, which is in parentheses and may hold spaces.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)),
                             std::istream_iterator<std::string>());
  if (f.size() > 12) {
    const double tick_ms = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    reading.cpu_ms = (std::stod(f[11]) + std::stod(f[12])) * tick_ms;  // utime, stime
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) reading.peak_rss_mib = std::stod(line.substr(6)) / 1024.0;
  }
  return reading;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto at = static_cast<size_t>(p * static_cast<double>(values.size()));
  return values[std::min(values.size() - 1, at)];
}

}  // namespace ddprun
