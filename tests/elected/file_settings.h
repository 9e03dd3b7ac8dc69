#pragma once
// The "files" backend's settings (elected_backend_test.cc): the folder its store is in.

#include <string>

#include "absl/time/time.h"
#include "rendezvous/backend_settings.h"

namespace ddprun {

struct FileSettings : BackendSettings {
  std::string folder;  // --rdzv-endpoint
  absl::Duration lease_ttl = absl::Seconds(2);
};

}  // namespace ddprun
