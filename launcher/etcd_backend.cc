#include "launcher/etcd_backend.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/listen_socket.h"
#include "common/small_file.h"
#include "common/status_macros.h"
#include "launcher/cli_values.h"
#include "launcher/option_values.h"
#include "launcher/rendezvous_start.h"
#include "net/etcd_settings.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

constexpr int kEtcdPort = 2379;  // etcd's client port

// This backend's settings in `config`, made on first use (AgentConfig::backend).
EtcdSettings& Etcd(AgentConfig& config) {
  if (config.backend == nullptr) config.backend = std::make_shared<EtcdSettings>();
  return static_cast<EtcdSettings&>(*config.backend);
}

std::string ConfValue(const AgentConfig& config, const char* key) {
  auto it = config.rdzv_conf.find(key);
  return it == config.rdzv_conf.end() ? std::string() : it->second;
}

// A file key under torchrun etcd backend's name, else its etcd-v2 backend's (ca_cert,
// ssl_cert, ssl_cert_key).
std::string FileKey(const AgentConfig& config, const char* name, const char* v2_name) {
  const std::string value = ConfValue(config, name);
  return value.empty() ? ConfValue(config, v2_name) : value;
}

// --rdzv-endpoint=etcd1:2379,etcd2,http://etcd3:2379: each member as "host:port". A URL's
// scheme is accepted as etcd's own tools write endpoints; https:// asks for TLS.
absl::Status ParseMembers(const std::string& value, EtcdSettings& etcd) {
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    std::string member(absl::StripAsciiWhitespace(item));
    if (absl::StartsWith(member, "https://")) etcd.https = true;
    for (const char* scheme : {"http://", "https://"}) {
      if (absl::StartsWith(member, scheme)) member.erase(0, std::string(scheme).size());
    }
    if (!member.empty() && member.back() == '/') member.pop_back();
    absl::StatusOr<Endpoint> endpoint = ParseEndpoint(member, kEtcdPort);
    if (!endpoint.ok() || member.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rdzv-endpoint='", value,
                       "' is not valid with --rdzv-backend=etcd-v3: expected "
                       "etcd's members as HOST[:PORT],HOST[:PORT],... (default port 2379)"));
    }
    etcd.endpoints.push_back(HostPort(endpoint->host, endpoint->port));
  }
  return absl::OkStatus();
}

// The files --rdzv-conf names: etcd's CA, this node's client certificate, the password.
absl::Status ReadEtcdFiles(AgentConfig& config) {
  EtcdSettings& etcd = Etcd(config);
  const std::string cacert = FileKey(config, "cacert", "ca_cert"),
                    cert = FileKey(config, "cert", "ssl_cert"),
                    key = FileKey(config, "key", "ssl_cert_key");
  if ((!cacert.empty() || !cert.empty()) && !etcd.https) {
    return absl::InvalidArgumentError(
        "--rdzv-conf cacert, cert and key are for etcd over TLS: add protocol=https");
  }
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv-conf cert and key go together: this node's client certificate and its key");
  }
  if (!cacert.empty()) {
    DDPRUN_ASSIGN_OR_RETURN(etcd.ca_pem, ReadPemFile(cacert, "--rdzv-conf cacert"));
  }
  if (!cert.empty()) {
    DDPRUN_ASSIGN_OR_RETURN(etcd.cert_pem, ReadPemFile(cert, "--rdzv-conf cert"));
    DDPRUN_ASSIGN_OR_RETURN(etcd.key_pem, ReadPemFile(key, "--rdzv-conf key"));
  }
  const std::string password_file = ConfValue(config, "etcd_password_file");
  if (etcd.user.empty() != password_file.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv-conf etcd_user and etcd_password_file go together: the etcd user this node "
        "authenticates as, and a file holding its password");
  }
  if (!password_file.empty()) {
    DDPRUN_ASSIGN_OR_RETURN(etcd.password,
                            ReadTokenFile(password_file, "--rdzv-conf etcd_password_file"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckEtcdTokenHasTls(const AgentConfig& config) {
  if (config.token.empty() || config.tls.enabled()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "--rdzv-backend=etcd-v3 with a token (DDPRUN_RDZV_TOKEN or --rdzv-conf token_file) needs "
      "TLS to the run's leader (--rdzv-conf tls_cert=,tls_key=,tls_ca=): its address is read "
      "from etcd, and without TLS whoever can write the run's keys there is sent the token; give "
      "every node the TLS files, or run without a token (docs/security.md#etcd-v3)");
}

namespace {

absl::Status CheckEtcd(const OptionValues& values, AgentConfig& config) {
  if (config.rendezvous.max_nodes == 1) {
    // One node needs no etcd, and the endpoint names etcd's members, not the workers' store
    // (etcd's own port): rank 0's worker hosts the store on a free port, as under torchrun's
    // etcd backends.
    config.rdzv_endpoint.clear();
    return absl::OkStatus();
  }
  DDPRUN_RETURN_IF_ERROR(CheckEtcdTokenHasTls(config));
  if (config.rdzv_endpoint.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes=", values["--nnodes"], " with --rdzv-backend=", config.rdzv_backend,
                     " needs --rdzv-endpoint=HOST[:PORT],...: etcd's members (default port 2379)"));
  }
  Etcd(config).endpoints.clear();
  DDPRUN_RETURN_IF_ERROR(ParseMembers(config.rdzv_endpoint, Etcd(config)));
  DDPRUN_RETURN_IF_ERROR(ReadEtcdFiles(config));
  // Where the store address rules look: the first member (store/store_address.h).
  DDPRUN_ASSIGN_OR_RETURN(Endpoint first, ParseEndpoint(Etcd(config).endpoints[0], kEtcdPort));
  config.endpoint_host = first.host;
  config.endpoint_port = first.port;
  return absl::OkStatus();
}

std::unique_ptr<StartedRendezvous> StartEtcd(const RendezvousBackend& backend,
                                             const AgentConfig& config, int& exit_code) {
  if (config.rdzv_backend != "etcd-v3" && config.rendezvous.max_nodes > 1) {
    spdlog::warn(
        "--rdzv-backend={} uses etcd's v3 API (etcd 3.4 or later), as etcd-v3 does: torchrun's "
        "etcd backends spoke v2, which etcd 3.6 removed",
        config.rdzv_backend);
  }
  return StartRendezvous(backend, config, "--rdzv-endpoint", exit_code);
}

absl::Status Protocol(const std::string& option, const std::string& value, AgentConfig& config) {
  const std::string v = absl::AsciiStrToLower(value);
  if (v != "http" && v != "https") return InvalidValue(option, value, "http or https");
  Etcd(config).https = v == "https";
  return absl::OkStatus();
}

absl::Status Prefix(const std::string& option, const std::string& value, AgentConfig& config) {
  std::string prefix = value;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.empty()) return InvalidValue(option, value, "a key prefix such as /ddprun");
  Etcd(config).prefix = prefix;
  return absl::OkStatus();
}

absl::Status User(const std::string& option, const std::string& value, AgentConfig& config) {
  if (value.empty()) return InvalidValue(option, value, "an etcd user name");
  Etcd(config).user = value;
  return absl::OkStatus();
}

absl::Status LeaseTtl(const std::string& option, const std::string& value, AgentConfig& config) {
  DDPRUN_ASSIGN_OR_RETURN(absl::Duration ttl, ParseSeconds(option, value, /*positive=*/true));
  if (ttl < absl::Seconds(2) || ttl > absl::Hours(1)) {
    return InvalidValue(option, value, "seconds from 2 to 3600");
  }
  Etcd(config).lease_ttl = absl::Ceil(ttl, absl::Seconds(1));  // etcd's leases are whole seconds
  return absl::OkStatus();
}

std::vector<RdzvConfKey> EtcdKeys() {
  return {
      {"protocol", "http", "etcd-v3: http, or https for etcd over TLS", Protocol},
      {"cacert", "none", "etcd-v3: the CA that signs etcd's certificate (protocol=https)", nullptr},
      {"cert", "none", "etcd-v3: this node's client certificate for etcd (with key)", nullptr},
      {"key", "none", "etcd-v3: the key of cert", nullptr},
      {"ca_cert", "none", "etcd-v3: torchrun etcd-v2's name for cacert", nullptr},
      {"ssl_cert", "none", "etcd-v3: torchrun etcd-v2's name for cert", nullptr},
      {"ssl_cert_key", "none", "etcd-v3: torchrun etcd-v2's name for key", nullptr},
      {"etcd_prefix", "/ddprun", "etcd-v3: the key prefix every run's keys are under", Prefix},
      {"etcd_user", "none", "etcd-v3: the etcd user to authenticate as (with etcd_password_file)",
       User},
      {"etcd_password_file", "none", "etcd-v3: a file holding etcd_user's password", nullptr},
      {"lease_ttl", "5",
       "etcd-v3: seconds the run's leader holds its place after it stops renewing it: how soon "
       "a dead or cut-off leader is replaced",
       LeaseTtl},
  };
}

// Its password file readable by others, or its password sent in clear text.
void NoteEtcdSecrets(const AgentConfig& config, std::vector<std::string>& notices) {
  if (auto it = config.rdzv_conf.find("etcd_password_file"); it != config.rdzv_conf.end()) {
    const std::string said = ExposedSecretFile(it->second, "--rdzv-conf etcd_password_file");
    if (!said.empty()) notices.push_back(said);
  }
  const auto* etcd = dynamic_cast<const EtcdSettings*>(config.backend.get());
  if (etcd == nullptr || etcd->password.empty() || etcd->https) return;
  notices.push_back(
      "--rdzv-conf etcd_password_file with protocol=http: etcd's password crosses the network "
      "in clear text to each member; use protocol=https (with cacert) where the network is "
      "not the job's own");
}

// `ddprun status`/`stop`: the master is wherever the run's leader is; etcd says (the
// plugin's etcd half asks it).
absl::Status FindEtcdRunsMaster(const std::string& endpoint, const std::string& run_id,
                                AgentConfig& config, AdminCommand& command) {
  if (run_id.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv-backend=etcd-v3 needs --rdzv-id: etcd names a leader per run");
  }
  DDPRUN_RETURN_IF_ERROR(EtcdSettingsFor(endpoint, config));
  DDPRUN_RETURN_IF_ERROR(CheckEtcdTokenHasTls(config));
  command.backend = config.backend;
  return absl::OkStatus();
}

}  // namespace

absl::Status EtcdSettingsFor(const std::string& endpoint, AgentConfig& config) {
  config.rdzv_backend = "etcd-v3";
  DDPRUN_RETURN_IF_ERROR(ApplyRdzvConf(config.rdzv_conf, config, EtcdKeys()));
  DDPRUN_RETURN_IF_ERROR(ParseMembers(endpoint, Etcd(config)));
  return ReadEtcdFiles(config);
}

std::vector<RendezvousBackend> EtcdBackends() {
  std::vector<RendezvousBackend> backends;
  // etcd and etcd-v2 are torchrun's names: their command lines work, on the v3 API.
  for (const char* name : {"etcd-v3", "etcd", "etcd-v2"}) {
    const bool listed = std::string(name) == "etcd-v3";
    RendezvousBackend etcd{name, CheckEtcd, StartEtcd, HostingRule::kElected, EtcdKeys(), listed};
    etcd.network = kEtcdNetwork;
    etcd.find_master = FindEtcdRunsMaster;
    etcd.several_endpoints = true;
    etcd.note_secrets = NoteEtcdSecrets;
    backends.push_back(std::move(etcd));
  }
  return backends;
}

}  // namespace ddprun
