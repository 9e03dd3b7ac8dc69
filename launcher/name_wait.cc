#include "launcher/name_wait.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ddprun {

namespace {

constexpr absl::Duration kRetryEvery = absl::Milliseconds(500);

std::string Seconds(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1))), "s");
}

}  // namespace

absl::Status WaitUntilResolves(const NameWait& wait, const NameWaitWorld& world) {
  absl::Status resolved = world.resolve();
  if (resolved.ok()) return resolved;
  const absl::Time start = world.now();
  const absl::Time deadline = start + wait.bound;
  world.warn(absl::StrCat(resolved.message(), "; waiting up to ", Seconds(wait.bound),
                          " (join_timeout) for it to resolve, as a Kubernetes service's name "
                          "does once its pod is ready"));
  absl::Time next_progress = start + wait.progress_every;
  while (true) {
    const absl::Time now = world.now();
    if (now >= deadline) {
      return absl::FailedPreconditionError(
          absl::StrCat(resolved.message(), "; it did not resolve within ", Seconds(wait.bound),
                       " (join_timeout; --rdzv-conf join_timeout=SECONDS waits longer)"));
    }
    if (now >= next_progress) {
      world.warn(absl::StrCat("still waiting for ", wait.what, " '", wait.host,
                              "' to resolve: ", Seconds(deadline - now), " left"));
      next_progress += wait.progress_every;
    }
    if (const int signal = world.pause(std::min(kRetryEvery, deadline - now)); signal != 0) {
      return absl::CancelledError(absl::StrCat(signal));
    }
    resolved = world.resolve();
    if (resolved.ok()) {
      world.info(absl::StrCat(wait.what, " '", wait.host, "' resolves now, after ",
                              Seconds(world.now() - start)));
      return resolved;
    }
  }
}

}  // namespace ddprun
