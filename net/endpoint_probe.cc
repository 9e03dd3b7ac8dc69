#include "net/endpoint_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

struct HostAndPort {
  std::string host;
  std::string port;
};

HostAndPort Split(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return {endpoint, ""};
  std::string host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, endpoint.substr(colon + 1)};
}

// One address: refused, listening, or no answer within `timeout`.
EndpointReach Connect(const addrinfo& address, absl::Duration timeout) {
  UniqueFd fd(::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       address.ai_protocol));
  if (!fd.valid()) return {EndpointReach::Kind::kNoAnswer, strerror(errno)};
  int error = 0;
  if (::connect(fd.get(), address.ai_addr, address.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      error = errno;
    } else {
      pollfd writable = {fd.get(), POLLOUT, 0};
      const int ms = static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
      if (::poll(&writable, 1, ms) <= 0) return {EndpointReach::Kind::kNoAnswer, "timed out"};
      socklen_t length = sizeof error;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    }
  }
  return {ReachOfConnectError(error), error == 0 ? "it accepted a connection" : strerror(error)};
}

}  // namespace

EndpointReach::Kind ReachOfConnectError(int error) {
  switch (error) {
    case 0:
      return EndpointReach::Kind::kListens;
    // A reset answers as a refusal does: from the host's own kernel. A listener that a
    // SIGKILL is closing resets the connections in its queue, which a probe made in the same
    // millisecond sees (a leader's node killed: its followers must not take that for a cut).
    case ECONNREFUSED:
    case ECONNRESET:
      return EndpointReach::Kind::kRefused;
    default:
      return EndpointReach::Kind::kNoAnswer;
  }
}

EndpointReach ProbeEndpoint(const std::string& endpoint, absl::Duration timeout) {
  const HostAndPort where = Split(endpoint);
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(where.host.c_str(), where.port.c_str(), &hints, &found);
      rc != 0) {
    return {EndpointReach::Kind::kUnresolved, gai_strerror(rc)};
  }
  // The best answer of any address the name has: a listener, then a refusal, then silence.
  EndpointReach best{EndpointReach::Kind::kNoAnswer, "no address"};
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    EndpointReach reach = Connect(*a, timeout);
    if (reach.kind == EndpointReach::Kind::kListens) {
      best = reach;
      break;
    }
    if (reach.kind == EndpointReach::Kind::kRefused || best.detail == "no address") best = reach;
  }
  ::freeaddrinfo(found);
  return best;
}

std::string DescribeUnansweredMaster(const std::string& endpoint, const EndpointReach& reach,
                                     const std::string& named_by) {
  const HostAndPort where = Split(endpoint);
  switch (reach.kind) {
    case EndpointReach::Kind::kRefused:
      return absl::StrCat("nothing listens on port ", where.port, " of ", where.host, " (",
                          reach.detail, "): is the rendezvous master up there, and ",
                          absl::StrContains(named_by, " and ") ? "are " : "is ", named_by,
                          " right?");
    case EndpointReach::Kind::kListens:
      return absl::StrCat("something listens on ", endpoint,
                          " but does not answer as a ddprun rendezvous master: another program "
                          "holds the port, or the master's TLS settings differ from this "
                          "node's");
    case EndpointReach::Kind::kUnresolved:
      return absl::StrCat(where.host, " does not resolve here (", reach.detail, ")");
    case EndpointReach::Kind::kNoAnswer:
      break;
  }
  return absl::StrCat(endpoint, " does not answer (", reach.detail,
                      "): is the host up, and its port ", where.port, " open to this node?");
}

}  // namespace ddprun
