#include "common/printable.h"

#include "absl/strings/str_format.h"

namespace ddprun {

namespace {

std::string Escaped(absl::string_view text, bool keep_lines) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (keep_lines && (c == '\n' || c == '\t')) {
      out.push_back(c);
    } else if (byte < 0x20 || byte == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", byte);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string Printable(absl::string_view text) { return Escaped(text, /*keep_lines=*/false); }

std::string PrintableLines(absl::string_view text) { return Escaped(text, /*keep_lines=*/true); }

}  // namespace ddprun
