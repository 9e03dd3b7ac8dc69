#pragma once
// The exit statuses of ddprun and ddprun-master. A failed job exits with its root-cause worker's
// code instead (128+N when that worker died of signal N), and a signalled agent with 128+signal.

namespace ddprun {

inline constexpr int kExitSuccess = 0;
/// A bad command line or environment default: nothing was started.
inline constexpr int kExitUsage = 2;
/// The agent itself could not run the job (spawn, pipe, signal setup failed).
inline constexpr int kExitInternal = 70;  // EX_SOFTWARE
/// The rendezvous failed: it timed out, refused this node, or the master was lost.
inline constexpr int kExitRendezvous = 75;  // EX_TEMPFAIL

/// ddprun-master could not serve (its address cannot be bound, TLS cannot start).
inline constexpr int kExitCannotServe = 75;  // EX_TEMPFAIL
// This node cannot run workers: one stayed in uninterruptible sleep, or SIGKILL did not end
// it (docs/hangs.md). Restarting here would not help; the scheduler should try another node.
inline constexpr int kExitNodeUnhealthy = 69;  // EX_UNAVAILABLE

/// The job failed because a worker was taken for hung (no heartbeat, a FileTimer, a wedged
/// worker), whatever signal then ended it: 124, as timeout(1) reports a command that ran out
/// of time.
inline constexpr int kExitHung = 124;

/// An operator stopped the job (`ddprun stop`) in a job without a token: anyone who reaches
/// the master could have sent that stop, so it must not look like success to a scheduler.
/// 143 is what a job ended by SIGTERM (scancel, kubectl delete) reports.
inline constexpr int kExitStoppedWithoutToken = 143;

/// The status a shell reports for a process that ended by `signal`.
inline constexpr int ExitCodeForSignal(int signal) { return 128 + signal; }

}  // namespace ddprun
