#include "launcher/help_text.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddprun {
namespace {

constexpr char kUsage[] = "Usage: ddprun [OPTIONS] training_script [args...]";

constexpr char kIntro[] =
    "ddprun: a fast, torchrun-compatible launcher for distributed training. Every option "
    "also has torchrun's underscored spelling (--nproc_per_node) and a PET_ variable "
    "(PET_NPROC_PER_NODE), and takes a unique prefix (--nproc) as torchrun does.";

// Hangs are caught only by a check the user turns on: --help says so, and how; and names
// what ddprun adds that a torchrun user would not look for.
constexpr char kOwn[] =
    "Hangs are caught only with a check on: --worker-heartbeat-timeout or "
    "TORCHELASTIC_ENABLE_FILE_TIMER=1 (docs/hangs.md). Also ddprun's: --preload=torch, "
    "--metrics-port, ddprun status|stop.";

constexpr char kScript[] =
    "training_script [args...]: the script (python -u), module (-m) or program (--no-python), "
    "then its arguments, passed through verbatim; ${local_rank} in them becomes each "
    "worker's local rank.";

// torchrun's options that most command lines use, by what they are about: --help shows
// these, in this order; --help-all shows every option in its declaration's section.
struct Section {
  const char* title;
  std::vector<std::string> options;
};
const std::vector<Section>& EverydaySections() {
  static const auto* sections = new std::vector<Section>{
      {"Workers", {"--nproc-per-node", "--module", "--no-python", "--max-restarts"}},
      {"Nodes and rendezvous",
       {"--nnodes", "--node-rank", "--master-addr", "--master-port", "--rdzv-backend",
        "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf", "--standalone"}},
      {"Output", {"--log-dir", "--redirects", "--tee", "--local-ranks-filter"}},
      {"Help", {"--help", "--help-all", "--version"}},
  };
  return *sections;
}

const OptionDoc* Find(const std::vector<OptionDoc>& options, const std::string& name) {
  for (const OptionDoc& doc : options) {
    if (std::find(doc.names.begin(), doc.names.end(), name) != doc.names.end()) return &doc;
  }
  return nullptr;
}

// "-r, --redirects VALUE": the short name and the dashed one (--help), or every spelling.
std::string Names(const OptionDoc& doc, HelpScope scope) {
  std::vector<std::string> names;
  for (const std::string& name : doc.names) {
    const bool underscored = name.find('_') != std::string::npos;
    if (scope == HelpScope::kAll || !underscored) names.push_back(name);
  }
  return absl::StrCat(absl::StrJoin(names, ", "), doc.takes_value ? " VALUE" : "");
}

void AppendOption(std::string& out, const OptionDoc& doc, HelpScope scope, size_t width) {
  constexpr size_t kIndent = 8;
  absl::StrAppend(&out, Wrap(Names(doc, scope), 2, 6, width));
  const std::string env = scope == HelpScope::kAll && !doc.env.empty() ? "; " + doc.env : "";
  absl::StrAppend(&out, Wrap(doc.help + env, kIndent, kIndent, width));
}

std::string Header(size_t width) {
  return absl::StrCat(Wrap(kUsage, 0, 7, width), "\n", Wrap(kIntro, 0, 0, width));
}

// A line set in columns ("  LOGLEVEL       ddprun's own messages: ..."): wrapped with its
// continuation under the text after the first gap of two spaces, its columns kept.
std::string WrapColumns(absl::string_view line, size_t width) {
  if (line.size() <= width) return absl::StrCat(line, "\n");
  const size_t text = line.find_first_not_of(' ');
  if (text == absl::string_view::npos) return "\n";
  const size_t gap = line.find("  ", text);
  // A continuation line (no gap) keeps its own indentation; a label's text its column.
  size_t hang = gap == absl::string_view::npos ? text : line.find_first_not_of(' ', gap);
  if (hang == absl::string_view::npos || hang > width / 2) hang = text + 2;
  const size_t start = gap == absl::string_view::npos || hang == text + 2 ? text : hang;
  std::string wrapped = Wrap(std::string(line.substr(start)), start, hang, width);
  return absl::StrCat(line.substr(0, start), wrapped.substr(start));
}

std::string Everyday(const std::vector<OptionDoc>& options, size_t width) {
  std::string out = Header(width);
  for (const Section& section : EverydaySections()) {
    absl::StrAppend(&out, "\n", section.title, ":\n");
    for (const std::string& name : section.options) {
      if (const OptionDoc* doc = Find(options, name)) {
        AppendOption(out, *doc, HelpScope::kEveryday, width);
      }
    }
  }
  absl::StrAppend(&out, "\n", Wrap(kScript, 0, 2, width), "\n", Wrap(kOwn, 0, 0, width));
  return out;
}

std::string All(const std::vector<OptionDoc>& options, size_t width) {
  std::string out = Header(width);
  std::string group;
  for (const OptionDoc& doc : options) {  // DescribeOptions keeps each section together
    if (doc.group != group) {
      group = doc.group;
      absl::StrAppend(&out, "\n", group, ":\n");
    }
    AppendOption(out, doc, HelpScope::kAll, width);
  }
  absl::StrAppend(&out, "\n");
  for (absl::string_view line : absl::StrSplit(HelpFooter(), '\n')) {
    absl::StrAppend(&out, WrapColumns(line, width));
  }
  return out;
}

}  // namespace

std::string Wrap(const std::string& text, size_t first_indent, size_t indent, size_t width) {
  std::string out(first_indent, ' ');
  size_t column = first_indent;
  bool line_empty = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line_empty && column + 1 + word.size() > width) {
      absl::StrAppend(&out, "\n", std::string(indent, ' '));
      column = indent;
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
    line_empty = false;
  }
  return out + "\n";
}

int HelpWidth(const std::string& columns_variable, int terminal_columns) {
  int columns = 0;
  if (!absl::SimpleAtoi(columns_variable, &columns) || columns <= 0) {
    columns = terminal_columns > 0 ? terminal_columns : 80;
  }
  return std::clamp(columns, 40, 100);
}

std::string FormatHelp(const std::vector<OptionDoc>& options, HelpScope scope, int width) {
  const size_t columns = static_cast<size_t>(std::max(width, 40));
  return scope == HelpScope::kAll ? All(options, columns) : Everyday(options, columns);
}

}  // namespace ddprun
