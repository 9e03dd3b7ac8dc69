#pragma once
// Cuts a byte stream into whole lines, so that lines of different workers never interleave
// mid-line on the console. Pure: the caller feeds what it read and gets lines back.

#include <deque>
#include <functional>
#include <string>
#include <string_view>

namespace ddprun {

class LineAssembler {
 public:
  /// A line longer than this is emitted in pieces rather than held without bound.
  static constexpr size_t kMaxLine = 64 * 1024;
  using Emit = std::function<void(std::string_view line)>;  // without the '\n'

  /// Appends `chunk` and emits every line it completes.
  void Feed(std::string_view chunk, const Emit& emit);
  /// Emits the partial last line, if any (a worker's output that did not end in '\n').
  void Flush(const Emit& emit);

 private:
  std::string partial_;
  bool just_split_ = false;  // the last piece was cut at kMaxLine, not at a '\n'
};

/// The last `capacity` lines of a stream, for failure summaries.
class LineTail {
 public:
  explicit LineTail(size_t capacity) : capacity_(capacity) {}
  void Add(std::string_view line);
  const std::deque<std::string>& lines() const { return lines_; }

 private:
  static constexpr size_t kMaxKeptLineLength = 400;
  size_t capacity_;
  std::deque<std::string> lines_;
};

}  // namespace ddprun
