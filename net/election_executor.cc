#include "net/election_executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "net/endpoint_probe.h"
#include "rpc/run_memory_wire.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

// How long a look at a leader that went silent may take (a TCP connection to its port).
constexpr absl::Duration kLeaderLook = absl::Seconds(1);

}  // namespace

ElectionExecutor::ElectionExecutor(ElectionOptions options, HostMaster host,
                                   ElectionSettings election, StoreNames store)
    : LeaderFollower(options.rendezvous, store.name, store.where),
      options_(std::move(options)),
      host_(host),
      store_(std::move(store)),
      election_(std::move(election)) {}

ElectionExecutor::~ElectionExecutor() = default;

void ElectionExecutor::Begin() {
  thread_ = std::thread([this] { Run(); });
}

void ElectionExecutor::End() {
  EndSession();  // its Bye goes to the leader: this node is gone, not away
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  StopWatch();
  // What was posted before the end is taken in (the master's last memory, the run's end);
  // the election acts no more.
  std::deque<std::function<void()>> inputs;
  {
    absl::MutexLock lock(&mu_);
    inputs.swap(inbox_);
  }
  for (std::function<void()>& input : inputs) input();
  const absl::Time grace_ends = absl::Now() + options_.rendezvous.settings.keep_alive_interval;
  std::unique_ptr<HostedMaster> master = std::move(master_);
  if (master != nullptr) LeaveAsLeader(*master, grace_ends);
  StopKeepAlive();
  if (master != nullptr) {
    options_.on_lead(nullptr);
    hosting_ = nullptr;
    master->Shutdown(std::max(absl::ZeroDuration(), grace_ends - absl::Now()));
  }
  if (election_.lease() != 0) (void)Revoke(election_.lease());
}

// An ended run's keys go with it, so that a long-lived store does not fill up (the other
// agents may not have closed their sessions yet); so do the keys of a run every node left
// (Ctrl-C on each), within the grace the master's shutdown gives their sessions anyway. A
// run that goes on keeps them for the next leader, with what this one remembered last. The
// lease is kept alive meanwhile: a lapse would elect another node while this one still
// decides, and both writes are fenced by this node's key (another's keys stay its own).
void ElectionExecutor::LeaveAsLeader(HostedMaster& master, absl::Time grace_ends) {
  const int64_t revision = election_.leading_revision();
  if (!run_ended_ && !EverySessionEnds(master, options_.rendezvous.run_id, grace_ends)) {
    if (!memory_.empty()) (void)WriteMemory(revision, memory_, absl::InfiniteFuture());
    return;
  }
  RemoveRunKeys(revision);
}

// ---- What the agent's thread posts ----

void ElectionExecutor::Post(std::function<void()> input) {
  absl::MutexLock lock(&mu_);
  inbox_.push_back(std::move(input));
}

void ElectionExecutor::MasterLost() {
  Post([this] { election_.MasterLost(MonotonicNow()); });
}

void ElectionExecutor::RunOver(bool ended_for_all) {
  Post([this, ended_for_all] {
    run_ended_ = run_ended_ || ended_for_all;
    election_.RunOver(MonotonicNow());
  });
}

void ElectionExecutor::PlacedIn(const std::string& incarnation) {
  Post([this, incarnation] { placed_in_run_ = incarnation; });
}

void ElectionExecutor::CheckElection() {
  Post([this] {
    RendezvousEvent progress;
    progress.kind = RendezvousEvent::Kind::kProgress;
    if (election_.problem().empty()) {
      progress.detail = absl::StrCat("the nodes are electing the run's leader in ", store_.name);
    } else {
      progress.status = absl::UnavailableError(absl::StrCat(store_.name, " does not answer"));
      progress.detail = absl::StrCat("no leader yet: ", election_.problem());
    }
    events().Push(std::move(progress));
  });
}

// ---- The election's thread ----

void ElectionExecutor::Run() {
  election_.Start(MonotonicNow());
  for (;;) {
    for (std::vector<ElectionAction> actions = election_.TakeActions(); !actions.empty();
         actions = election_.TakeActions()) {
      for (const ElectionAction& action : actions) Execute(action);
    }
    std::deque<std::function<void()>> inputs;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !inbox_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), election_.NextDeadline() - MonotonicNow());
      if (stopping_) return;
      inputs.swap(inbox_);
    }
    for (std::function<void()>& input : inputs) input();
    election_.Tick(MonotonicNow());
  }
}

void ElectionExecutor::Execute(const ElectionAction& action) {
  using Kind = ElectionAction::Kind;
  switch (action.kind) {
    case Kind::kRead:
      return election_.LeaderRead(ReadLeader(), MonotonicNow());
    case Kind::kGrantLease: {
      const absl::Time asked = MonotonicNow();
      absl::StatusOr<int64_t> lease = GrantLease();
      return election_.LeaseGranted(lease, asked, MonotonicNow());
    }
    case Kind::kCampaign:
      return election_.Campaigned(Campaign(action.lease), MonotonicNow());
    case Kind::kHost:
      return Host();
    case Kind::kStepDown:
      return StepDown();
    case Kind::kWatch:
      return Watch(action.watch, action.revision);
    case Kind::kSwitchWatch:
      return SwitchWatch();
    case Kind::kKeepAlive:
      return KeepAlive(action.lease);
    case Kind::kSwitchKeepAlive:
      return KeepAlive(election_.lease());
    case Kind::kRevoke:
      return election_.Revoked(action.lease, Revoke(action.lease), MonotonicNow());
    case Kind::kWriteMemory: {
      const absl::Time until = absl::Now() + (action.deadline - MonotonicNow());
      absl::StatusOr<bool> written = WriteMemory(action.revision, memory_, until);
      return election_.MemoryWritten(action.version, written, MonotonicNow());
    }
    case Kind::kProbeLeader: {
      const EndpointReach reach = ProbeEndpoint(action.address, kLeaderLook);
      using Reach = LeaderElection::Reach;
      return election_.LeaderProbed(action.address,
                                    reach.kind == EndpointReach::Kind::kRefused ? Reach::kRefused
                                    : reach.kind == EndpointReach::Kind::kListens
                                        ? Reach::kListens
                                        : Reach::kUnreachable,
                                    reach.detail, MonotonicNow());
    }
    case Kind::kFollow:
      return SetLeader(action.address);
    case Kind::kRefused: {
      RendezvousEvent refused;
      refused.kind = RendezvousEvent::Kind::kRefused;
      refused.status = absl::PermissionDeniedError(absl::StrCat(action.text, "; ", RefusedHint()));
      return events().Push(std::move(refused));
    }
    case Kind::kLog:
      if (action.level == LogLevel::kError) return spdlog::error("{}", action.text);
      if (action.level == LogLevel::kWarning) return spdlog::warn("{}", action.text);
      return spdlog::info("{}", action.text);
  }
}

void ElectionExecutor::Host() {
  MasterOptions master_options = options_.master;
  master_options.recalled = RecallMemory();
  master_options.remember = [this](const std::string&, const RunMemory& memory) {
    Post([this, bytes = RunMemoryToBytes(memory)] {
      memory_ = bytes;
      election_.MemoryChanged(++memory_version_, MonotonicNow());
    });
  };
  absl::StatusOr<std::unique_ptr<HostedMaster>> master = host_(master_options);
  std::string recalled;
  if (master.ok()) {
    options_.on_lead(master->get());
    master_ = *std::move(master);
    hosting_ = master_.get();
    if (master_options.recalled) {
      recalled = absl::StrCat("with what the last leader remembered (",
                              master_options.recalled->nodes.size(), " nodes' records, ",
                              master_options.recalled->restarts_spent, " restarts spent)");
    }
  }
  election_.Hosted(master.status(), recalled, MonotonicNow());
}

void ElectionExecutor::StepDown() {
  if (master_ == nullptr) return;
  options_.on_lead(nullptr);
  hosting_ = nullptr;
  master_->Shutdown(absl::ZeroDuration());
  // The agent may still read the stopped master (ServeWhileOthersRun): kept until the end.
  retired_.push_back(std::move(master_));
}

// What the run's last leader remembered, when this node may take it over (TakeOver).
std::optional<RunMemory> ElectionExecutor::RecallMemory() {
  absl::StatusOr<std::optional<std::string>> bytes = ReadMemory();
  if (!bytes.ok() || !*bytes) return std::nullopt;  // none yet, or the store went: afresh
  return TakeOver(**bytes, placed_in_run_, options_.rendezvous.run_id, store_.name,
                  store_.memory_key);
}

}  // namespace ddprun
