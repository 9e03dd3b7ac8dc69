#pragma once
// WorkerSupervisor: the workers of one attempt on this node. Mechanism only: it starts them,
// routes their output, records how each one ended, and does what the agent's rules ask
// (stop, kill, freeze, collect stacks, kill the hung). It decides nothing and does no waiting
// of its own: the agent's event loop calls it when something happens, and it tells the
// agent what the hang watch found and when the stacks are in (Hooks).
//
// Each worker's state:
//   running --(exit)--> succeeded | failed | stopped (ended by the agent's stop)
//   running --(Freeze)--> frozen --(stacks taken: continued)--> running
//   running --(taken for hung)--> hung --(KillHung, or the dump's SIGABRT)--> failed
//                                        (stopped on an unhealthy node)

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/agent_config.h"
#include "agent/agent_state_machine.h"
#include "agent/attempt_plan.h"
#include "agent/failure_summary.h"
#include "agent/hangs/hang_watch.h"
#include "agent/hangs/stack_collection.h"
#include "agent/logs/error_file.h"
#include "agent/logs/line_assembler.h"
#include "agent/logs/log_layout.h"
#include "agent/logs/piped_stream.h"
#include "agent/process/attempt_cgroup.h"
#include "agent/process/orphan_guard.h"
#include "agent/process/warm_pool.h"
#include "agent/process/worker_process.h"
#include "agent/worker_env.h"
#include "agent/worker_outcome.h"
#include "common/event_loop.h"
#include "rendezvous/protocol_words.h"
#include "rendezvous/stack_report.h"

namespace ddprun {

class WorkerSupervisor {
 public:
  using WorkerState = ::ddprun::WorkerState;
  static bool Ended(WorkerState state) {
    return state == WorkerState::kSucceeded || state == WorkerState::kFailed ||
           state == WorkerState::kStopped;
  }

  /// What the agent hears from it, besides exits: both run inside the event loop.
  struct Hooks {
    std::function<void(const FoundHang&)> hang_found;  // a worker was taken for hung
    std::function<void()> stacks_taken;                // CollectStacks is done
  };

  /// `warm_pool`: where workers are forked from (--preload); null: they are started.
  WorkerSupervisor(const AgentConfig& config, const EnvMap& base_env, EventLoop& loop,
                   OrphanGuard& guard, std::string host, Hooks hooks = {},
                   WarmPool* warm_pool = nullptr);
  ~WorkerSupervisor();

  /// Starts every worker. A worker that cannot start counts as failed (with the reason).
  /// While the warm pool still imports, the workers wait for it (waiting_for_pool()): the
  /// agent's loop goes on, and StartPending() starts them once the pool is ready or given up.
  absl::Status Start(const AttemptPlan& plan);
  bool waiting_for_pool() const { return pending_plan_.has_value(); }
  void StartPending();

  /// Handles the exit of `pid` (from waitpid). Returns false if it is not one of ours.
  bool OnProcessExited(pid_t pid, int wait_status);

  /// Sends `signal` to the process group of every running worker.
  void Stop(int signal);
  /// SIGKILL to every worker group that is still running; `why` goes into the log line.
  void KillRemaining(const std::string& why);
  /// Stops every running worker where it is (SIGSTOP), so that none sees another die first,
  /// and declares no more hangs.
  void Freeze();
  /// After Freeze: records where every frozen worker is (a stack per rank, see
  /// StackCollection), after `settle`; Hooks::stacks_taken runs when every dump is in or
  /// AttemptPlan::stack_dump_bound has passed.
  void CollectStacks(absl::Duration settle);
  /// The workers taken for hung get what ends them (a FileTimer's signal, else SIGKILL).
  void KillHung();
  /// After Close(): the stacks CollectStacks recorded (none if it was not called).
  std::vector<RankStack> TakeStacks() { return std::move(stacks_); }
  /// Why a worker of this attempt was taken for hung (the first); empty: none was.
  std::string hang_cause() const;
  /// On request: every running worker's native stack (eu-stack) without stopping them for
  /// longer than the read; `done` gets them. False while an earlier one is being taken.
  bool SnapshotStacks(std::function<void(std::vector<RankStack>)> done);
  /// The workers still running ("workers" when none is known), for the message when
  /// SIGKILL did not end them.
  std::string DescribeRemaining() const;

  /// A stop (or a freeze) began: a worker's end is then its own failure only if no signal
  /// of the agent's ended it.
  bool stopping() const { return stop_signals_ != 0; }
  bool AllExited() const;
  bool AllSucceeded() const;
  /// Failures recorded (workers that failed on their own, not ones the agent stopped), before
  /// any stop began: what the rendezvous is told.
  bool HasFailures() const;

  /// After AllExited(): drains the output pipes, kills whatever the workers left behind in
  /// their process groups or outside them (a stray child of the agent's), and closes
  /// everything.
  void Close();

  /// The failures of this attempt, with error files read and stderr tails attached: also
  /// those of workers that failed on their own during the stop.
  std::vector<WorkerFailure> CollectFailures() const;

  size_t size() const { return workers_.size(); }
  std::vector<pid_t> pids() const;
  /// Each worker as it stands, in local-rank order (for the events, elastic_record_log.h).
  using Outcome = WorkerOutcome;
  std::vector<Outcome> Outcomes() const;

 private:
  // A worker taken for hung (see HangWatch): why, for the failure summary, and what ends it
  // once its stack is recorded. Its end is a failure, unless the node is unhealthy.
  struct TakenForHung {
    std::string cause;
    bool timer = false;           // a FileTimer expired (else: heartbeat or D state)
    bool node_unhealthy = false;  // in uninterruptible sleep
    int signal = SIGKILL;         // what ends it
    pid_t target = 0;             // a FileTimer's process; 0: the worker's group
  };
  struct Worker : Outcome {
    absl::Time exited;        // or when it was taken for hung: when its failure began
    std::string start_error;  // set when the worker could not be started at all
    WorkerLogPaths paths;
    bool error_file_enabled = false;
    bool stderr_in_file = false;  // the stderr tail comes from the log file
    LineTail stderr_tail{20};
    std::unique_ptr<PipedStream> out;
    std::unique_ptr<PipedStream> err;
    std::optional<TakenForHung> hang;
    // It failed after the stop had begun, not of the stop's signal (a rank that raised
    // while its peer's failure was being handled): listed in the summary and a candidate
    // for its root cause, but not a new failure to report.
    bool failed_in_stop = false;
  };

  absl::Status StartWorker(Worker& worker, const AttemptPlan& plan);
  absl::Status SetUpStreams(Worker& worker, int& child_stdout, int& child_stderr,
                            std::vector<UniqueFd>& child_ends);
  // Makes this attempt's cgroup (see AttemptCgroup), or says once why it cannot.
  void GatherInCgroup(int attempt);
  // A worker's log file, below the run's folder (see AttemptPlan::log_run_dir).
  absl::StatusOr<UniqueFd> OpenLogFile(const std::string& path) const;
  absl::Status OpenFilteredLogs(const AttemptPlan& plan);
  static void ReportMempolicyRefused(int error);
  absl::Status SetUpStream(Worker& worker, int which, const std::string& file_path, int& child_fd,
                           std::vector<UniqueFd>& child_ends);
  WorkerFailure DescribeFailure(const Worker& worker) const;
  static bool Alive(const Worker& worker) { return !Ended(worker.state); }
  // Workers still waiting for the pool, when a stop (or a freeze) comes first: they end as
  // stopped by `signal`, never started.
  void AbandonPending(int signal);
  void StartAll(const AttemptPlan& plan);
  bool Failed(const Worker& worker) const;
  bool EndedByStop(int wait_status) const;
  void CloseStream(std::unique_ptr<PipedStream>& stream);
  // Hangs: what HangWatch found, and the stack dump.
  void OnHang(const Hang& hang);
  std::vector<StackCollection::Worker> StackTargets() const;  // every live worker
  void OnStacksTaken();

  const AgentConfig& config_;
  const EnvMap& base_env_;
  EventLoop& loop_;
  OrphanGuard& guard_;
  WarmPool* const warm_pool_;
  std::optional<AttemptPlan> pending_plan_;  // the workers wait for the warm pool's imports
  std::string host_;
  const Hooks hooks_;
  const std::string hostname_;            // ${hostname} in --log-line-prefix-template
  std::vector<ProcessBinding> bindings_;  // per local rank; empty: workers are not bound
  // --duplicate-*-filters: this attempt's filtered_stdout.log and filtered_stderr.log; null:
  // no filters (or no log files).
  std::unique_ptr<DuplicateFilter> filtered_out_, filtered_err_;
  bool files_enabled_ = false;
  std::string log_run_path_;  // see AttemptPlan
  std::shared_ptr<const UniqueFd> log_run_dir_;
  // Every signal this attempt's stop sent (Stop's, and SIGABRT for the Python workers'
  // tracebacks after a hang), as bits: a worker that dies of one of them, or of SIGKILL,
  // was stopped; any other end during a stop is its own.
  uint64_t stop_signals_ = 0;
  std::unique_ptr<AttemptCgroup> cgroup_;  // this attempt's, when the machine allows
  std::unique_ptr<HangWatch> hangs_;
  std::unique_ptr<StackCollection> stacks_taken_;  // made at Start, used after a hang
  std::unique_ptr<StackCollection> snapshot_;      // the last SnapshotStacks
  bool python_dumps_ = false;                      // see AttemptPlan
  absl::Duration dump_bound_;                      // AttemptPlan::stack_dump_bound
  std::vector<RankStack> stacks_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace ddprun
