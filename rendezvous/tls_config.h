#pragma once
// TLS with mutual authentication between agents and the rendezvous master: each side shows
// a certificate signed by a CA the other trusts. The PEM texts, read once at start-up so
// that a bad path is a usage error, not a failed connection later.

#include <string>

#include "absl/status/statusor.h"

namespace ddprun {

struct TlsConfig {
  std::string cert_pem;  // this side's certificate (chain)
  std::string key_pem;   // its private key
  std::string ca_pem;    // the CA(s) whose certificates the other side must show
  // Where they came from (passed on to workers, whose SDK reads them itself).
  std::string cert_path, key_path, ca_path;
  bool enabled() const { return !cert_pem.empty(); }
};

/// Reads the three files; all three paths or none (then TLS is off). `setting` names the
/// option in errors, e.g. "--rdzv-conf tls_cert".
absl::StatusOr<TlsConfig> ReadTlsFiles(const std::string& cert_path, const std::string& key_path,
                                       const std::string& ca_path, const std::string& setting);

}  // namespace ddprun
