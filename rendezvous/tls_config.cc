#include "rendezvous/tls_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/small_file.h"

namespace ddprun {
absl::StatusOr<TlsConfig> ReadTlsFiles(const std::string& cert_path, const std::string& key_path,
                                       const std::string& ca_path, const std::string& setting) {
  TlsConfig tls;
  const int given = !cert_path.empty() + !key_path.empty() + !ca_path.empty();
  if (given == 0) return tls;
  if (given != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(setting,
                     ": TLS needs all three of tls_cert, tls_key and tls_ca (this side's "
                     "certificate, its key, and the CA that signed the other side's)"));
  }
  absl::StatusOr<std::string> cert = ReadPemFile(cert_path, setting + " tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPemFile(key_path, setting + " tls_key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> ca = ReadPemFile(ca_path, setting + " tls_ca");
  if (!ca.ok()) return ca.status();
  tls.cert_pem = *cert;
  tls.key_pem = *key;
  tls.ca_pem = *ca;
  tls.cert_path = cert_path;
  tls.key_path = key_path;
  tls.ca_path = ca_path;
  return tls;
}

}  // namespace ddprun
