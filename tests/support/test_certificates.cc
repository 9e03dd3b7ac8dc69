#include "tests/support/test_certificates.h"

#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"

namespace ddprun::testing {
namespace {

// `name`.key and `name`.pem, signed by `ca`, or a self-signed CA when `ca` is empty. EC keys:
// fast to make.
absl::Status MakeCertificate(const TempDir& dir, const std::string& name, const std::string& ca) {
  const std::string key = dir / (name + ".key");
  const std::string pem = dir / (name + ".pem");
  const std::string new_key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ";
  const std::string script =
      ca.empty()
          ? absl::StrCat("openssl req -x509 ", new_key, key, " -out ", pem,
                         " -days 2 -subj /CN=", name)
          : absl::StrCat(
                "openssl req ", new_key, key, " -out ", dir / (name + ".csr"), " -subj /CN=", name,
                " && printf 'subjectAltName=IP:127.0.0.1,IP:127.0.0.2\\n",
                "extendedKeyUsage=serverAuth,clientAuth\\n' > ", dir / (name + ".ext"),
                " && openssl x509 -req -in ", dir / (name + ".csr"), " -CA ", dir / (ca + ".pem"),
                " -CAkey ", dir / (ca + ".key"), " -CAcreateserial -out ", pem,
                " -days 2 -extfile ", dir / (name + ".ext"));
  ProcessResult r = RunProcess({"/bin/sh", "-c", script}, {}, absl::Seconds(60));
  if (r.exit_code != 0) return absl::InternalError(absl::StrCat("openssl failed: ", r.err));
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeTestCertificates(const TempDir& dir) {
  for (const auto& [name, ca] : {std::pair<const char*, const char*>{"ca", ""},
                                 {"node", "ca"},
                                 {"rogue-ca", ""},
                                 {"rogue", "rogue-ca"}}) {
    if (absl::Status s = MakeCertificate(dir, name, ca); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ddprun::testing
