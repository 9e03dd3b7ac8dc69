#include "rendezvous/node_address.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
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

absl::StatusOr<std::string> ReachableAddress(const NodeInfo& node, absl::string_view peer) {
  if (!node.addr.empty()) return node.addr;
  const std::string seen = PeerAddress(peer);
  if (!seen.empty() && !IsLoopbackOrUnspecified(seen)) return seen;
  if (!node.fallback_addr.empty()) return node.fallback_addr;
  return absl::FailedPreconditionError(absl::StrCat(
      node.host,
      ": no address that the other nodes can reach for MASTER_ADDR, should this "
      "node get group rank 0: it has no --local-addr, its connection to the rendezvous master "
      "comes from ",
      seen.empty() ? absl::StrCat("'", peer, "', which names no address")
                   : seen + ", a loopback address",
      ", and its host name resolves there only to loopback addresses (or not at all); start it "
      "with --local-addr=ADDRESS, an address of this node that the other nodes reach"));
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

absl::Status CheckAssignment(const Assignment& a, int local_world_size) {
  const auto bad = [](absl::string_view field, const auto& value, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the rendezvous master assigned ", field, "=", value, ", which is not valid (", rule,
        "): is the endpoint a ddprun master of the same version, and the only one?"));
  };
  if (a.world_size < 1 || a.world_size > kMaxWorldSize) {
    return bad("WORLD_SIZE", a.world_size, absl::StrCat("1 to ", kMaxWorldSize));
  }
  if (a.base_rank < 0 || int64_t{a.base_rank} + local_world_size > a.world_size) {
    return bad("RANK of LOCAL_RANK 0", a.base_rank,
               absl::StrCat("this node's ", local_world_size, " ranks must lie in [0, ",
                            a.world_size, ")"));
  }
  if (a.group_world_size < 1 || a.group_rank < 0 || a.group_rank >= a.group_world_size) {
    return bad("GROUP_RANK", absl::StrCat(a.group_rank, " of ", a.group_world_size),
               "a rank below the number of nodes");
  }
  if (a.master_port < 1 || a.master_port > 65535)
    return bad("MASTER_PORT", a.master_port, "1-65535");
  if (!IsHostOrAddressText(a.master_addr)) {
    return bad("MASTER_ADDR", absl::StrCat("'", absl::CEscape(a.master_addr), "'"),
               "a host name or an IP address");
  }
  if (a.round < 0 || a.restart_count < 0) {
    return bad("round", absl::StrCat(a.round, " (restart ", a.restart_count, ")"), "not negative");
  }
  return absl::OkStatus();
}

}  // namespace ddprun
