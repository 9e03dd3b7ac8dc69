#include "common/ip_address.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace ddprun {

absl::Status CheckResolves(const std::string& host, absl::string_view what) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  const int error = ::getaddrinfo(host.c_str(), nullptr, &hints, &resolved);
  if (error == 0) {
    ::freeaddrinfo(resolved);
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat(what, " '", host, "' does not resolve on this node (",
                   error == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(error),
                   "): check the name, or give an IP address"));
}

std::string PeerAddress(absl::string_view peer) {
  if (absl::ConsumePrefix(&peer, "ipv4:")) {
    const size_t colon = peer.rfind(':');
    return std::string(colon == absl::string_view::npos ? peer : peer.substr(0, colon));
  }
  if (!absl::ConsumePrefix(&peer, "ipv6:")) return "";
  // gRPC percent-encodes the brackets (and a zone's '%'): "ipv6:%5B::1%5D:port".
  std::string decoded = absl::StrReplaceAll(peer, {{"%5B", "["}, {"%5D", "]"}, {"%25", "%"}});
  absl::string_view host = decoded;
  if (!absl::ConsumePrefix(&host, "[")) return "";
  const size_t end = host.find(']');
  if (end == absl::string_view::npos) return "";
  return std::string(host.substr(0, end));
}

std::string CanonicalIp(absl::string_view text) {
  const std::string address(text.substr(0, text.find('%')));  // an IPv6 zone is not the address
  char out[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return ::inet_ntop(AF_INET, &v4, out, sizeof out) != nullptr ? out : "";
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) return "";
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    return ::inet_ntop(AF_INET, &v6.s6_addr[12], out, sizeof out) != nullptr ? out : "";
  }
  return ::inet_ntop(AF_INET6, &v6, out, sizeof out) != nullptr ? out : "";
}

bool IsLoopbackOrUnspecified(absl::string_view addr) {
  const std::string text(addr.substr(0, addr.find('%')));  // an IPv6 zone is not the address
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    const uint32_t host = ntohl(v4.s_addr);
    return (host >> 24) == 127 || host == 0;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6) || IN6_IS_ADDR_UNSPECIFIED(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

bool IsHostOrAddressText(absl::string_view text) {
  if (text.empty() || text.size() > 255) return false;
  for (char c : text) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':' && c != '%' && c != '[' && c != ']') {
      return false;
    }
  }
  return true;
}

}  // namespace ddprun
