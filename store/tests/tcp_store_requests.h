#pragma once
// Test helper: a TCPStore client's request bytes, as PyTorch's clients write them.

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "store/tcp_store_protocol.h"

namespace ddprun::tcpstore::testing {

class RequestBytes {
 public:
  RequestBytes(Verb verb, Dialect dialect) {
    bytes_ += static_cast<char>(QueryCode(verb, dialect));
  }
  RequestBytes& Str(absl::string_view s) {
    U64(s.size());
    bytes_.append(s.data(), s.size());
    return *this;
  }
  RequestBytes& U64(uint64_t v) { return Raw(&v, sizeof v); }
  RequestBytes& I64(int64_t v) { return Raw(&v, sizeof v); }
  RequestBytes& U32(uint32_t v) { return Raw(&v, sizeof v); }
  operator std::string() const { return bytes_; }  // NOLINT: reads as the bytes it built

 private:
  RequestBytes& Raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

/// What a torch 2.2+ client sends first on every connection.
inline std::string ValidateBytes() {
  return RequestBytes(Verb::kValidate, Dialect::kValidated).U32(kValidationMagic);
}

/// "\x01\x02" -> the bytes; for writing down captured traffic.
inline std::string Hex(absl::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

}  // namespace ddprun::tcpstore::testing
