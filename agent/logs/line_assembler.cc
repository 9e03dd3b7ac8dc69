#include "agent/logs/line_assembler.h"

namespace ddprun {

void LineAssembler::Feed(std::string_view chunk, const Emit& emit) {
  if (just_split_ && !chunk.empty() && chunk.front() == '\n') chunk.remove_prefix(1);
  just_split_ = false;
  while (!chunk.empty()) {
    const size_t newline = chunk.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(chunk);
      if (partial_.size() >= kMaxLine) {
        Flush(emit);
        just_split_ = true;
      }
      return;
    }
    if (partial_.empty()) {
      emit(chunk.substr(0, newline));
    } else {
      partial_.append(chunk.substr(0, newline));
      emit(partial_);
      partial_.clear();
    }
    chunk.remove_prefix(newline + 1);
  }
}

void LineAssembler::Flush(const Emit& emit) {
  if (partial_.empty()) return;
  emit(partial_);
  partial_.clear();
}

void LineTail::Add(std::string_view line) {
  if (capacity_ == 0) return;
  if (lines_.size() == capacity_) lines_.pop_front();
  std::string kept(line.substr(0, kMaxKeptLineLength));
  if (line.size() > kMaxKeptLineLength) kept += " [...]";
  lines_.push_back(std::move(kept));
}

}  // namespace ddprun
