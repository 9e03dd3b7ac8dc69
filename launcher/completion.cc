#include "launcher/completion.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "launcher/admin_command.h"
#include "launcher/option_docs.h"

namespace ddprun {
namespace {

// The long names of `ddprun <command>`'s options, space-separated, for bash.
std::string AdminOptionNames(const std::string& command) {
  std::vector<std::string> names;
  for (const OptionDoc& option : DescribeAdminOptions(command)) names.push_back(option.names[0]);
  return absl::StrJoin(names, " ");
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
      "  if ((COMP_CWORD > 1)) && [[ \"${COMP_WORDS[1]}\" == status ]]; then\n"
      "    COMPREPLY=($(compgen -W \"",
      AdminOptionNames("status"),
      "\" -- \"$cur\")); return\n"
      "  fi\n"
      "  if ((COMP_CWORD > 1)) && [[ \"${COMP_WORDS[1]}\" == stop ]]; then\n"
      "    COMPREPLY=($(compgen -W \"",
      AdminOptionNames("stop"),
      "\" -- \"$cur\")); return\n"
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

// One _arguments spec per spelling: '--name=[help]:value:(words)'. The help loses its
// default and the characters _arguments gives a meaning to.
std::string ZshHelp(const OptionDoc& option) {
  std::string help = option.help.substr(0, option.help.find(" [default:"));
  return absl::StrReplaceAll(help, {{"'", ""}, {"[", "("}, {"]", ")"}, {":", " "}, {"\\", "/"}});
}

std::string ZshAction(const OptionDoc& option) {
  if (option.completion.empty()) return ":value: ";
  if (option.completion.front() == "<dirs>") return ":folder:_files -/";
  if (option.completion.front() == "<files>") return ":file:_files";
  return absl::StrCat(":value:(", absl::StrJoin(option.completion, " "), ")");
}

std::string ZshSpecs() {
  std::string specs;
  for (const OptionDoc& option : DescribeOptions()) {
    for (const std::string& name : option.names) {
      const bool is_short = name.size() == 2;
      const std::string form = !option.takes_value ? "" : is_short ? "+" : "=";
      absl::StrAppend(&specs, "    '", name, form, "[", ZshHelp(option), "]",
                      option.takes_value ? ZshAction(option) : "", "' \\\n");
    }
  }
  return specs;
}

// `ddprun <command>`'s _arguments specs, as ZshSpecs makes ddprun's.
std::string ZshAdminSpecs(const std::string& command) {
  std::string specs;
  for (const OptionDoc& option : DescribeAdminOptions(command)) {
    absl::StrAppend(&specs, " '", option.names[0], option.takes_value ? "=" : "", "[",
                    ZshHelp(option), "]", option.takes_value ? ":value: " : "", "'");
  }
  return specs;
}

std::string ZshCompletion() {
  return absl::StrCat(
      "#compdef ddprun\n"
      "# zsh completion for ddprun (made by ddprun-docgen from ddprun's options)\n"
      "_ddprun_first() {\n"
      "  _alternative 'commands:command:(status stop)' 'files:training script:_files'\n"
      "}\n"
      "_ddprun() {\n"
      "  if (( CURRENT > 2 )) && [[ ${words[2]} == (status|stop) ]]; then\n"
      "    local command=${words[2]}\n"
      "    shift words; (( CURRENT-- ))  # the command is the word _arguments completes for\n"
      "    if [[ $command == stop ]]; then _arguments",
      ZshAdminSpecs("stop"),
      "\n"
      "    else _arguments",
      ZshAdminSpecs("status"),
      "\n"
      "    fi\n"
      "    return\n"
      "  fi\n"
      "  # -A: no ddprun options after the training script; the rest is the script's.\n"
      "  _arguments -S -A '-*' \\\n",
      ZshSpecs(),
      "    '1:training script:_ddprun_first' \\\n"
      "    '*::script arguments:_files'\n"
      "}\n"
      "_ddprun \"$@\"\n");
}

// tcsh: option names after "--" or "-", the fixed values after an option (next word or
// after '='), folders after --log-dir, files everywhere else.
std::string TcshCompletion() {
  std::vector<std::string> long_names, short_names, rules;
  for (const OptionDoc& option : DescribeOptions()) {
    for (const std::string& name : option.names) {
      (name.size() == 2 ? short_names : long_names)
          .push_back(name.substr(name.size() == 2 ? 1 : 2));
      if (option.completion.empty() || option.completion.front() == "<files>") continue;
      const std::string words = option.completion.front() == "<dirs>"
                                    ? "d"
                                    : absl::StrCat("(", absl::StrJoin(option.completion, " "), ")");
      rules.push_back(absl::StrCat("'n/", name, "/", words, "/'"));
      if (name.size() > 2) rules.push_back(absl::StrCat("'c/", name, "=/", words, "/'"));
    }
  }
  return absl::StrCat(
      "# tcsh completion for ddprun (made from ddprun's options): source it from ~/.tcshrc\n"
      "complete ddprun \\\n  ",
      absl::StrJoin(rules, " \\\n  "), " \\\n  'c/--/(", absl::StrJoin(long_names, " "),
      ")/' \\\n  'c/-/(", absl::StrJoin(short_names, " "), ")/' \\\n  'n/*/f/'\n");
}

}  // namespace

std::optional<std::string> CompletionScript(const std::string& shell) {
  if (shell == "bash") return BashCompletion();
  if (shell == "zsh") return ZshCompletion();
  if (shell == "tcsh") return TcshCompletion();
  return std::nullopt;
}

}  // namespace ddprun
