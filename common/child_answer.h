#pragma once
// Work done in a short-lived child process, for what must leave nothing in this one: a GPU
// driver loaded with dlopen, hwloc and the plug-ins it loads. Call it while this process
// has one thread (before gRPC or the agent's loop start), as fork requires for `work` to
// use malloc and locks safely.

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace ddprun {

/// What `work` returned, run in a child of this process forked for it. An error names
/// `what` ("GPU probe") when the child could not be started or died before answering.
absl::StatusOr<std::string> AnswerFromChild(const std::function<std::string()>& work,
                                            const std::string& what);

}  // namespace ddprun
