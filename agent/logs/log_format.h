#pragma once
// Lets spdlog/fmt print absl::string_view (Debian's Abseil has its own string_view type, so
// absl::Status::message() is not a std::string_view).

#include "absl/strings/string_view.h"
#include "spdlog/fmt/fmt.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
