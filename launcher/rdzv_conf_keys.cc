#include "launcher/rdzv_conf_keys.h"

#include <algorithm>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/closest_name.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "launcher/cli_values.h"

namespace ddprun {
namespace {

// A value of the settings table, from its text: seconds for a duration (> 0, within the
// table's bounds), a whole number within the table's bounds.
absl::Status SetFromText(const SettingField& field, const std::string& option,
                         const std::string& value, absl::Duration& out) {
  DDPRUN_ASSIGN_OR_RETURN(absl::Duration d, ParseSeconds(option, value, /*positive=*/true));
  // The wire carries whole milliseconds: the value every node reads back, this one included
  // (a hosting agent that kept 1.5 ms would refuse its own join for a 1 ms keep-alive).
  d = absl::Trunc(d, absl::Milliseconds(1));
  const int64_t least = std::max<int64_t>(field.min, 1), most = field.max;
  if (d < absl::Milliseconds(least) || d > absl::Milliseconds(most)) {
    return InvalidValue(option, value,
                        absl::StrCat("seconds from ", SecondsText(absl::Milliseconds(least)),
                                     " to ", SecondsText(absl::Milliseconds(most)), " (",
                                     absl::FormatDuration(absl::Milliseconds(least)), " to ",
                                     absl::FormatDuration(absl::Milliseconds(most)), ")"));
  }
  out = d;
  return absl::OkStatus();
}

absl::Status SetFromText(const SettingField& field, const std::string& option,
                         const std::string& value, int& out) {
  int n = 0;
  if (!ParseStrictInt(value, n) || n < field.min || n > field.max) {
    return InvalidValue(option, value,
                        absl::StrCat("a whole number in [", field.min, ", ", field.max, "]"));
  }
  out = n;
  return absl::OkStatus();
}

// The settings the table marks as --rdzv-conf keys.
void AddSettingKeys(std::vector<RdzvConfKey>& keys) {
  const RendezvousSettings defaults;
  ForEachSetting(defaults, [&](const SettingField& field, const auto& value) {
    if (field.rdzv_conf_help == nullptr) return;
    using Value = std::decay_t<decltype(value)>;
    std::string shown = SettingText(value);
    if constexpr (std::is_same_v<Value, absl::Duration>) shown = SecondsText(value);
    const std::string name = field.name;
    keys.push_back(
        {name, shown, field.rdzv_conf_help,
         [name](const std::string& option, const std::string& text, AgentConfig& config) {
           absl::Status status;
           ForEachSetting(config.rendezvous, [&](const SettingField& f, auto& v) {
             using Value = std::decay_t<decltype(v)>;
             // A list (exclude_hosts) is an option's, never a key's.
             if constexpr (!std::is_same_v<Value, std::vector<std::string>>) {
               if (f.name == name) status = SetFromText(f, option, text, v);
             }
           });
           return status;
         }});
  });
}

absl::Status DurationInto(absl::Duration AgentConfig::*member, const std::string& option,
                          const std::string& value, AgentConfig& config) {
  DDPRUN_ASSIGN_OR_RETURN(config.*member, ParseSeconds(option, value, /*positive=*/true));
  return absl::OkStatus();
}

std::function<absl::Status(const std::string&, const std::string&, AgentConfig&)> Seconds(
    absl::Duration AgentConfig::*member) {
  return [member](const std::string& option, const std::string& value, AgentConfig& config) {
    return DurationInto(member, option, value, config);
  };
}

absl::Status IsHost(const std::string& option, const std::string& value, AgentConfig& config) {
  const std::string v = absl::AsciiStrToLower(value);
  if (v == "1" || v == "true" || v == "yes") {
    config.is_host = true;
  } else if (v == "0" || v == "false" || v == "no") {
    config.is_host = false;
  } else {
    return InvalidValue(option, value, "true or false (1 or 0)");
  }
  return absl::OkStatus();
}

std::vector<RdzvConfKey> MakeKeys() {
  std::vector<RdzvConfKey> keys;
  AddSettingKeys(keys);
  // Each default is AgentConfig's own, shown as its parser reads it.
  const AgentConfig defaults;
  const std::vector<RdzvConfKey> agent_keys = {
      {"close_timeout", SecondsText(defaults.close_timeout),
       "only on the agent that hosts the master: how long its master serves the other agents' "
       "sessions once its own job is over",
       Seconds(&AgentConfig::close_timeout)},
      {"heartbeat_timeout", SecondsText(defaults.heartbeat_timeout),
       "how long the agent waits for the master to answer a keepalive ping before it takes "
       "the master for lost",
       Seconds(&AgentConfig::heartbeat_timeout)},
      {"master_outage_timeout", SecondsText(defaults.master_outage_timeout),
       "how long this node's workers go on in their round without a rendezvous master (it "
       "restarted, or cannot be reached) before they are stopped and the node joins again",
       Seconds(&AgentConfig::master_outage_timeout)},
      {"read_timeout", SecondsText(defaults.read_timeout),
       "only on the agent that hosts the master: how long a blocking Store read without a "
       "timeout of its own waits",
       Seconds(&AgentConfig::read_timeout)},
      {"is_host", "inferred", "whether this agent tries to host the master (1/0, true/false)",
       IsHost},
      {"token_file", "none", "a file holding the join token", nullptr},
      {"tls_cert", "none", "this node's TLS certificate (with tls_key and tls_ca)", nullptr},
      {"tls_key", "none", "this node's TLS key", nullptr},
      {"tls_ca", "none", "the CA that signs the other side's certificate", nullptr},
      // torchrun keys that do not apply to ddprun's c10d; accepted so command lines work.
      {"timeout", "", "torchrun's; ignored", nullptr, /*torchrun_only=*/true},
      {"store_type", "", "torchrun's; ignored", nullptr, /*torchrun_only=*/true},
  };
  keys.insert(keys.end(), agent_keys.begin(), agent_keys.end());
  return keys;
}

}  // namespace

const std::vector<RdzvConfKey>& RdzvConfKeys() {
  static const auto* keys = new std::vector<RdzvConfKey>(MakeKeys());
  return *keys;
}

std::string RdzvConfKeyList(const std::string& conjunction,
                            const std::vector<RdzvConfKey>& backend_keys) {
  std::vector<std::string> names;
  for (const auto* keys : {&RdzvConfKeys(), &backend_keys}) {
    for (const RdzvConfKey& key : *keys) {
      if (!key.torchrun_only) names.push_back(key.name);
    }
  }
  const std::string last = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), " ", conjunction, " ", last);
}

namespace {

std::string UnknownKeyIgnored(const std::string& name, const std::string& backend,
                              const std::vector<RdzvConfKey>& backend_keys) {
  std::vector<std::string> known;
  for (const auto* keys : {&RdzvConfKeys(), &backend_keys}) {
    for (const RdzvConfKey& k : *keys) known.push_back(k.name);
  }
  // A typo: one edit in a short key, one in four in a longer one.
  const std::string nearest = ClosestName(name, known, std::max<size_t>(1, name.size() / 4));
  return absl::StrCat(
      "--rdzv-conf key '", Printable(name), "' is not known with --rdzv-backend=", backend,
      ": ignored, as torchrun ignores keys it does not read",
      nearest.empty() ? absl::StrCat(" (known: ", RdzvConfKeyList("and", backend_keys), ")")
                      : absl::StrCat("; did you mean ", nearest, "?"));
}

}  // namespace

absl::Status ApplyRdzvConf(const std::map<std::string, std::string>& conf, AgentConfig& config,
                           const std::vector<RdzvConfKey>& backend_keys,
                           std::vector<std::string>* ignored) {
  for (const auto& [name, value] : conf) {
    const RdzvConfKey* key = nullptr;
    for (const auto* keys : {&RdzvConfKeys(), &backend_keys}) {
      for (const RdzvConfKey& k : *keys) {
        if (k.name == name) key = &k;
      }
    }
    if (key == nullptr) {
      if (ignored != nullptr) {
        ignored->push_back(UnknownKeyIgnored(name, config.rdzv_backend, backend_keys));
      }
      continue;
    }
    if (key->apply) {
      DDPRUN_RETURN_IF_ERROR(key->apply(absl::StrCat("--rdzv-conf ", name), value, config));
    }
  }
  return absl::OkStatus();
}

}  // namespace ddprun
