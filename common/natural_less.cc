#include "common/natural_less.h"

#include "absl/strings/ascii.h"

namespace ddprun {

bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (absl::ascii_isdigit(a[i]) && absl::ascii_isdigit(b[j])) {
      size_t i_end = i, j_end = j;
      while (i_end < a.size() && absl::ascii_isdigit(a[i_end])) ++i_end;
      while (j_end < b.size() && absl::ascii_isdigit(b[j_end])) ++j_end;
      // Compare the numbers without converting: skip leading zeros, then length, then digits.
      size_t i_sig = i, j_sig = j;
      while (i_sig + 1 < i_end && a[i_sig] == '0') ++i_sig;
      while (j_sig + 1 < j_end && b[j_sig] == '0') ++j_sig;
      const size_t i_len = i_end - i_sig, j_len = j_end - j_sig;
      if (i_len != j_len) return i_len < j_len;
      const int cmp = a.compare(i_sig, i_len, b, j_sig, j_len);
      if (cmp != 0) return cmp < 0;
      i = i_end;
      j = j_end;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    ++i;
    ++j;
  }
  return (a.size() - i) < (b.size() - j);
}

}  // namespace ddprun
