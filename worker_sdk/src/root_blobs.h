#pragma once
// The exchange behind InitNccl, without NCCL: the first rank of each of `roots` groups (a
// root) makes a blob (an ncclUniqueId), publishes it in the store, and every rank gets all
// of them in root order. Kept apart so that it is tested on machines without a GPU.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ddp/worker/context.h"

namespace ddp::worker {

/// How many roots `world_size` ranks need with at most `ranks_per_root` ranks each.
int RootCount(int world_size, int ranks_per_root);

/// NCCL's grouping for ncclCommInitRankScalable: groups as even as can be, the first
/// world_size % roots of them one rank larger; a root is the first rank of its group.
int FirstRankOfRoot(int root, int world_size, int roots);
int RootOfRank(int rank, int world_size, int roots);

/// `make` runs on the roots only. `what` names the blob in errors ("ncclUniqueId"). A root
/// whose `make` fails publishes the error, so the other ranks fail at once with its message
/// instead of timing out.
absl::StatusOr<std::vector<std::string>> ExchangeRootBlobs(
    Context& ctx, const std::string& key_prefix, int roots,
    const std::function<absl::StatusOr<std::string>()>& make, absl::Duration timeout,
    const std::string& what);

}  // namespace ddp::worker
