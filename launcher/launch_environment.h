#pragma once
// What ddprun's command line reads besides its arguments, passed in so that the rules are
// tested without touching this process's environment.

#include <map>
#include <string>

namespace ddprun {

/// What the command line's rules read from the process: its variables (PET_*, PYTHON_EXEC,
/// PATH, SLURM_JOB_ID, DDPRUN_RDZV_TOKEN, torchrun's TORCH_ELASTIC_*) and working folder.
struct LaunchEnvironment {
  std::map<std::string, std::string> vars;
  std::string cwd;
  int terminal_columns = 0;  // stdout's terminal width; 0: not a terminal
  std::string own_path;      // this program's file (/proc/self/exe); "" when unknown

  /// The variable's value; "" when unset.
  std::string Get(const std::string& name) const {
    auto it = vars.find(name);
    return it == vars.end() ? "" : it->second;
  }
  /// This process's environment and working folder.
  static LaunchEnvironment OfThisProcess();
};

}  // namespace ddprun
