#pragma once
// WriteQueue: what a gRPC callback stream needs to send messages from any thread. gRPC allows
// one write in flight per stream; the rest wait here, in order. The master's SessionReactor
// and the agent's SessionStream both use it.
//
//   sender:        if (const M* m = queue.Push(msg)) StartWrite(m);
//   OnWriteDone:   auto next = queue.Next(ok); if (next.write) StartWrite(next.write);
//                  if (next.close) Finish(*next.close);

#include <deque>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ddprun {

/// `CloseWith`: what a deferred close carries (a server's grpc::Status); unused by clients.
template <typename Message, typename CloseWith = bool>
class WriteQueue {
 public:
  /// Queues `message`. Returns the message to start writing now, or nullptr when a write is
  /// in flight (it follows that one) or the stream is finished (it is dropped).
  const Message* Push(Message message) {
    absl::MutexLock lock(&mu_);
    if (finished_) return nullptr;
    queue_.push_back(std::move(message));
    if (writing_) return nullptr;
    writing_ = true;
    return &queue_.front();
  }

  struct Next {
    const Message* write = nullptr;  // start writing this now
    std::optional<CloseWith> close;  // a deferred close, due now that writing stopped
  };
  /// After the write in flight completed (`ok`: it went out).
  Next Done(bool ok) {
    absl::MutexLock lock(&mu_);
    queue_.pop_front();
    Next next;
    writing_ = ok && !queue_.empty() && !finished_;
    if (writing_) {
      next.write = &queue_.front();
    } else {
      next.close.swap(close_);
    }
    return next;
  }

  /// Closing once the queued messages are written: returns `how` when the stream may close
  /// now; nullopt when a write is in flight (Done returns it later) or a close was asked
  /// for already.
  std::optional<CloseWith> CloseAfterWrites(CloseWith how) {
    absl::MutexLock lock(&mu_);
    if (finished_ || close_) return std::nullopt;
    if (writing_) {
      close_ = std::move(how);
      return std::nullopt;
    }
    return how;
  }

  /// Waits until every queued message went out, the stream finished, or `timeout` passed;
  /// true when nothing is left to write.
  bool AwaitWritten(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    bool (*idle)(WriteQueue*) = [](WriteQueue* q) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !q->writing_ || q->finished_;
    };
    return mu_.AwaitWithTimeout(absl::Condition(idle, this), timeout) && !writing_;
  }

  /// The stream is finished: nothing more is written. True the first time only.
  bool Finish() {
    absl::MutexLock lock(&mu_);
    return !std::exchange(finished_, true);
  }

 private:
  absl::Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);  // front() is in flight while writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<CloseWith> close_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddprun
