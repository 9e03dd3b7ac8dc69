#include "bench/etcd_load.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddprun {
namespace {

namespace pb = ::etcdserverpb;

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdLoad>> EtcdLoad::Elect(const EtcdLoadOptions& options) {
  std::unique_ptr<EtcdLoad> load(new EtcdLoad(options));
  const int streams = std::max(1, std::min(options.connections, options.agents));
  for (int i = 0; i < streams; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("ddprun.loadgen.etcd_channel", i);  // a connection of its own
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    load->channels_.push_back(grpc::CreateCustomChannel(options.etcd.endpoints[0],
                                                        grpc::InsecureChannelCredentials(), args));
  }
  const absl::Time start = absl::Now();
  if (absl::Status s = load->Campaign(); !s.ok()) return s;
  load->campaign_ms_ = absl::ToDoubleMilliseconds(absl::Now() - start);
  for (int i = 0; i < streams; ++i) {
    load->keep_alive_threads_.emplace_back([raw = load.get(), i] { raw->KeepAlive(i); });
  }
  return load;
}

// Each thread plays its share of the agents, one campaign after another, on a client of its
// own: a lease, then the transaction.
absl::Status EtcdLoad::Campaign() {
  const std::string key = absl::StrCat(options_.etcd.prefix, "/", options_.run_id, "/leader");
  leases_.assign(options_.agents, 0);
  std::vector<absl::Status> errors(options_.threads);
  std::vector<int> won(options_.threads, 0);
  std::vector<int64_t> revision(options_.threads, 0);
  std::vector<std::string> holder(options_.threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < options_.threads; ++t) {
    threads.emplace_back([&, t] {
      EtcdClient client(options_.etcd);
      for (int agent = t; agent < options_.agents; agent += options_.threads) {
        // As an agent does: a read first, a lease and a transaction only with no leader.
        absl::StatusOr<EtcdClient::Read> read = client.Get(key);
        if (!read.ok()) {
          errors[t] = read.status();
          return;
        }
        if (read->value) {
          revision[t] = std::max(revision[t], read->revision);
          holder[t] = read->value->value;
          continue;
        }
        absl::StatusOr<int64_t> lease = client.GrantLease(options_.etcd.lease_ttl);
        if (!lease.ok()) {
          errors[t] = lease.status();
          return;
        }
        leases_[agent] = *lease;
        absl::StatusOr<EtcdClient::Campaign> campaign =
            client.CreateUnlessPresent(key, options_.self, *lease);
        if (!campaign.ok()) {
          errors[t] = campaign.status();
          return;
        }
        won[t] += campaign->won;
        revision[t] = std::max(revision[t], campaign->revision);
        holder[t] = campaign->holder.value;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& error : errors) {
    if (!error.ok()) return error;
  }
  int winners = 0;
  for (int w : won) winners += w;
  if (winners != 1) {
    return absl::InternalError(absl::StrCat(winners, " agents won the election of one leader"));
  }
  for (const std::string& h : holder) {
    if (!h.empty()) leader_ = h;
  }
  return Watch(*std::max_element(revision.begin(), revision.end()) + 1);
}

// Every agent but the leader watches the leader's key: one watch each, on the shared streams.
absl::Status EtcdLoad::Watch(int64_t from_revision) {
  const absl::Time start = absl::Now();
  const std::string key = absl::StrCat(options_.etcd.prefix, "/", options_.run_id, "/leader");
  const int streams = static_cast<int>(channels_.size());
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>>> rw;
  for (int i = 0; i < streams; ++i) {
    watch_contexts_.push_back(std::make_unique<grpc::ClientContext>());
    watch_contexts_.back()->AddMetadata("hasleader", "true");
    rw.push_back(pb::Watch::NewStub(channels_[i])->Watch(watch_contexts_.back().get()));
  }
  pb::WatchRequest request;
  request.mutable_create_request()->set_key(key);
  request.mutable_create_request()->set_start_revision(from_revision);
  for (int agent = 1; agent < options_.agents; ++agent) {
    if (!rw[agent % streams]->Write(request)) {
      return absl::UnavailableError(absl::StrCat("etcd ended watch stream ", agent % streams));
    }
  }
  for (int i = 0; i < streams; ++i) {
    watch_readers_.emplace_back([this, stream = std::shared_ptr(std::move(rw[i]))] {
      pb::WatchResponse response;
      while (stream->Read(&response)) {
        if (!response.created()) continue;
        absl::MutexLock lock(&mu_);
        ++created_;
      }
      (void)stream->Finish();
    });
  }
  absl::MutexLock lock(&mu_);
  auto all = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return created_ >= options_.agents - 1; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(120))) {
    return absl::DeadlineExceededError(absl::StrCat("only ", created_, " of ", options_.agents - 1,
                                                    " watches were created within 120 s"));
  }
  watch_ms_ = absl::ToDoubleMilliseconds(absl::Now() - start);
  return absl::OkStatus();
}

// The leases of every `streams`-th agent from `stream` on, renewed every third of the TTL on
// one keep-alive stream, as each agent's lease thread does on its own.
void EtcdLoad::KeepAlive(int stream) {
  const int streams = static_cast<int>(channels_.size());
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    keep_alive_contexts_.push_back(&context);
  }
  auto rw = pb::Lease::NewStub(channels_[stream])->LeaseKeepAlive(&context);
  pb::LeaseKeepAliveResponse response;
  for (;;) {
    int sent = 0;
    for (int agent = stream; agent < options_.agents; agent += streams) {
      if (leases_[agent] == 0) continue;  // it found a leader: no lease
      pb::LeaseKeepAliveRequest request;
      request.set_id(leases_[agent]);
      if (!rw->Write(request)) break;
      ++sent;
    }
    for (int i = 0; i < sent; ++i) {
      if (!rw->Read(&response)) break;
      ++keep_alives_;
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.etcd.lease_ttl / 3)) break;
  }
  (void)rw->Finish();
}

EtcdLoad::~EtcdLoad() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (grpc::ClientContext* context : keep_alive_contexts_) context->TryCancel();
  }
  for (std::thread& thread : keep_alive_threads_) thread.join();
  for (auto& context : watch_contexts_) context->TryCancel();
  for (std::thread& thread : watch_readers_) thread.join();
  EtcdClient client(options_.etcd);
  (void)client.DeletePrefix(absl::StrCat(options_.etcd.prefix, "/", options_.run_id, "/"));
  for (int64_t lease : leases_) {
    if (lease != 0) (void)client.RevokeLease(lease);
  }
}

}  // namespace ddprun
