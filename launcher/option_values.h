#pragma once
// What the option table (options.h) parsed, as text: what the rules that read several options
// together (cli_rules.h, a rendezvous backend's check) see.

#include <map>
#include <set>
#include <string>

namespace ddprun {

/// Every option's text after the command line, PET_ variables and torchrun's variables have
/// been applied ("1" or "" for flags), and whether the user gave it.
struct OptionValues {
  std::map<std::string, std::string> text;
  std::set<std::string> given;  // on the command line or in its PET_ variable

  const std::string& operator[](const std::string& name) const { return text.at(name); }
  bool flag(const std::string& name) const { return !text.at(name).empty(); }
  bool was_given(const std::string& name) const { return given.count(name) > 0; }
};

}  // namespace ddprun
