#include "net/leader_follower.h"

#include <poll.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/run_memory_wire.h"
#include "spdlog/spdlog.h"

namespace ddprun {

LeaderFollower::LeaderFollower(NetworkRendezvousOptions options, std::string store,
                               std::string where)
    : options_(std::move(options)), store_(std::move(store)), where_(std::move(where)) {}

void LeaderFollower::SetLeader(const std::string& address) {
  {
    absl::MutexLock lock(&mu_);
    if (leader_ == address) return;
    leader_ = address;
  }
  events_.Wake();
}

void LeaderFollower::FollowLeader() {
  std::string leader;
  {
    absl::MutexLock lock(&mu_);
    leader = leader_;
  }
  if (leader.empty() || leader == target_) return;
  target_ = leader;
  if (session_ == nullptr) {
    NetworkRendezvousOptions options = options_;
    options.endpoint = leader;
    session_ = std::make_unique<GrpcRendezvous>(options, &events_);
    if (waiting_join_) session_->Join(*std::exchange(waiting_join_, std::nullopt));
    return;
  }
  session_->Retarget(leader);  // its last report stays, for the resume
  if (asking_back_) {
    // The agent asks for its place back already: the new leader's master is asked now.
    session_->Join(*asking_back_);
    return;
  }
  // The session with the last leader's master is over (it died or stepped down): the agent
  // takes its master for lost, reconnects (to this leader) and asks for its place back.
  RendezvousEvent moved;
  moved.kind = RendezvousEvent::Kind::kLost;
  moved.status =
      absl::UnavailableError(absl::StrCat("the run's leader moved to ", leader, " (", store_, ")"));
  events_.Push(std::move(moved));
}

std::vector<RendezvousEvent> LeaderFollower::TakeEvents() {
  std::vector<RendezvousEvent> events = events_.Take();
  for (const RendezvousEvent& event : events) {
    using Kind = RendezvousEvent::Kind;
    if (event.kind == Kind::kEnd || event.kind == Kind::kRefused) {
      // Ended for every node (not only released from this one): its keys may go.
      RunOver(event.kind == Kind::kEnd && event.outcome != RunOutcome::kReleased);
    }
    if (event.kind != Kind::kLost && event.kind != Kind::kProgress && event.kind != Kind::kReach) {
      asking_back_.reset();  // a master answered
    }
    if (event.kind == Kind::kLost) MasterLost();
    if (event.kind == Kind::kAssigned && !event.assignment.run_incarnation.empty()) {
      PlacedIn(event.assignment.run_incarnation);
    }
  }
  FollowLeader();
  return events;
}

void LeaderFollower::Join(const NodeInfo& node) {
  asking_back_.reset();
  if (node.resume) asking_back_ = node;
  FollowLeader();
  if (session_ == nullptr) {
    waiting_join_ = node;  // sent once a leader is known
    return;
  }
  session_->Join(node);
}

void LeaderFollower::Reconnect() {
  std::string leader;
  {
    absl::MutexLock lock(&mu_);
    leader = leader_;
  }
  if (!leader.empty() && leader != target_ && session_ != nullptr) {
    target_ = leader;
    session_->Retarget(leader);
    return;
  }
  if (session_ != nullptr) session_->Reconnect();
}

void LeaderFollower::CloseSession() {
  session_.reset();  // its Bye goes to the leader: this node is gone, not away
  RunOver(/*ended_for_all=*/false);
}

std::string LeaderFollower::store_addr() const {
  if (!target_.empty()) return target_;
  return absl::StrCat("the run's leader, elected in ", where_);
}

void LeaderFollower::CheckProgress() {
  if (session_ != nullptr) return session_->CheckProgress();
  CheckElection();
}

void LeaderFollower::ReportFailure(int64_t round, std::vector<ReportedFailure> failures) {
  if (session_ != nullptr) session_->ReportFailure(round, std::move(failures));
}
void LeaderFollower::ReportSuccess(int64_t round) {
  if (session_ != nullptr) session_->ReportSuccess(round);
}
void LeaderFollower::ReportStopped(int64_t round) {
  if (session_ != nullptr) session_->ReportStopped(round);
}
void LeaderFollower::Heartbeat() {
  if (session_ != nullptr) session_->Heartbeat();
}
void LeaderFollower::ReportStacks(int64_t round, int world_size, const std::string& cause,
                                  const std::vector<RankStack>& stacks) {
  if (session_ != nullptr) session_->ReportStacks(round, world_size, cause, stacks);
}
void LeaderFollower::Leave(const std::string& reason) {
  if (session_ != nullptr) session_->Leave(reason);
}
void LeaderFollower::ReportRestart(const RestartSplit& split) {
  if (session_ != nullptr) session_->ReportRestart(split);
}
void LeaderFollower::ReportOutage(int64_t round, absl::Duration lost) {
  if (session_ != nullptr) session_->ReportOutage(round, lost);
}
void LeaderFollower::CheckReach(const std::string& store) {
  if (session_ != nullptr) session_->CheckReach(store);
}

bool EverySessionEnds(const HostedMaster& master, const std::string& run_id, absl::Time deadline) {
  for (;;) {
    if (master.SessionCount(run_id) == 0) return true;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd fd = {master.session_end_fd(), POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) < 0 &&
        errno != EINTR) {
      return false;
    }
    uint64_t count = 0;
    (void)!::read(master.session_end_fd(), &count, sizeof count);
  }
}

std::optional<RunMemory> TakeOver(const std::string& bytes, const std::string& placed_in,
                                  const std::string& run_id, const std::string& store,
                                  const std::string& key) {
  absl::StatusOr<RunMemory> memory = RunMemoryFromBytes(bytes);
  if (!memory.ok()) {
    spdlog::warn("run '{}': ignored what its last leader left in {} at {}: {}", run_id, store, key,
                 std::string(memory.status().message()));
    return std::nullopt;
  }
  if (memory->run_incarnation.empty() || memory->run_incarnation != placed_in) {
    spdlog::warn(
        "run '{}': {} holds another run's state at {} (run {}, {} restarts spent, {} nodes' "
        "records), which this node {}: not taken over; this run starts with its whole budget. "
        "An earlier job of this --rdzv-id that did not end (every node killed) left it; a "
        "new --rdzv-id per job keeps jobs apart",
        run_id, store, key, memory->run_incarnation.empty() ? "unstamped" : memory->run_incarnation,
        memory->restarts_spent, memory->nodes.size(),
        placed_in.empty() ? "was never placed in a round of" : "was not in");
    return std::nullopt;
  }
  return *std::move(memory);
}

}  // namespace ddprun
