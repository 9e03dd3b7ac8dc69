#include "common/printable.h"

#include "absl/strings/str_format.h"

namespace ddprun {

std::string Printable(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", byte);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace ddprun
