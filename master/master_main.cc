// ddprun-master: the rendezvous master alone, for a fixed service address that outlives any
// one agent (a Kubernetes Service, a Slurm head node). Serves any number of runs by run id.
//
//   ddprun-master --host 0.0.0.0 --port 29400 [--token-file PATH] [--read-timeout S]
//                 [--metrics-port PORT]
//
// SIGTERM or SIGINT: stop accepting, give open sessions --grace seconds, exit 0.

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/listen_socket.h"
#include "common/small_file.h"
#include "common/status_macros.h"
#include "master/master_http.h"
#include "master/master_server.h"
#include "rendezvous/run_access.h"
#include "rpc/wire.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace {

using ddprun::kExitCannotServe;
using ddprun::kExitUsage;

int UsageError(const std::string& message) {
  std::fprintf(stderr, "ddprun-master: error: %s\n", message.c_str());
  return kExitUsage;
}

// ddprun-master's command line.
struct Settings {
  std::string host = "0.0.0.0";
  int port = 29400;
  std::string token_file;
  double grace_seconds = 5;
  double read_timeout_seconds = 60;
  std::string tls_cert, tls_key, tls_ca;
  int metrics_port = -1;  // -1: no metrics
  bool verbose = false;
};

void DeclareOptions(CLI::App& app, Settings& s) {
  app.add_option("--host", s.host, "Address to listen on [default: 0.0.0.0]");
  app.add_option("--port", s.port, "Port to listen on; 0 picks a free one [default: 29400]")
      ->check(CLI::Range(0, 65535));
  app.add_option("--token-file", s.token_file,
                 "File holding the join token agents must present (--rdzv-conf token_file= "
                 "or DDPRUN_RDZV_TOKEN on the agents) [default: none]");
  app.add_option("--grace", s.grace_seconds, "Seconds open sessions get at shutdown [default: 5]")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--read-timeout", s.read_timeout_seconds,
                 "Seconds a blocking Store read without its own timeout waits (like "
                 "--rdzv-conf read_timeout on a hosting agent) [default: 60]")
      ->check(CLI::PositiveNumber);
  app.add_option("--tls-cert", s.tls_cert,
                 "TLS: this master's certificate (PEM); with --tls-key and --tls-ca, agents "
                 "must show a certificate signed by --tls-ca [default: plaintext]");
  app.add_option("--tls-key", s.tls_key, "TLS: the private key of --tls-cert (PEM)");
  app.add_option("--tls-ca", s.tls_ca, "TLS: the CA that signs the agents' certificates (PEM)");
  app.add_option("--metrics-port", s.metrics_port,
                 "Serve Prometheus metrics (/metrics), the runs' status as JSON "
                 "(/api/v1/status) and a live status page (/) over HTTP on this port, on "
                 "--host; 0 picks a free one [default: off]")
      ->check(CLI::Range(0, 65535));
  app.add_flag("-v,--verbose", s.verbose, "Log gRPC's own messages too (debug level)");
}

void ConfigureLogging(bool verbose) {
  // _mt: gRPC's threads log through it too (RouteGrpcLogsToSpdlog).
  auto logger = spdlog::stderr_logger_mt("ddprun-master");
  logger->set_pattern("[ddprun-master] %Y-%m-%d %H:%M:%S.%e %l: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  ddprun::RouteGrpcLogsToSpdlog();
}

// The server's options; an error is a usage error (a file that cannot be read).
absl::StatusOr<ddprun::MasterOptions> MasterOptionsFrom(const Settings& s) {
  ddprun::MasterOptions options;
  options.host = s.host;
  options.port = s.port;
  options.store_timeout = absl::Seconds(s.read_timeout_seconds);
  DDPRUN_ASSIGN_OR_RETURN(ddprun::TlsConfig tls,
                          ddprun::ReadTlsFiles(s.tls_cert, s.tls_key, s.tls_ca, "ddprun-master"));
  options.tls = tls;
  if (!s.token_file.empty()) {
    DDPRUN_ASSIGN_OR_RETURN(std::string token, ddprun::ReadTokenFile(s.token_file, "--token-file"));
    options.token = std::move(token);
    const std::string exposed = ddprun::ExposedSecretFile(s.token_file, "--token-file");
    if (!exposed.empty()) spdlog::warn("{}", exposed);
  }
  return options;
}

bool ListensOnLoopbackOnly(const std::string& host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

// Serves until SIGTERM or SIGINT, then shuts down after the grace period.
int Serve(const Settings& s, const ddprun::MasterOptions& options) {
  // SIGTERM and SIGINT are waited for below; block them before gRPC starts its threads.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ddprun::MasterMetrics counts;  // outlives the master, which counts into it
  ddprun::MasterOptions counted = options;
  counted.metrics = &counts;
  absl::StatusOr<std::unique_ptr<ddprun::MasterServer>> master =
      ddprun::MasterServer::Start(counted);
  if (!master.ok()) {
    spdlog::error("{}", std::string(master.status().message()));
    return kExitCannotServe;
  }
  // The "listening" line is what scripts wait for; it carries the real port.
  spdlog::info("listening on {}:{}{}{}", s.host, (*master)->port(),
               options.tls.enabled() ? " with TLS (clients need a certificate)" : "",
               options.token.empty() ? "" : " (joins and Store calls need the token)");
  if (options.token.empty() && !ListensOnLoopbackOnly(s.host)) {
    spdlog::warn("{}",
                 ddprun::NoTokenWarning((*master)->port(),
                                        "give it --token-file, every node DDPRUN_RDZV_TOKEN"));
  }
  std::unique_ptr<ddprun::MetricsHttp> metrics;
  if (s.metrics_port >= 0) {
    ddprun::MetricsHttpOptions http;
    http.host = s.host;
    http.port = s.metrics_port;
    absl::StatusOr<std::unique_ptr<ddprun::MetricsHttp>> served =
        ddprun::ServeMasterMetrics(**master, counts, http);
    if (!served.ok()) {
      spdlog::error("{}", std::string(served.status().message()));
      return kExitCannotServe;
    }
    metrics = std::move(*served);
    spdlog::info("metrics and the status page on http://{}:{}/", s.host, metrics->port());
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  metrics.reset();
  spdlog::info("received {}: shutting down (grace {}s)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               s.grace_seconds);
  (*master)->Shutdown(absl::Seconds(s.grace_seconds));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ddprun::DisableMutexDeadlockDetection();
  CLI::App app("ddprun-master: the ddprun rendezvous master and Store, on its own.",
               "ddprun-master");
  Settings settings;
  DeclareOptions(app, settings);
  app.set_version_flag("--version", absl::StrCat("ddprun-master ", DDPRUN_VERSION),
                       "Print ddprun-master's version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::puts(app.version().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    return UsageError(absl::StrCat(e.what(), "; see ddprun-master --help"));
  }
  ConfigureLogging(settings.verbose);
  // Every agent and worker of every run may hold a connection: not the usual 1,024.
  const long open_files = ddprun::RaiseOpenFileLimit();
  if (open_files >= 0 && open_files < 4096) {
    spdlog::warn(
        "this master may hold only {} open files (ulimit -n): enough for about as "
        "many agents and workers together; raise the hard limit for large jobs",
        open_files);
  }
  absl::StatusOr<ddprun::MasterOptions> options = MasterOptionsFrom(settings);
  if (!options.ok()) return UsageError(std::string(options.status().message()));
  return Serve(settings, *options);
}
