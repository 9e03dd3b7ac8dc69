// ddprun-docgen: ddprun's man page and bash completion, made at build time from the same
// option declarations as `ddprun --help` (DescribeOptions), so that none of the three can
// fall out of step with the others.
//
//   ddprun-docgen man OUT    the man page ddprun(1)
//   ddprun-docgen bash OUT   the completion script (share/bash-completion/completions/ddprun)

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "launcher/cli.h"

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

// Completes option names, the values of the options that take a fixed set, folders for
// --log-dir, and files from the training script on. The names come from DescribeOptions;
// the value sets are written here (they are short and change with the parsers in
// cli_values.cc).
// One case per option that completes something (OptionDoc::completion): its words, folders
// or files.
std::string CompletionCases() {
  std::string cases;
  for (const OptionDoc& option : DescribeOptions()) {
    if (option.completion.empty()) continue;
    std::string reply;
    if (option.completion.front() == "<dirs>") {
      reply = "compgen -d -- \"$cur\"";
    } else if (option.completion.front() == "<files>") {
      reply = "compgen -f -- \"$cur\"";
    } else {
      reply =
          absl::StrCat("compgen -W \"", absl::StrJoin(option.completion, " "), "\" -- \"$cur\"");
    }
    absl::StrAppend(&cases, "    ", absl::StrJoin(option.names, "|"), ") COMPREPLY=($(", reply,
                    ")); return ;;\n");
  }
  return cases;
}

std::string BashCompletion() {
  std::vector<std::string> all, with_value;
  for (const OptionDoc& option : DescribeOptions()) {
    for (const std::string& name : option.names) {
      all.push_back(name);
      if (option.takes_value) with_value.push_back(name);
    }
  }
  return absl::StrCat(
      "# bash completion for ddprun (made by ddprun-docgen from ddprun's options)\n"
      "_ddprun() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      "  local with_value=\" ",
      absl::StrJoin(with_value, " "),
      " \"\n"
      "  local i word\n"
      "  # ddprun status / ddprun stop: their own options.\n"
      "  if ((COMP_CWORD > 1)) && [[ \"${COMP_WORDS[1]}\" == status || \"${COMP_WORDS[1]}\" == "
      "stop ]]; "
      "then\n"
      "    COMPREPLY=($(compgen -W \"--rdzv-endpoint --rdzv-id --rdzv-conf --timeout --help "
      "$([[ ${COMP_WORDS[1]} == stop ]] && echo --reason || echo --json)\" -- \"$cur\")); return\n"
      "  fi\n"
      "  if ((COMP_CWORD == 1)) && [[ \"$cur\" != -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"status stop\" -- \"$cur\") $(compgen -f -- \"$cur\")); "
      "return\n"
      "  fi\n"
      "  # After the training script everything is the script's: files.\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    word=\"${COMP_WORDS[i]}\"\n"
      "    if [[ \"$word\" == -- ]]; then break; fi\n"
      "    if [[ \"$word\" != -* ]]; then\n"
      "      if [[ \"${COMP_WORDS[i-1]}\" == \"=\" || \"$with_value\" == *\" ${COMP_WORDS[i-1]} "
      "\"* ]]; then\n"
      "        continue\n"
      "      fi\n"
      "      COMPREPLY=($(compgen -f -- \"$cur\")); return\n"
      "    fi\n"
      "  done\n"
      "  local option=\"$prev\"\n"
      "  if [[ \"$prev\" == \"=\" ]]; then option=\"${COMP_WORDS[COMP_CWORD-2]}\"; fi\n"
      "  if [[ \"$cur\" == \"=\" ]]; then option=\"$prev\"; cur=\"\"; fi\n"
      "  case \"$option\" in\n",
      CompletionCases(),
      "  esac\n"
      "  if [[ \"$with_value\" == *\" $option \"* ]]; then COMPREPLY=(); return; fi\n"
      "  if [[ \"$cur\" == -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"",
      absl::StrJoin(all, " "),
      "\" -- \"$cur\"))\n"
      "  else\n"
      "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      "  fi\n"
      "}\n"
      "complete -o filenames -F _ddprun ddprun\n");
}

}  // namespace
}  // namespace ddprun

int main(int argc, char** argv) {
  const std::string what = argc == 3 ? argv[1] : "";
  if (what != "man" && what != "bash") {
    std::fprintf(stderr, "usage: ddprun-docgen man|bash OUT\n");
    return 2;
  }
  std::ofstream out(argv[2]);
  out << (what == "man" ? ddprun::ManPage() : ddprun::BashCompletion());
  out.close();
  if (!out) {
    std::fprintf(stderr, "ddprun-docgen: cannot write %s\n", argv[2]);
    return 1;
  }
  return 0;
}
