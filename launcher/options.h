#pragma once
// ddprun's options as one table: each entry is every fact about one option (its spellings,
// PET_ variable, group, help, default, what completes it, and how its value is parsed into
// the AgentConfig). --help, the man page, the bash completion and the parser are all made
// from it (launcher/cli.cc, launcher/docgen.cc): a new option is one entry here, its field
// in AgentConfig, a test and a line in docs/cli.md.

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "launcher/cli_values.h"
#include "launcher/option_values.h"

namespace ddprun {

/// What an option's parser may use besides its own value: the config as filled so far by
/// the entries above it (the table's order is the order of parsing) and the notices list.
struct ParseState {
  const DeviceCounts& devices;
  AgentConfig& config;
  std::vector<std::string>& notices;
};

struct OptionSpec {
  std::string name;        // "--nproc-per-node": the long spelling, and its key in OptionValues
  std::string short_name;  // "-r", or empty
  bool underscore_spelling = true;  // also accept "--nproc_per_node", as torchrun does
  bool flag = false;                // takes no value
  std::string default_value;        // a text option's default; empty: unset
  std::string group;                // its --help section
  std::string help;                 // without the default, which is added
  // A variable of torchrun's read when neither the option nor its PET_ variable is set.
  std::string torch_env;
  // What the shell completes after it: words, "<dirs>" or "<files>"; empty: nothing.
  std::vector<std::string> completion;
  // Parses the value into the config; null when only the rules of cli_rules.h read it.
  absl::Status (*parse)(const std::string& value, ParseState& state) = nullptr;
};

/// One entry of the table, said field by field:
///   Option("--max-restarts", MaxRestarts).In(kWorkerGroup).Default("0").Help("...")
/// What is not said keeps OptionSpec's default (no short name, the underscore spelling too,
/// takes a value, no default, no torchrun variable, completes nothing).
class Option {
 public:
  using Parser = absl::Status (*)(const std::string& value, ParseState& state);
  /// `parse` null: only the rules of cli_rules.h read the option.
  explicit Option(std::string name, Parser parse = nullptr) {
    spec_.name = std::move(name);
    spec_.parse = parse;
  }
  Option&& In(std::string group) && { return Set(&OptionSpec::group, std::move(group)); }
  Option&& Short(std::string name) && { return Set(&OptionSpec::short_name, std::move(name)); }
  Option&& NoUnderscore() && { return Set(&OptionSpec::underscore_spelling, false); }
  Option&& Flag() && { return Set(&OptionSpec::flag, true); }
  Option&& Default(std::string value) && {
    return Set(&OptionSpec::default_value, std::move(value));
  }
  Option&& TorchEnv(std::string name) && { return Set(&OptionSpec::torch_env, std::move(name)); }
  Option&& Completes(std::vector<std::string> words) && {
    return Set(&OptionSpec::completion, std::move(words));
  }
  Option&& Help(std::string text) && { return Set(&OptionSpec::help, std::move(text)); }
  operator OptionSpec() && { return std::move(spec_); }  // NOLINT: an entry of the table

 private:
  template <typename Field, typename Value>
  Option&& Set(Field OptionSpec::*field, Value&& value) {
    spec_.*field = std::forward<Value>(value);
    return std::move(*this);
  }
  OptionSpec spec_;
};

/// Every option in --help's order, which is also the order of parsing.
const std::vector<OptionSpec>& Options();

/// --help sections that more than one file adds options to.
inline constexpr char kWorkerGroup[] = "Worker/resource definitions";
inline constexpr char kLogGroup[] = "Logs";

/// The table's later parts, each in a file of its own, appended to `table`: more "Logs"
/// options (options_logs.cc), "CPU and memory binding" and --virtual-local-rank
/// (options_placement.cc), "Hangs" (options_hangs.cc), "Node health" (options_health.cc)
/// and "Observability" (options_observability.cc). --help-all shows each in its section.
std::vector<OptionSpec> WithLogOptions(std::vector<OptionSpec> table);
std::vector<OptionSpec> WithPlacementOptions(std::vector<OptionSpec> table);
std::vector<OptionSpec> WithHangOptions(std::vector<OptionSpec> table);
std::vector<OptionSpec> WithNodeHealthOptions(std::vector<OptionSpec> table);
std::vector<OptionSpec> WithObservabilityOptions(std::vector<OptionSpec> table);

/// An option's value in seconds into `out` (`positive`: 0 is refused too); the error names
/// the option and the value.
absl::Status SecondsInto(const std::string& option, const std::string& value, absl::Duration& out,
                         bool positive = false);

/// "--nproc-per-node" -> "PET_NPROC_PER_NODE".
std::string PetName(const std::string& name);

}  // namespace ddprun
