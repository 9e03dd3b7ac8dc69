#include "launcher/cli.h"

#include <algorithm>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "launcher/cli_rules.h"
#include "launcher/completion.h"
#include "launcher/help_text.h"
#include "launcher/option_docs.h"
#include "launcher/option_prefixes.h"
#include "launcher/options.h"
#include "launcher/options_health.h"
#include "launcher/torchrun_options.h"

namespace ddprun {
namespace {

constexpr char kDescription[] =
    "ddprun: a fast, torchrun-compatible launcher for distributed training.";

// What CLI11 parses into: every option's text ("1" for a flag that is set).
struct RawValues {
  std::map<std::string, std::string> text;
  std::map<std::string, bool> flags;
  std::string print_completion;  // --print-completion's shell; empty: not asked
};

// ddprun's command line, from the table, as ParseCommandLine parses it (--help's text is
// help_text.h's). PET_ variables are read by ReadOptionValues, from the environment passed in.
void DeclareApp(CLI::App& app, RawValues& raw) {
  app.prefix_command();
  app.set_help_all_flag("--help-all", kHelpAllHelp);
  app.set_version_flag("--version", VersionText(), "Print ddprun's version and exit");
  app.add_option("--print-completion,--print_completion", raw.print_completion,
                 kPrintCompletionHelp)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->type_name("SHELL");
  for (const OptionSpec& spec : Options()) {
    CLI::Option* option =
        spec.flag ? app.add_flag(Spellings(spec), raw.flags[spec.name], HelpText(spec))
                  : app.add_option(Spellings(spec), raw.text[spec.name], HelpText(spec));
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // as argparse: the last wins
  }
}

// CLI11 reads "--opt=" as "--opt" and then takes the next argument as the value; argparse
// (torchrun) gives the empty string. Such tokens are marked before parsing and unmarked after.
constexpr char kEmptyValueMark[] = "\x1f";

// A flag's PET_ value, read as CLI11 reads flags: words, or a number (positive: on).
absl::StatusOr<bool> FlagFromEnvironment(const std::string& variable, const std::string& value) {
  const std::string v = absl::AsciiStrToLower(value);
  if (v == "true" || v == "yes" || v == "on" || v == "enable") return true;
  if (v == "false" || v == "no" || v == "off" || v == "disable") return false;
  int64_t number = 0;
  if (absl::SimpleAtoi(v, &number)) return number > 0;
  return absl::InvalidArgumentError(absl::StrCat(
      variable, "='", value, "' is not valid: expected 1 or 0 (or true/false, yes/no, on/off)"));
}

// Each option's value: the command line, else its PET_ variable, else torchrun's variable,
// else the default.
absl::StatusOr<OptionValues> ReadOptionValues(const CLI::App& app, RawValues& raw,
                                              const LaunchEnvironment& env) {
  OptionValues values;
  for (const OptionSpec& spec : Options()) {
    std::string value = spec.flag ? (raw.flags[spec.name] ? "1" : "") : raw.text[spec.name];
    const std::string pet = env.Get(PetName(spec.name));
    if (app.get_option(spec.name)->count() > 0) {
      values.given.insert(spec.name);
    } else if (!pet.empty()) {
      values.given.insert(spec.name);
      value = pet;
      if (spec.flag) {
        DDPRUN_ASSIGN_OR_RETURN(bool on, FlagFromEnvironment(PetName(spec.name), pet));
        value = on ? "1" : "";
      }
    } else if (!spec.torch_env.empty() && !env.Get(spec.torch_env).empty()) {
      value = env.Get(spec.torch_env);
    } else if (!spec.flag) {
      value = spec.default_value;
    }
    // torchrun's `args.x or os.getenv(...)`: an empty value of an option that is unset by
    // default (--log-line-prefix-template=) also falls back to torchrun's variable.
    if ((value.empty() || value == kEmptyValueMark) && spec.default_value.empty() &&
        !spec.torch_env.empty() && !env.Get(spec.torch_env).empty()) {
      value = env.Get(spec.torch_env);
    }
    values.text[spec.name] = value;
  }
  return values;
}

std::vector<std::string> MarkEmptyValues(const std::vector<std::string>& args) {
  std::vector<std::string> out = args;
  for (std::string& arg : out) {
    if (absl::StartsWith(arg, "--") && arg.size() > 3 && arg.back() == '=' &&
        arg.find('=') == arg.size() - 1) {
      arg += kEmptyValueMark;
    }
  }
  return out;
}

void UnmarkEmptyValue(std::string& value) {
  if (absl::EndsWith(value, kEmptyValueMark)) value.resize(value.size() - 1);
}

void UnmarkEmptyValues(OptionValues& values, std::vector<std::string>& positional) {
  for (auto& [name, value] : values.text) UnmarkEmptyValue(value);
  for (std::string& arg : positional) UnmarkEmptyValue(arg);  // script arguments, verbatim
}

// CLI11 says "--x: 1 required  missing"; say what to do instead.
std::string DescribeParseError(const CLI::ParseError& e) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    const std::string option = what.substr(0, what.find(':'));
    return absl::StrCat("option ", option, " needs a value, e.g. ", option,
                        "=VALUE; see ddprun --help");
  }
  return absl::StrCat(what, "; see ddprun --help");
}

absl::Status ParseValues(const OptionValues& values, const DeviceCounts& devices,
                         AgentConfig& config, std::vector<std::string>& notices) {
  ParseState state{devices, config, notices};
  for (const OptionSpec& spec : Options()) {
    if (spec.parse == nullptr) continue;
    DDPRUN_RETURN_IF_ERROR(spec.parse(values[spec.name], state));
  }
  return absl::OkStatus();
}

// Every spelling ParseCommandLine knows, for abbreviations and suggestions.
std::vector<KnownOption> KnownOptions() {
  std::vector<KnownOption> known;
  for (const OptionDoc& doc : DescribeOptions()) {
    KnownOption option{doc.names, doc.takes_value, false};
    for (const std::string& name : doc.names) {
      option.torchrun = option.torchrun || name == "--help" || IsTorchrunOption(name);
    }
    known.push_back(std::move(option));
  }
  // torch.distributed.launch's own, which scripts written for it still pass to the launcher
  // (docs/user-guide.md): refused by name, with what to do, never taken for a prefix of ours.
  known.push_back({{"--local-rank", "--local_rank"},
                   true,
                   false,
                   "ddprun, like torchrun, gives each worker its local rank in LOCAL_RANK and "
                   "passes no --local-rank to the script; drop it here, and read "
                   "os.environ['LOCAL_RANK'] in the script (or pass it after the script "
                   "yourself: train.py --local_rank='${local_rank}')"});
  known.push_back({{"--use-env", "--use_env"},
                   false,
                   false,
                   "ddprun, like torchrun, always passes the local rank in LOCAL_RANK; drop it"});
  return known;
}

// The training script and its arguments, after the options.
absl::StatusOr<std::vector<std::string>> Positional(const CLI::App& app) {
  std::vector<std::string> positional = app.remaining();
  if (!positional.empty() && positional[0] == "--") positional.erase(positional.begin());
  if (positional.empty()) {
    return absl::InvalidArgumentError(
        "missing training_script: usage is ddprun [options] training_script [args...]");
  }
  if (absl::StartsWith(positional[0], "-")) {
    const std::string closest = ClosestOption(positional[0], KnownOptions());
    return absl::InvalidArgumentError(
        absl::StrCat("unknown option '", positional[0], "'",
                     closest.empty() ? "" : absl::StrCat("; did you mean ", closest, "?"),
                     closest.empty() ? "; see ddprun --help-all for the options" : ""));
  }
  return positional;
}

absl::Status Configure(const OptionValues& values, const std::vector<std::string>& positional,
                       const DeviceCounts& devices, const LaunchEnvironment& env,
                       CliOutcome& outcome) {
  AgentConfig& config = outcome.config;
  DDPRUN_RETURN_IF_ERROR(ParseValues(values, devices, config, outcome.notices));
  DDPRUN_RETURN_IF_ERROR(ReadRdzvConfFiles(config));
  ApplyEnvironmentDefaults(values, env, config);
  DDPRUN_RETURN_IF_ERROR(ApplyBackendRules(values, config));
  NoteExposedSecrets(config, outcome.notices);
  NoteDefaultRunId(config, outcome.notices);
  DeriveSettings(values, config);
  ApplyNodeHealthRules(values, env, config);
  return BuildWorkerCommand(values, positional, env, config);
}

}  // namespace

std::string VersionText() { return absl::StrCat("ddprun ", DDPRUN_VERSION); }

absl::StatusOr<CliOutcome> ParseCommandLine(const std::vector<std::string>& args,
                                            const DeviceCounts& devices) {
  return ParseCommandLine(args, devices, LaunchEnvironment::OfThisProcess());
}

absl::StatusOr<CliOutcome> ParseCommandLine(const std::vector<std::string>& args,
                                            const DeviceCounts& devices,
                                            const LaunchEnvironment& env) {
  CLI::App app(kDescription, "ddprun");
  RawValues raw;
  DeclareApp(app, raw);
  DDPRUN_ASSIGN_OR_RETURN(std::vector<std::string> expanded,
                          ExpandOptionPrefixes(args, KnownOptions()));
  const std::vector<std::string> marked = MarkEmptyValues(expanded);
  std::vector<std::string> reversed(marked.rbegin(), marked.rend());
  CliOutcome outcome;
  const int width = HelpWidth(env.Get("COLUMNS"), env.terminal_columns);
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    outcome.action = CliOutcome::Action::kPrint;
    outcome.text = FormatHelp(DescribeOptions(), HelpScope::kEveryday, width);
    return outcome;
  } catch (const CLI::CallForAllHelp&) {
    outcome.action = CliOutcome::Action::kPrint;
    outcome.text = FormatHelp(DescribeOptions(), HelpScope::kAll, width);
    return outcome;
  } catch (const CLI::CallForVersion&) {
    outcome.action = CliOutcome::Action::kPrint;
    outcome.text = VersionText() + "\n";
    return outcome;
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(DescribeParseError(e));
  }
  if (app.get_option("--print-completion")->count() > 0) {
    // Like --help: answered before the training script is asked for.
    UnmarkEmptyValue(raw.print_completion);
    std::optional<std::string> script = CompletionScript(raw.print_completion);
    if (!script) {
      return absl::InvalidArgumentError(absl::StrCat("--print-completion='", raw.print_completion,
                                                     "' is not valid: expected ",
                                                     absl::StrJoin(CompletionShells(), ", ")));
    }
    outcome.action = CliOutcome::Action::kPrint;
    outcome.text = *script;
    return outcome;
  }
  DDPRUN_ASSIGN_OR_RETURN(OptionValues values, ReadOptionValues(app, raw, env));
  DDPRUN_ASSIGN_OR_RETURN(std::vector<std::string> positional, Positional(app));
  UnmarkEmptyValues(values, positional);
  DDPRUN_RETURN_IF_ERROR(Configure(values, positional, devices, env, outcome));
  return outcome;
}

}  // namespace ddprun
