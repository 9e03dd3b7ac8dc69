#include "launcher/option_docs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "launcher/backends.h"
#include "launcher/rdzv_conf_keys.h"

namespace ddprun {
namespace {

constexpr char kPositional[] = R"(Positional:
  training_script [args...]  The script (python -u <script>), module (-m) or program
                             (--no-python), then its arguments, passed through verbatim;
                             ${local_rank} in them becomes each worker's local rank.
)";

constexpr char kFooter[] = R"(Commands (docs/observability.md):
  ddprun status --rdzv-endpoint=HOST:PORT [--rdzv-id=ID] [--json]
                 a running job's round, nodes, restarts and last failure
  ddprun stop --rdzv-endpoint=HOST:PORT --rdzv-id=ID [--reason=TEXT]
                 end a job; its agents exit 0 (143 if the job has no token)

Environment:
  PET_<OPTION>   default for each option above, e.g. PET_NPROC_PER_NODE=4
  PYTHON_EXEC    interpreter for Python workers [default: python3 from PATH]
  SLURM_JOB_ID   the run id when neither --rdzv-id nor PET_RDZV_ID is given
  LOGLEVEL       ddprun's own messages: DEBUG, INFO, WARNING (default), ERROR, CRITICAL
  TORCHELASTIC_ENABLE_FILE_TIMER=1  serve torch's FileTimer watchdog (docs/hangs.md)
  CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK
                 the accelerators gpu/xpu/auto, --virtual-local-rank and --numa-binding
                 count (docs/gpu.md)

Signals:
  SIGUSR2  (unless in --signals-to-handle) every worker's stack, written to the
           attempt's log folder; the job runs on (docs/hangs.md)

Exit status:
  0        every worker succeeded, or `ddprun stop` ended the job
  N        the root-cause worker's exit code (128+S if it died of signal S)
  128+S    ddprun received signal S and stopped the workers
  124      the root cause was a rank taken for hung (no heartbeat, a FileTimer),
           whatever signal then ended it (docs/hangs.md)
  2        bad command line or environment: nothing was started
  69       this node is unhealthy: a worker stuck in uninterruptible sleep, or
           still there --kill-timeout after SIGKILL (docs/hangs.md); or the job
           excluded it for good (--node-cooldown=0, --exclude-hosts;
           docs/node-health.md)
  70       ddprun could not set the job up (event loop, signals, log folder, port)
  75       the rendezvous failed: timed out, refused this node (token, run id,
           settings), or the master was unreachable within join_timeout; or
           --metrics-port is in use
)";

}  // namespace

const char kHelpAllHelp[] =
    "Print every option by section, with its spellings and PET_ variable, the environment, "
    "signals and exit statuses, and exit";

const char kPrintCompletionHelp[] =
    "Print the completion script for bash, zsh or tcsh and exit (e.g. ddprun "
    "--print-completion zsh > ~/.zsh/completions/_ddprun)";

const std::vector<std::string>& CompletionShells() {
  static const auto* shells = new std::vector<std::string>{"bash", "zsh", "tcsh"};
  return *shells;
}

std::string Spellings(const OptionSpec& spec) {
  std::string names = spec.short_name.empty() ? "" : spec.short_name + ",";
  absl::StrAppend(&names, spec.name);
  if (spec.underscore_spelling) {
    std::string underscored = spec.name;
    for (size_t i = 2; i < underscored.size(); ++i) {
      if (underscored[i] == '-') underscored[i] = '_';
    }
    if (underscored != spec.name) absl::StrAppend(&names, ",", underscored);
  }
  return names;
}

std::string HelpText(const OptionSpec& spec) {
  if (spec.flag) return absl::StrCat(spec.help, " [default: off]");
  const std::string shown = spec.default_value.empty() ? "unset" : "'" + spec.default_value + "'";
  return absl::StrCat(spec.help, " [default: ", shown, "]");
}

std::vector<OptionDoc> DescribeOptions() {
  std::vector<OptionDoc> docs = {
      {{"-h", "--help"}, "", "Print this help message and exit", "Options", false, {}},
      {{"--help-all"}, "", kHelpAllHelp, "Options", false, {}},
      {{"--version"}, "", "Print ddprun's version and exit", "Options", false, {}},
      {{"--print-completion", "--print_completion"},
       "",
       kPrintCompletionHelp,
       "Options",
       true,
       CompletionShells()},
  };
  for (const OptionSpec& spec : Options()) {
    OptionDoc doc;
    doc.names = absl::StrSplit(Spellings(spec), ',');
    doc.env = PetName(spec.name);
    doc.help = HelpText(spec);
    doc.group = spec.group;
    doc.takes_value = !spec.flag;
    doc.completion = spec.completion;
    docs.push_back(std::move(doc));
  }
  // Each section together, in the order --help shows them (a section's first option).
  std::vector<std::string> groups;
  for (const OptionDoc& doc : docs) {
    if (std::find(groups.begin(), groups.end(), doc.group) == groups.end()) {
      groups.push_back(doc.group);
    }
  }
  std::stable_sort(docs.begin(), docs.end(), [&groups](const OptionDoc& a, const OptionDoc& b) {
    return std::find(groups.begin(), groups.end(), a.group) <
           std::find(groups.begin(), groups.end(), b.group);
  });
  return docs;
}

// One line per --rdzv-conf key, from their declarations (launcher/rdzv_conf_keys.h).
std::string RdzvConfKeysSection() {
  std::vector<std::pair<std::string, std::string>> rows;
  std::vector<std::string> torchruns;
  for (const RdzvConfKey& key : RdzvConfKeys()) {
    if (key.torchrun_only) {
      torchruns.push_back(key.name);
    } else {
      rows.emplace_back(key.name, absl::StrCat(key.help, " [default: ", key.default_value, "]"));
    }
  }
  rows.emplace_back(absl::StrJoin(torchruns, ", "), "torchrun's: accepted and ignored");
  for (const RendezvousBackend& backend : RendezvousBackends()) {
    if (!backend.listed) continue;  // the keys of the backend it names
    for (const RdzvConfKey& key : backend.rdzv_conf_keys) {
      rows.emplace_back(key.name, absl::StrCat("(--rdzv-backend=", backend.name, ") ", key.help,
                                               " [default: ", key.default_value, "]"));
    }
  }
  size_t column = 0;
  for (const auto& row : rows) column = std::max(column, row.first.size());
  std::string out = "--rdzv-conf keys (key=value,...; durations in seconds; docs/cli.md):\n";
  for (const auto& [name, text] : rows) {
    absl::StrAppend(&out, "  ", name, std::string(column + 2 - name.size(), ' '), text, "\n");
  }
  return out;
}

std::string HelpFooter() {
  return absl::StrCat(kPositional, "\n", RdzvConfKeysSection(), "\n", kFooter);
}

}  // namespace ddprun
