#include "node/host_info.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "common/ip_address.h"
#include "common/unique_fd.h"

namespace ddprun {

absl::StatusOr<int> FindFreePort() {
  // Dual-stack when IPv6 exists, so the port is free for both families; IPv4 otherwise.
  UniqueFd sock(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.valid()) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    socklen_t len = sizeof(addr);
    if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
        ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      return ntohs(addr.sin6_port);
    }
  }
  sock.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return ErrnoStatus(errno, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoStatus(errno, "cannot find a free TCP port for MASTER_PORT");
  }
  return ntohs(addr.sin_port);
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

namespace {

std::string AddressText(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof(text));
  } else if (addr->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text,
                sizeof(text));
  }
  return text;
}

// The addresses `name` resolves to here, as text; none when it does not resolve.
std::vector<std::string> ResolvedAddresses(const std::string& name) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  std::vector<std::string> addresses;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &resolved) != 0) return addresses;
  for (addrinfo* a = resolved; a != nullptr; a = a->ai_next)
    addresses.push_back(AddressText(a->ai_addr));
  ::freeaddrinfo(resolved);
  return addresses;
}

// Each address of this host's interfaces, with its interface.
std::vector<std::pair<std::string, NetworkInterface>> OwnAddresses() {
  std::vector<std::pair<std::string, NetworkInterface>> own;
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return own;
  for (ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    own.push_back({AddressText(i->ifa_addr), {i->ifa_name, (i->ifa_flags & IFF_LOOPBACK) != 0}});
  }
  ::freeifaddrs(interfaces);
  return own;
}

}  // namespace

std::vector<std::string> OwnIpAddresses(size_t limit) {
  std::vector<std::string> out;
  for (const auto& [address, interface] : OwnAddresses()) {
    if (out.size() >= limit) break;
    const std::string ip = CanonicalIp(address);
    if (ip.empty() || IsLoopbackOrUnspecified(ip)) continue;
    if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
  }
  return out;
}

bool ResolvesBeyondLoopback(const std::string& name) {
  for (const std::string& address : ResolvedAddresses(name)) {
    if (!IsLoopbackOrUnspecified(address)) return true;
  }
  return false;
}

NetworkInterface InterfaceHolding(const std::string& local_address) {
  if (local_address.empty()) return {};
  for (const auto& [address, interface] : OwnAddresses()) {
    if (address == local_address) return interface;
  }
  return {};
}

NetworkInterface InterfaceToward(const std::string& addr) {
  return InterfaceHolding(AddressToward(addr));
}

std::string AddressToward(const std::string& addr) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* resolved = nullptr;
  if (::getaddrinfo(addr.c_str(), "9", &hints, &resolved) != 0) return {};
  std::string local;
  for (addrinfo* a = resolved; a != nullptr && local.empty(); a = a->ai_next) {
    UniqueFd sock(::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_storage self{};
    socklen_t len = sizeof self;
    if (sock.valid() && ::connect(sock.get(), a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&self), &len) == 0) {
      local = AddressText(reinterpret_cast<sockaddr*>(&self));
    }
  }
  ::freeaddrinfo(resolved);
  return local;
}

bool IsThisHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  // This host's name, or a longer name that starts with it (a Kubernetes pod's
  // <hostname>.<subdomain>): known without DNS, whose record for it may not exist yet.
  const std::string name = HostName();
  if (host == name || host.rfind(name + ".", 0) == 0) return true;
  std::set<std::string> own;
  for (const auto& [address, interface] : OwnAddresses()) own.insert(address);
  for (const std::string& address : ResolvedAddresses(host)) {
    if (own.count(address) > 0 || IsLoopbackOrUnspecified(address)) return true;
  }
  return false;
}

}  // namespace ddprun
