#include "agent/hangs/stack_collection.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/hangs/proc_state.h"
#include "agent/process/worker_process.h"
#include "common/small_file.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

// A memfd's content, as much of it as a stack report may use.
std::string ReadAll(int fd) { return ReadFdPart(fd, 0, kMaxStackText * 4); }

}  // namespace

StackCollection::StackCollection(EventLoop& loop, OrphanGuard& guard, Method method,
                                 absl::Duration dump_bound, std::function<void()> on_done)
    : loop_(loop),
      guard_(guard),
      method_(method),
      dump_bound_(dump_bound),
      on_done_(std::move(on_done)) {}

StackCollection::~StackCollection() {
  if (timer_) loop_.Unwatch(timer_->fd());
  for (Target& t : workers_) {
    if (t.reader > 0) ::kill(t.reader, SIGKILL);  // reaped by the agent as a stray child
  }
}

void StackCollection::Freeze(const std::vector<Worker>& running) {
  if (frozen() || running.empty()) return;
  for (const Worker& w : running) {
    if (method_ != Method::kSnapshot) ::kill(w.pid, SIGSTOP);  // every thread; not its children
    workers_.push_back(Target{w});
  }
}

void StackCollection::Begin(absl::Duration settle) {
  if (phase_ != Phase::kIdle || !frozen()) return;
  absl::StatusOr<OneShotTimer> timer = OneShotTimer::Create();
  absl::Status watched = timer.ok() ? absl::OkStatus() : timer.status();
  if (timer.ok()) {
    timer_ = std::make_unique<OneShotTimer>(std::move(*timer));
    watched = loop_.WatchReadable(timer_->fd(), [this](uint32_t) { OnTimer(); });
  }
  if (!watched.ok()) {
    spdlog::warn("cannot time the stack dump ({}): stopping without it",
                 std::string(watched.message()));
    return Done();
  }
  phase_ = Phase::kSettling;
  timer_->Arm(std::max(settle, absl::Milliseconds(1)));
}

void StackCollection::OnTimer() {
  if (!timer_->Acknowledge()) return;
  if (phase_ == Phase::kDumping) return Done();  // dump_bound_: go on without the rest
  if (phase_ != Phase::kSettling) return;
  phase_ = Phase::kDumping;
  for (Target& t : workers_) {
    if (!t.exited) Dump(t);
  }
  for (Target& t : workers_) {
    // A Python worker runs its handler before anything else; a native one stays stopped
    // while eu-stack reads it, until Done.
    if (t.python_pending) ::kill(t.worker.pid, SIGCONT);
  }
  timer_->Arm(dump_bound_);
  MaybeDone();
}

void StackCollection::Dump(Target& t) {
  const pid_t pid = t.worker.pid;
  if (AnyTaskUninterruptible(pid)) {
    // No signal handler runs until the kernel lets it go: what holds it is the stack.
    t.kernel = KernelWait(KernelWaitChannel(pid), KernelStack(pid));
    return;
  }
  if (method_ != Method::kPython) return ReadNative(t);
  if (t.worker.err != nullptr) {
    t.worker.err->CaptureInto(&t.stderr_capture);
  } else if (!t.worker.stderr_file.empty()) {
    struct stat st {};
    if (::stat(t.worker.stderr_file.c_str(), &st) == 0) t.stderr_offset = st.st_size;
  }
  // To the main thread (its thread id is the pid): a signal to the process may land on any
  // thread, one of torch's C++ threads say, and faulthandler marks the thread it runs on as
  // the current one. Not to the worker's children (DataLoader workers): they would print
  // theirs into the same stream.
  ::syscall(SYS_tgkill, pid, pid, SIGABRT);
  t.python_pending = true;
}

void StackCollection::ReadNative(Target& t) {
  UniqueFd out(::memfd_create("ddprun-eu-stack", MFD_CLOEXEC));
  if (!out.valid()) {
    t.reader_error = std::string(ErrnoStatus(errno, "memfd_create for eu-stack").message());
    return;
  }
  SpawnSpec spec;
  spec.argv = {"eu-stack", "-p", std::to_string(t.worker.pid)};
  spec.env = {
      "PATH=" + std::string(::getenv("PATH") != nullptr ? ::getenv("PATH") : "/usr/bin:/bin"),
      "LC_ALL=C"};
  spec.stdout_fd = spec.stderr_fd = out.get();
  spec.guard_fd = guard_.registration_fd();  // it dies with the agent too
  absl::StatusOr<pid_t> reader = SpawnWorkerProcess(spec);
  if (!reader.ok()) {
    t.reader_error = absl::StrCat(
        reader.status().message(),
        ": native stacks are read with eu-stack (Debian package elfutils); install it");
    return;
  }
  t.reader = *reader;
  t.reader_output = std::move(out);
}

bool StackCollection::OnProcessExited(pid_t pid) {
  for (Target& t : workers_) {
    if (t.reader == pid) {
      guard_.Forget(pid);
      t.reader = 0;
      MaybeDone();
      return true;
    }
    if (t.worker.pid == pid) {
      t.exited = true;
      t.python_pending = false;
      MaybeDone();
      return false;
    }
  }
  return false;
}

void StackCollection::MaybeDone() {
  if (phase_ != Phase::kDumping) return;
  for (const Target& t : workers_) {
    if (t.python_pending || t.reader > 0) return;
  }
  Done();
}

void StackCollection::Done() {
  if (phase_ == Phase::kDone) return;
  phase_ = Phase::kDone;
  if (timer_) timer_->Disarm();
  for (Target& t : workers_) {
    if (t.reader > 0) {
      ::kill(t.reader, SIGKILL);
      t.reader_error =
          absl::StrCat("eu-stack did not finish within ", absl::FormatDuration(dump_bound_));
    }
    if (!t.exited && method_ != Method::kSnapshot) {
      ::kill(t.worker.pid, SIGCONT);  // so that the stop signals act
    }
  }
  on_done_();
}

std::vector<RankStack> StackCollection::Take(const std::string& host) {
  std::vector<RankStack> stacks;
  if (phase_ == Phase::kIdle) return stacks;  // frozen, but nothing was asked for
  for (Target& t : workers_) {
    stacks.push_back(StackOf(t));
    stacks.back().host = host;
  }
  return stacks;
}

RankStack StackCollection::StackOf(Target& t) {
  RankStack stack;
  if (t.kernel) {
    stack = *t.kernel;
  } else if (method_ == Method::kPython) {
    std::string text = std::move(t.stderr_capture);
    if (t.stderr_offset >= 0) {  // stderr went straight to its log file
      absl::StatusOr<std::string> part = ReadFilePart(
          t.worker.stderr_file, static_cast<uint64_t>(t.stderr_offset), PipedStream::kMaxCapture);
      if (part.ok()) text = std::move(*part);
    }
    stack = ParsePythonDump(text);
  } else if (t.reader_output.valid() && t.reader_error.empty()) {
    stack = ParseNativeStack(ReadAll(t.reader_output.get()), t.worker.pid);
  } else {
    stack.source = "none";
    stack.where = "no stack read";
    stack.text = t.reader_error.empty() ? "the dump did not run" : t.reader_error;
    if (t.reader_output.valid()) absl::StrAppend(&stack.text, "\n", ReadAll(t.reader_output.get()));
  }
  if (stack.text.size() > kMaxStackText) {
    stack.text = absl::StrCat(stack.text.substr(0, kMaxStackText), "\n... (cut at 32 KiB)");
  }
  stack.rank = t.worker.rank;
  stack.local_rank = t.worker.local_rank;
  stack.pid = t.worker.pid;
  return stack;
}

}  // namespace ddprun
