#pragma once
// TCP listening sockets, and accepting on them in a way that survives running out of file
// descriptors: gRPC 1.51's own listener stops for good after one EMFILE (grpc/grpc#16058),
// and a level-triggered loop that leaves the connection waiting spins on it.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ddprun {

/// "host:port", an IPv6 address in brackets ("[::1]:29400"): how addresses are written to
/// connect to, listen on, and show.
std::string HostPort(const std::string& host, int port);

/// Non-blocking sockets listening at `host`:`port`. `host` empty, "::" or "0.0.0.0": every
/// address (one dual-stack socket, else IPv4); else every address `host` resolves to, all
/// on the same port (port 0: the one the kernel picked for the first). A port in use is
/// Unavailable.
absl::StatusOr<std::vector<UniqueFd>> ListenTcp(const std::string& host, int port);

/// The local port of socket `fd` (0 when it has none).
int BoundPort(int fd);

/// A connection from `listen_fd` (non-blocking, close-on-exec, TCP_NODELAY), or -1 with
/// errno set: EAGAIN when none waits. When this process is out of descriptors (EMFILE, ENFILE), the
/// waiting connection is accepted into `reserve`'s slot and closed, so that the listener
/// neither stays readable forever nor stops; -1 with errno EMFILE then. `reserve` is an
/// open descriptor kept for this (see OpenReserveFd).
int AcceptOrShed(int listen_fd, UniqueFd& reserve);

/// A descriptor held in reserve for AcceptOrShed (/dev/null).
UniqueFd OpenReserveFd();

/// Raises this process's soft limit on open files to its hard limit, so that a master with
/// many agents and workers does not stop at the usual 1,024. Returns the limit now (-1:
/// none).
long RaiseOpenFileLimit();

/// Sets the soft limit back to what it was before RaiseOpenFileLimit (if it was called): in
/// a worker between clone and exec (async-signal-safe), so that workers see the limit they
/// would have had without ddprun.
void RestoreOpenFileLimit();

}  // namespace ddprun
