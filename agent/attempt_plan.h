#pragma once
// AttemptPlan: what the whole node's part of the job looks like in one round, as the agent
// sets it up before starting its workers (the rendezvous's assignment and where this node's
// store, logs and timers are). With the AgentConfig and the worker, it is all a worker's
// environment is made of (worker_env.h).

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "rendezvous/hang_timings.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

struct AttemptPlan {
  Assignment assignment;       // the round, as the rendezvous assigned it to this node
  int log_attempt = 0;         // attempt_<n> folder: the round, after any attempts of earlier runs
  bool agent_store = false;    // the agent serves the workers' TCPStore at MASTER_ADDR:MASTER_PORT
  std::string gloo_interface;  // GLOO_SOCKET_IFNAME, unless set; empty: none
  std::string store_addr;      // host:port of the master's Store service; empty: none
  std::string store_token_file;  // see StoreTokenFile; empty: none
  std::string log_root;          // the log dir in use ("" or /dev/null: no files)
  // The run's folder under it, held open (LogRoot::run_dir): files are made below it.
  std::string log_run_path;
  std::shared_ptr<const UniqueFd> log_run_dir;
  int timer_fifo = -1;  // the agent's FileTimer FIFO (TimerFifo); -1: none
  // Workers are Python with faulthandler on (PYTHONFAULTHANDLER): SIGABRT makes them print
  // every thread's traceback on stderr.
  bool python_dumps = false;
  absl::Duration stack_dump_bound = HangTimings().dump_bound;
};

}  // namespace ddprun
