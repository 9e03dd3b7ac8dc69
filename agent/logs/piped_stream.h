#pragma once
// One worker stream (stdout or stderr) that passes through the agent: it is copied as-is to
// the worker's log file (if any) and, as whole lines with a prefix, to the console (if shown).

#include <string>

#include "agent/logs/duplicate_filter.h"
#include "agent/logs/line_assembler.h"
#include "common/unique_fd.h"

namespace ddprun {

class PipedStream {
 public:
  /// `console_fd` < 0: not shown on the console. `tail` and `duplicate` may be null; the
  /// prefixed lines shown on the console are also offered to `duplicate`.
  PipedStream(UniqueFd read_end, UniqueFd file, int console_fd, std::string prefix, LineTail* tail,
              DuplicateFilter* duplicate = nullptr)
      : read_end_(std::move(read_end)),
        file_(std::move(file)),
        console_fd_(console_fd),
        prefix_(std::move(prefix)),
        tail_(tail),
        duplicate_(console_fd >= 0 && !prefix_.empty() ? duplicate : nullptr) {}

  int fd() const { return read_end_.get(); }
  bool open() const { return read_end_.valid(); }

  /// Copies what can be read now. At end of file, flushes a partial last line and closes.
  void Pump();
  /// Pump until the pipe is empty, then close even if a leftover process still holds it.
  void DrainAndClose();
  /// From now on, appends what passes to `sink` (up to kMaxCapture bytes) and the log file,
  /// and no more to the console or the tail: the stack dump a worker writes on its way out
  /// after a hang (see StackCollection), which the hang report shows. What the pipe holds
  /// from before is passed on first.
  void CaptureInto(std::string* sink) {
    Pump();
    capture_ = sink;
  }
  static constexpr size_t kMaxCapture = 1 << 20;

 private:
  void Consume(std::string_view chunk);
  void WriteToFile(std::string_view chunk);
  void EmitLine(std::string_view line);
  void FlushConsole();
  void Close();

  UniqueFd read_end_;
  UniqueFd file_;
  int console_fd_;
  std::string prefix_;
  LineTail* tail_;
  DuplicateFilter* duplicate_;
  std::string* capture_ = nullptr;
  LineAssembler assembler_;
  std::string console_buffer_;
  std::string raw_pending_;  // raw mode: bytes after the last '\n' or '\r' written
};

}  // namespace ddprun
