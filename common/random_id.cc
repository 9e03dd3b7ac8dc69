#include "common/random_id.h"

#include <random>

#include "absl/strings/str_format.h"

namespace ddprun {

std::string RandomId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x%08x%08x", rd(), rd(), rd(), rd());
}

}  // namespace ddprun
