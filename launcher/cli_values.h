#pragma once
// Parsers for the values of ddprun's options. Pure functions: each error names the option,
// the value given and what is accepted, ready to print as the one line a user sees.

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/agent_config.h"

namespace ddprun {

struct NodeRange {
  int min_nodes = 1;
  int max_nodes = 1;
};

/// --nnodes: "N" or "MIN:MAX", with 1 <= MIN <= MAX.
absl::StatusOr<NodeRange> ParseNnodes(const std::string& value);

struct Endpoint {
  std::string host;
  int port = 0;
};

/// --rdzv-endpoint: HOST, HOST:PORT, [IPV6] or [IPV6]:PORT; `default_port` when none is given.
absl::StatusOr<Endpoint> ParseEndpoint(const std::string& value, int default_port);

/// Where --nproc-per-node's gpu/auto/cpu values come from; injected so tests need no GPU.
struct DeviceCounts {
  // The node's accelerators, whichever vendor's (node/accelerators.h): 'gpu' and 'auto'.
  std::function<absl::StatusOr<int>()> count_gpus;
  // Its Intel GPUs only: 'xpu', as torchrun's torch.xpu.device_count(); null: none.
  std::function<absl::StatusOr<int>()> count_xpus;
  int cpu_count = 1;
};

/// "OPTION='VALUE' is not valid: expected EXPECTED": the error of every parser here.
absl::Status InvalidValue(const std::string& option, const std::string& value,
                          const std::string& expected);
/// A whole number without blanks or a '+' around it (absl::SimpleAtoi accepts them).
bool ParseStrictInt(absl::string_view text, int& out);

/// --nproc-per-node: a positive integer, "cpu", "gpu" (error when none is visible), "xpu"
/// (Intel GPUs only) or "auto" (GPUs if any, else CPUs).
/// The most workers one node may run (--nproc-per-node).
inline constexpr int kMaxNprocPerNode = 4096;

absl::StatusOr<int> ParseNprocPerNode(const std::string& value, const DeviceCounts& devices);

/// -r/--redirects and -t/--tee: "0".."3", or "LOCAL_RANK:0..3,..." (any number of digits).
absl::StatusOr<StdSpec> ParseStdSpec(const std::string& option, const std::string& value);

/// --rdzv-conf: "key=value,key=value" (empty: none). Every key and value non-empty, no key twice.
absl::StatusOr<std::map<std::string, std::string>> ParseRdzvConf(const std::string& value);

/// --signals-to-handle: comma-separated names such as SIGTERM,SIGUSR1 (the SIG may be left off).
absl::StatusOr<std::vector<int>> ParseSignalList(const std::string& value);

/// --local-ranks-filter: comma-separated local ranks, each below `nproc`.
absl::StatusOr<std::set<int>> ParseLocalRanksFilter(const std::string& value, int nproc);

/// A non-negative whole number for `option`.
absl::StatusOr<int> ParseNonNegativeInt(const std::string& option, const std::string& value);

/// Seconds as a number >= 0 (fractions allowed) for `option`; `positive` excludes 0.
absl::StatusOr<absl::Duration> ParseSeconds(const std::string& option, const std::string& value,
                                            bool positive = false);

/// A duration as ParseSeconds reads it back, to the millisecond: "30", "0.1", "0.001". How a
/// default the config declares is shown in --help and given to the option's parser.
std::string SecondsText(absl::Duration d);

}  // namespace ddprun
