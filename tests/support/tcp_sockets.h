#pragma once
// Test support: this process's own TCP connections on a port, read from /proc/self/fd, to
// check the options the code under test set on sockets it never shows (gRPC's, a server's);
// and a plain connection to a loopback port, as an idle or slow client holds one.

#include "common/unique_fd.h"

namespace ddprun::testing {

/// A TCP connection to 127.0.0.1:`port`; an empty UniqueFd if it could not be made.
UniqueFd ConnectToLoopback(int port);

struct TcpConnectionsOnPort {
  int accepted = 0;                  // this process's end of a connection accepted on the port
  int accepted_without_nodelay = 0;  // of those, how many lack TCP_NODELAY
  int connected = 0;                 // this process's end of a connection to the port
  int connected_without_nodelay = 0;
};

/// Every connected TCP socket of this process whose local or remote port is `port`.
TcpConnectionsOnPort TcpConnectionsOn(int port);

}  // namespace ddprun::testing
