// ddprun-docgen: ddprun's man page and shell completions, made at build time from the same
// option declarations as `ddprun --help` (DescribeOptions), so that none of the three can
// fall out of step with the others.
//
//   ddprun-docgen man OUT    the man page ddprun(1)
//   ddprun-docgen bash OUT   the bash completion (share/bash-completion/completions/ddprun)
//   ddprun-docgen zsh OUT    the zsh completion (share/zsh/vendor-completions/_ddprun)

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "launcher/cli.h"
#include "launcher/completion.h"
#include "launcher/option_docs.h"

namespace ddprun {
namespace {

// roff: a backslash is written \e, a minus \-, and a line may not start with . or '.
std::string Roff(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

std::string ManPage() {
  std::string page = absl::StrCat(
      ".TH DDPRUN 1 \"\" \"", VersionText(), "\" \"User Commands\"\n",
      ".SH NAME\nddprun \\- fast, torchrun\\-compatible launcher for distributed training\n",
      ".SH SYNOPSIS\n.B ddprun\n[\\fIOPTIONS\\fR] \\fItraining_script\\fR [\\fIargs\\fR ...]\n",
      ".SH DESCRIPTION\n",
      "ddprun runs one worker per GPU (or CPU) of this node with the options and the worker\n"
      "environment of PyTorch's torchrun (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,\n"
      "MASTER_PORT, TORCHELASTIC_*), restarts every worker of the job when one fails, and\n"
      "meets the other nodes at a rendezvous master (hosted by one agent, or\n"
      ".BR ddprun\\-master ).\n"
      "Every option has a dashed and, as in torchrun, an underscored spelling, and takes its\n"
      "default from the PET_* variable named below it.\n",
      ".SH OPTIONS\n");
  std::string group;
  for (const OptionDoc& option : DescribeOptions()) {
    if (option.group != group) {
      group = option.group;
      absl::StrAppend(&page, ".SS \"", Roff(group), "\"\n");
    }
    std::vector<std::string> names;
    for (const std::string& name : option.names) {
      names.push_back(
          absl::StrCat("\\fB", Roff(name), "\\fR", option.takes_value ? "=\\fIVALUE\\fR" : ""));
    }
    absl::StrAppend(&page, ".TP\n", absl::StrJoin(names, ", "), "\n", Roff(option.help), "\n");
    if (!option.env.empty()) absl::StrAppend(&page, ".br\nEnvironment: ", Roff(option.env), "\n");
  }
  // The footer of --help: positional arguments, environment, exit status, verbatim.
  absl::StrAppend(&page, ".SH \"ARGUMENTS, ENVIRONMENT AND EXIT STATUS\"\n.nf\n");
  for (absl::string_view line : absl::StrSplit(HelpFooter(), '\n')) {
    absl::StrAppend(&page, Roff(std::string(line)), "\n");
  }
  absl::StrAppend(&page, ".fi\n",
                  ".SH SEE ALSO\n.BR ddprun\\-master (1)\n"
                  "(\\fBddprun\\-master \\-\\-help\\fR), and the documentation in the ddprun "
                  "sources: README.md and docs/.\n");
  return page;
}

}  // namespace
}  // namespace ddprun

int main(int argc, char** argv) {
  const std::string what = argc == 3 ? argv[1] : "";
  if (what != "man" && what != "bash" && what != "zsh") {
    std::fprintf(stderr, "usage: ddprun-docgen man|bash|zsh OUT\n");
    return 2;
  }
  std::ofstream out(argv[2]);
  out << (what == "man" ? ddprun::ManPage() : *ddprun::CompletionScript(what));
  out.close();
  if (!out) {
    std::fprintf(stderr, "ddprun-docgen: cannot write %s\n", argv[2]);
    return 1;
  }
  return 0;
}
