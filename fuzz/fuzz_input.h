#pragma once
// Reads typed values off a fuzzer's input, so that a target can turn bytes into a sequence
// of operations. Past the end, every read returns zero or empty.

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddprun::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  /// A number in [0, n).
  int Below(int n) { return n <= 0 ? 0 : Byte() % n; }
  /// Up to `max` bytes, the length taken from the input first.
  std::string String(size_t max) {
    const size_t want = Byte() % (max + 1);
    const size_t n = want < size_ - pos_ ? want : size_ - pos_;
    std::string s(reinterpret_cast<const char*>(data_ + pos_), pos_ < size_ ? n : 0);
    pos_ += s.size();
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace ddprun::fuzz
