#include "tests/elected/file_election.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

constexpr absl::Duration kPoll = absl::Milliseconds(20);

const FileSettings& FilesOf(const ElectionOptions& options) {
  return static_cast<const FileSettings&>(*options.backend);
}

std::string RunKey(const ElectionOptions& options, const char* name) {
  return absl::StrCat("/ddprun/", options.rendezvous.run_id, "/", name);
}

ElectionSettings SettingsFor(const ElectionOptions& options) {
  ElectionSettings s;
  s.run_id = options.rendezvous.run_id;
  s.self = options.self;
  s.store = "the folder";
  s.key = RunKey(options, "leader");
  s.prefix = "/ddprun";
  s.security_doc = "docs/security.md";
  s.lease_ttl = FilesOf(options).lease_ttl;
  return s;
}

LeaderKey KeyOf(const StoredKey& stored) {
  return LeaderKey{stored.value, stored.lease, stored.create_revision};
}

}  // namespace

FileElection::FileElection(ElectionOptions options, HostMaster host)
    : ElectionExecutor(options, host, SettingsFor(options),
                       {"the folder", absl::StrCat("the folder ", FilesOf(options).folder),
                        RunKey(options, "state")}),
      settings_(FilesOf(options)),
      leader_key_(RunKey(options, "leader")),
      state_key_(RunKey(options, "state")),
      prefix_(RunKey(options, "")),
      store_(settings_.folder) {
  poller_ = std::thread([this] { Poll(); });
  Begin();
}

FileElection::~FileElection() {
  End();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  poller_.join();
}

absl::StatusOr<LeaderElection::Read> FileElection::ReadLeader() {
  absl::StatusOr<FileStore::Read> read = store_.Get(leader_key_);
  if (!read.ok()) return read.status();
  LeaderElection::Read answer;
  if (read->key) answer.key = KeyOf(*read->key);
  answer.revision = read->revision;
  return answer;
}

absl::StatusOr<int64_t> FileElection::GrantLease() {
  return store_.GrantLease(settings_.lease_ttl);
}

absl::StatusOr<LeaderElection::Campaign> FileElection::Campaign(int64_t lease) {
  absl::StatusOr<FileStore::Campaign> c =
      store_.CreateUnlessPresent(leader_key_, options().self, lease);
  if (!c.ok()) return c.status();
  return LeaderElection::Campaign{c->won, KeyOf(c->holder), c->revision};
}

void FileElection::Watch(int64_t id, int64_t revision) {
  absl::MutexLock lock(&mu_);
  watch_ = id;
  watch_from_ = revision;
}

void FileElection::SwitchWatch() {
  int64_t ended = 0;
  {
    absl::MutexLock lock(&mu_);
    ended = std::exchange(watch_, 0);
  }
  // A folder has one member: the watch ends, and the election watches again.
  if (ended != 0) election().WatchEnded(ended, absl::OkStatus(), MonotonicNow());
}

void FileElection::StopWatch() {
  absl::MutexLock lock(&mu_);
  watch_ = 0;
}

void FileElection::KeepAlive(int64_t lease) {
  absl::MutexLock lock(&mu_);
  kept_lease_ = lease;
  renewed_ = absl::InfinitePast();  // renewed at the next poll
}

void FileElection::StopKeepAlive() {
  absl::MutexLock lock(&mu_);
  kept_lease_ = 0;
}

absl::StatusOr<bool> FileElection::WriteMemory(int64_t revision, const std::string& memory,
                                               absl::Time) {
  return store_.PutIfFenced(leader_key_, revision, state_key_, memory);
}

absl::StatusOr<std::optional<std::string>> FileElection::ReadMemory() {
  absl::StatusOr<FileStore::Read> read = store_.Get(state_key_);
  if (!read.ok()) return read.status();
  if (!read->key) return std::optional<std::string>();
  return std::optional<std::string>(read->key->value);
}

void FileElection::RemoveRunKeys(int64_t revision) {
  absl::StatusOr<bool> deleted = store_.DeletePrefixIfFenced(leader_key_, revision, prefix_);
  if (!deleted.ok() || !*deleted) {
    spdlog::info("run '{}''s keys stay in {}", options().rendezvous.run_id, settings_.folder);
  }
}

void FileElection::Poll() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      const auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), kPoll)) return;
    }
    PollWatch();
    PollLease();
  }
}

// What etcd's watch would say from the revision it began at on (that revision included):
// the key put (each new value once) or deleted (once, until it is put again).
void FileElection::PollWatch() {
  int64_t id = 0, from = 0;
  {
    absl::MutexLock lock(&mu_);
    id = watch_;
    from = watch_from_;
  }
  if (id == 0) return;
  if (id != std::exchange(polled_watch_, id)) {
    told_mod_ = 0;
    told_deleted_ = false;
  }
  absl::StatusOr<FileStore::Read> read = store_.Get(leader_key_);
  if (!read.ok()) return;
  if (read->key && read->key->mod_revision >= from && read->key->mod_revision != told_mod_) {
    told_mod_ = read->key->mod_revision;
    told_deleted_ = false;
    Post([this, id, key = KeyOf(*read->key)] {
      election().KeyChanged(id, LeaderElection::KeyChange{false, key}, MonotonicNow());
    });
  } else if (!read->key && read->revision >= from && !told_deleted_) {
    told_deleted_ = true;
    told_mod_ = 0;
    Post([this, id] {
      election().KeyChanged(id, LeaderElection::KeyChange{true, LeaderKey{}}, MonotonicNow());
    });
  }
}

void FileElection::PollLease() {
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    if (kept_lease_ == 0 || absl::Now() - renewed_ < settings_.lease_ttl / 3) return;
    lease = kept_lease_;
    renewed_ = absl::Now();
  }
  const absl::Time sent = MonotonicNow();
  absl::StatusOr<bool> held = store_.KeepAlive(lease);
  if (!held.ok()) return;
  Post([this, lease, sent, expired = !*held] {
    election().LeaseRenewed(lease, sent, expired, MonotonicNow());
  });
}

}  // namespace ddprun
