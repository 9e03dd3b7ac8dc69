#pragma once
// The rules of ddprun's command line that involve more than one option, or the environment:
// each a function of the parsed values, the environment (passed in, never read here) and the
// config, so that every rule is unit-tested without touching the process.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "launcher/launch_environment.h"
#include "launcher/options.h"

namespace ddprun {

/// The files --rdzv-conf names: the join token (token_file) and the TLS certificates
/// (tls_cert, tls_key, tls_ca: all three or none).
absl::Status ReadRdzvConfFiles(AgentConfig& config);

/// Warnings about secrets the config reads: a token_file or etcd_password_file others may
/// read, a password sent to etcd without TLS (protocol=http).
void NoteExposedSecrets(const AgentConfig& config, std::vector<std::string>& notices);
/// A multi-node c10d job on the default run id ("none"): one warning, since a second job on
/// its endpoint would join its run.
void NoteDefaultRunId(const AgentConfig& config, std::vector<std::string>& notices);

/// The join token from DDPRUN_RDZV_TOKEN, unless a token file gave one (agents, and
/// `ddprun status`/`stop`).
void TakeTokenFromEnvironment(const LaunchEnvironment& env, AgentConfig& config);

/// Defaults taken from the environment: the run id from SLURM_JOB_ID (unless --rdzv-id or
/// PET_RDZV_ID), the join token from DDPRUN_RDZV_TOKEN (unless a token file), a relative
/// --log-dir made absolute against the working folder.
void ApplyEnvironmentDefaults(const OptionValues& values, const LaunchEnvironment& env,
                              AgentConfig& config);

/// --standalone and the backend's rules (backends.h); the run id's limits.
absl::Status ApplyBackendRules(const OptionValues& values, AgentConfig& config);

/// What follows from the rest: MASTER_ADDR's default, --tee implying --redirects.
void DeriveSettings(const OptionValues& values, AgentConfig& config);

/// The workers' command line: python -u [-m] script args, or the program (--no-python).
absl::Status BuildWorkerCommand(const OptionValues& values,
                                const std::vector<std::string>& positional,
                                const LaunchEnvironment& env, AgentConfig& config);

}  // namespace ddprun
