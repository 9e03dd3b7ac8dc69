#include "tests/support/etcd_server.h"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ddprun::testing {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";
constexpr char kEtcdctl[] = "/usr/bin/etcdctl";
constexpr char kRootPassword[] = "root-password";

}  // namespace

std::unique_ptr<EtcdServer> EtcdServer::Start(const TempDir* certs) {
  if (::access(kEtcd, X_OK) != 0 || ::access(kEtcdctl, X_OK) != 0) {
    ADD_FAILURE() << kEtcd << " or " << kEtcdctl
                  << " is missing: scripts/install-deps.sh installs etcd-server and etcd-client";
    return nullptr;
  }
  std::unique_ptr<EtcdServer> server(new EtcdServer);
  server->client_port_ = FreeLoopbackPort();
  server->peer_port_ = FreeLoopbackPort();
  if (certs != nullptr) server->certs_ = certs->path();
  const std::string client =
      absl::StrCat(certs != nullptr ? "https" : "http", "://127.0.0.1:", server->client_port_);
  const std::string peer = absl::StrCat("http://127.0.0.1:", server->peer_port_);
  std::vector<std::string> argv = {kEtcd,
                                   "--name=test",
                                   "--data-dir=" + server->dir_ / "data",
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer,
                                   "--initial-advertise-peer-urls=" + peer,
                                   "--initial-cluster=test=" + peer,
                                   "--log-level=warn",
                                   "--logger=zap"};
  if (certs != nullptr) {
    argv.insert(argv.end(),
                {"--cert-file=" + (*certs / "node.pem"), "--key-file=" + (*certs / "node.key"),
                 "--trusted-ca-file=" + (*certs / "ca.pem"), "--client-cert-auth"});
  }
  server->process_ = ChildProcess::Start(argv);
  const bool up = WaitUntil(
      [&] {
        return server->Ctl({"endpoint", "health"}).exit_code == 0;
      },
      absl::Seconds(30));
  if (!up) {
    ADD_FAILURE() << "etcd did not answer within 30 s: " << server->process_->ErrSoFar();
    return nullptr;
  }
  return server;
}

EtcdServer::~EtcdServer() {
  if (process_ != nullptr) {
    ::kill(process_->pid(), SIGKILL);
    process_->Wait(absl::Seconds(10));
  }
}

std::string EtcdServer::endpoint() const { return absl::StrCat("127.0.0.1:", client_port_); }

ProcessResult EtcdServer::Ctl(std::vector<std::string> args) const {
  std::vector<std::string> argv = {kEtcdctl, "--endpoints=" + endpoint(), "--dial-timeout=2s",
                                   "--command-timeout=5s"};
  if (auth_) argv.push_back(absl::StrCat("--user=root:", kRootPassword));
  if (!certs_.empty()) {
    argv.insert(argv.end(), {"--cacert=" + certs_ + "/ca.pem", "--cert=" + certs_ + "/node.pem",
                             "--key=" + certs_ + "/node.key"});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, {{"ETCDCTL_API", "3"}}, absl::Seconds(20));
}

int EtcdServer::LeadingNode(const std::string& run) const {
  int node = 0;
  WaitUntil(
      [&] {
        const std::string value =
            Ctl({"get", "--print-value-only", "/ddprun/" + run + "/leader"}).out;
        absl::string_view address = absl::StripAsciiWhitespace(value);
        return absl::ConsumePrefix(&address, "127.0.0.") &&
               absl::SimpleAtoi(address.substr(0, address.find(':')), &node);
      },
      absl::Seconds(30));
  return node;
}

std::string EtcdServer::Keys(const std::string& prefix) const {
  ProcessResult listed = Ctl({"get", "--prefix", "--keys-only", prefix});
  if (listed.exit_code != 0) {
    ADD_FAILURE() << "etcdctl get --prefix " << prefix << ": " << listed.err;
    return "(etcdctl failed)";
  }
  return listed.out;
}

bool EtcdServer::EnableAuth(const std::string& user, const std::string& password,
                            const std::string& prefix) {
  const std::vector<std::vector<std::string>> steps = {
      {"user", "add", "root", absl::StrCat("--new-user-password=", kRootPassword)},
      {"role", "add", "root"},
      {"user", "grant-role", "root", "root"},
      {"user", "add", user, "--new-user-password=" + password},
      {"role", "add", "ddprun"},
      {"role", "grant-permission", "ddprun", "--prefix=true", "readwrite", prefix},
      {"user", "grant-role", user, "ddprun"},
      {"auth", "enable"},
  };
  for (const auto& step : steps) {
    ProcessResult done = Ctl(step);
    if (done.exit_code != 0) {
      ADD_FAILURE() << "etcdctl " << step[0] << " " << step[1] << ": " << done.err;
      return false;
    }
  }
  auth_ = true;
  return true;
}

}  // namespace ddprun::testing
