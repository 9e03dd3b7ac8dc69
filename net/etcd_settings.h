#pragma once
// Where the etcd-v3 backend finds etcd, and how it talks to it: the backend's own settings
// (rendezvous/backend_settings.h), filled from --rdzv-endpoint and --rdzv-conf by its
// launcher module (launcher/etcd_backend.cc) and read by the network plugin's etcd half
// (net/etcd_client.h, net/etcd_rendezvous.h). docs/etcd.md has the keys.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/backend_settings.h"

namespace ddprun {

struct EtcdSettings : BackendSettings {
  std::vector<std::string> endpoints;  // "host:port" each: the members the client may call
  bool https = false;                  // protocol=https
  std::string ca_pem;                  // cacert: the CA that signs etcd's certificate
  std::string cert_pem, key_pem;       // cert, key: this node's client certificate
  std::string user;                    // etcd_user; empty: no authentication
  std::string password;                // read from etcd_password_file
  std::string prefix = "/ddprun";      // etcd_prefix: every run's keys are below it
  // How long the run's leader holds its place after it stops renewing it: how soon the
  // others notice a leader that died or was cut off, and elect another.
  absl::Duration lease_ttl = absl::Seconds(5);
};

}  // namespace ddprun
