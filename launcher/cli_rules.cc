#include "launcher/cli_rules.h"

#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/small_file.h"
#include "common/status_macros.h"
#include "launcher/backends.h"
#include "rendezvous/run_access.h"
#include "rendezvous/tls_config.h"

namespace ddprun {
namespace {

std::string MakeRunId() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  const uint64_t hi = gen(), lo = gen();
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xfff),
                static_cast<unsigned>(0x8000 | ((lo >> 48) & 0x3fff)),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

// The executable path for `name`: as given when it has a '/', else searched in PATH.
absl::StatusOr<std::string> FindExecutable(const std::string& name, const std::string& path) {
  auto executable_file = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) return absl::NotFoundError("does not exist");
    if (!S_ISREG(st.st_mode)) return absl::FailedPreconditionError("is not a regular file");
    if (::access(name.c_str(), X_OK) != 0) {
      return absl::PermissionDeniedError("is not executable (chmod +x it)");
    }
    return name;
  }
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (executable_file(candidate)) return candidate;
  }
  return absl::NotFoundError("was not found on PATH");
}

// The Python that runs the workers, and why that one: PYTHON_EXEC; else the venv this ddprun
// is installed in (pip install ddprun into the venv that holds torch); else the activated
// venv (VIRTUAL_ENV, which `uv run` and `source bin/activate` set); else python3 on PATH.
struct ChosenPython {
  std::string name;  // as given, or a venv's interpreter's path
  std::string why;
};
ChosenPython ChoosePython(const LaunchEnvironment& env) {
  if (!env.Get("PYTHON_EXEC").empty()) return {env.Get("PYTHON_EXEC"), "PYTHON_EXEC"};
  const auto venv_python = [](const std::string& venv) -> std::string {
    if (venv.empty() || ::access((venv + "/pyvenv.cfg").c_str(), R_OK) != 0) return "";
    for (const char* name : {"/bin/python3", "/bin/python"}) {
      if (::access((venv + name).c_str(), X_OK) == 0) return venv + name;
    }
    return "";
  };
  const std::string bin = env.own_path.substr(0, env.own_path.rfind('/'));
  if (absl::EndsWith(bin, "/bin")) {
    const std::string venv = bin.substr(0, bin.size() - 4);
    if (std::string python = venv_python(venv); !python.empty()) {
      return {python, absl::StrCat("the venv ddprun is installed in, ", venv,
                                   "; PYTHON_EXEC=/path/to/python chooses another")};
    }
  }
  if (std::string python = venv_python(env.Get("VIRTUAL_ENV")); !python.empty()) {
    return {python, "VIRTUAL_ENV; PYTHON_EXEC=/path/to/python chooses another"};
  }
  return {"python3", "python3 first on PATH; PYTHON_EXEC=/path/to/python chooses another"};
}

}  // namespace

void NoteExposedSecrets(const AgentConfig& config, std::vector<std::string>& notices) {
  if (auto it = config.rdzv_conf.find("token_file"); it != config.rdzv_conf.end()) {
    const std::string said = ExposedSecretFile(it->second, "--rdzv-conf token_file");
    if (!said.empty()) notices.push_back(said);
  }
  // The backend's own secrets.
  const RendezvousBackend* backend = FindRendezvousBackend(config.rdzv_backend);
  if (backend != nullptr && backend->note_secrets != nullptr)
    backend->note_secrets(config, notices);
}

void NoteDefaultRunId(const AgentConfig& config, std::vector<std::string>& notices) {
  if (config.rdzv_backend != "c10d" || config.standalone || config.run_id != "none" ||
      config.rendezvous.max_nodes <= 1) {
    return;
  }
  notices.push_back(
      "--rdzv-id is not set, so this job's run is 'none', as is every job's started without "
      "one: another such job on this --rdzv-endpoint would join this job's run (as a spare, or "
      "in its nodes' place). Give each job an id of its own (--rdzv-id=$SLURM_JOB_ID is taken "
      "by default in a Slurm job)");
}

absl::Status ReadRdzvConfFiles(AgentConfig& config) {
  auto path = [&](const char* key) {
    auto it = config.rdzv_conf.find(key);
    return it == config.rdzv_conf.end() ? std::string() : it->second;
  };
  if (const std::string token_file = path("token_file"); !token_file.empty()) {
    DDPRUN_ASSIGN_OR_RETURN(std::string token, ReadTokenFile(token_file, "--rdzv-conf token_file"));
    config.token = std::move(token);
  }
  DDPRUN_ASSIGN_OR_RETURN(TlsConfig tls, ReadTlsFiles(path("tls_cert"), path("tls_key"),
                                                      path("tls_ca"), "--rdzv-conf"));
  config.tls = std::move(tls);
  return absl::OkStatus();
}

void TakeTokenFromEnvironment(const LaunchEnvironment& env, AgentConfig& config) {
  if (config.token.empty() && env.vars.count("DDPRUN_RDZV_TOKEN") > 0) {
    config.token = std::string(absl::StripAsciiWhitespace(env.Get("DDPRUN_RDZV_TOKEN")));
  }
}

void ApplyEnvironmentDefaults(const OptionValues& values, const LaunchEnvironment& env,
                              AgentConfig& config) {
  // In a Slurm job every node sees the same SLURM_JOB_ID, and a requeued job keeps it: the
  // id a job script would pass anyway.
  if (!values.was_given("--rdzv-id") && !env.Get("SLURM_JOB_ID").empty()) {
    config.run_id = env.Get("SLURM_JOB_ID");
  }
  TakeTokenFromEnvironment(env, config);
  if (!config.log_dir.empty() && config.log_dir.front() != '/' && !env.cwd.empty()) {
    // Workers get TORCHELASTIC_ERROR_FILE under it: it must stay valid if they chdir.
    config.log_dir = absl::StrCat(env.cwd, "/", config.log_dir);
  }
}

absl::Status ApplyBackendRules(const OptionValues& values, AgentConfig& config) {
  if (config.standalone) {
    config.rdzv_backend = "c10d";
    config.rdzv_endpoint = "localhost:0";
    config.run_id = MakeRunId();
  }
  // The master's rule (a folder name under --log-dir, a word in log lines): said here first.
  DDPRUN_RETURN_IF_ERROR(CheckRunId(config.run_id, "--rdzv-id"));
  if (config.rendezvous.max_nodes > 1 && config.standalone) {
    return absl::InvalidArgumentError(
        absl::StrCat("--standalone is for one-node jobs, but --nnodes=", values["--nnodes"],
                     ": give every "
                     "node --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT --rdzv-id=JOB instead"));
  }
  // The workers' MASTER_ADDR and MASTER_PORT are where group rank 0's agent serves their
  // TCPStore (docs/environment.md): static, --master-addr:--master-port; c10d, an address
  // of that node (--master-port, when given, is the port of every node's store).
  const RendezvousBackend& backend = *FindRendezvousBackend(config.rdzv_backend);
  DDPRUN_RETURN_IF_ERROR(backend.check(values, config));
  ApplyHostingRule(backend, config);
  return absl::OkStatus();
}

void DeriveSettings(const OptionValues& values, AgentConfig& config) {
  config.node_rank_given = values.was_given("--node-rank");
  config.master_addr = !values["--master-addr"].empty() ? values["--master-addr"]
                       : !config.local_addr.empty()     ? config.local_addr
                                                        : "localhost";
  // Tee implies redirect, as torchrun ORs the tee bits into the redirects.
  const StdSpec redirects = config.redirects;
  const StdSpec& tee = config.tee;
  config.redirects.all_ranks = redirects.all_ranks | tee.all_ranks;
  for (const StdSpec* spec : {&redirects, &tee}) {
    for (const auto& [rank, streams] : spec->per_rank) {
      config.redirects.per_rank[rank] = redirects.ForRank(rank) | tee.ForRank(rank);
    }
  }
}

absl::Status BuildWorkerCommand(const OptionValues& values,
                                const std::vector<std::string>& positional,
                                const LaunchEnvironment& env, AgentConfig& config) {
  const bool module = values.flag("--module");
  const bool no_python = values.flag("--no-python");
  const std::string& script = positional[0];
  if (module && no_python) {
    return absl::InvalidArgumentError(
        "-m/--module and --no-python cannot be used together: a module needs Python");
  }
  if (no_python && !config.preload.empty()) {
    return absl::InvalidArgumentError(
        "--preload and --no-python cannot be used together: the warm pool forks Python "
        "workers; drop --preload, or run the script with Python");
  }
  if (no_python) {
    absl::StatusOr<std::string> program = FindExecutable(script, env.Get("PATH"));
    if (!program.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training_script '", script, "' (with --no-python) ", program.status().message()));
    }
    config.worker_argv = positional;
  } else {
    const ChosenPython chosen = ChoosePython(env);
    const std::string& python = chosen.name;
    absl::StatusOr<std::string> interpreter = FindExecutable(python, env.Get("PATH"));
    if (!interpreter.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the Python interpreter '", python, "' ", interpreter.status().message(),
                       "; set PYTHON_EXEC to one, or use --no-python to run a program directly"));
    }
    if (!module) {
      struct stat st;
      if (::stat(script.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return absl::InvalidArgumentError(
            absl::StrCat("training_script '", script,
                         "' is not a file; give a Python script, "
                         "-m for a module, or --no-python for a program"));
      }
    }
    config.python_workers = true;
    config.interpreter.path = *interpreter;
    config.interpreter.chosen = chosen.why;
    config.worker_argv = {python, "-u"};
    if (module) config.worker_argv.push_back("-m");
    config.worker_argv.insert(config.worker_argv.end(), positional.begin(), positional.end());
  }
  config.entrypoint_name = script;
  return absl::OkStatus();
}

}  // namespace ddprun
