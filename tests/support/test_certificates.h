#pragma once
// Certificates for TLS tests, made with openssl in a test's folder: a CA ("ca"), a node
// certificate it signs for 127.0.0.1 and 127.0.0.2, for server and client use ("node"), and
// a second CA nobody trusts with a node certificate of its own ("rogue-ca", "rogue").
// Each NAME has NAME.pem and NAME.key.

#include "absl/status/status.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {

absl::Status MakeTestCertificates(const TempDir& dir);

}  // namespace ddprun::testing
