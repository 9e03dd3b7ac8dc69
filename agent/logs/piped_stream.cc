#include "agent/logs/piped_stream.h"

#include <errno.h>
#include <unistd.h>

#include "agent/logs/log_format.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {
constexpr size_t kChunk = 64 * 1024;
// Reads per Pump() before yielding to other fds, so one chatty worker cannot starve the rest.
constexpr int kReadsPerPump = 16;
}  // namespace

void PipedStream::Pump() {
  char buf[kChunk];
  for (int i = 0; i < kReadsPerPump && open(); ++i) {
    const ssize_t n = ::read(read_end_.get(), buf, sizeof(buf));
    if (n > 0) {
      Consume(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    Close();  // end of file (or a read error, which only a closed pipe produces)
  }
}

void PipedStream::DrainAndClose() {
  while (open()) {
    char buf[kChunk];
    const ssize_t n = ::read(read_end_.get(), buf, sizeof(buf));
    if (n > 0) {
      Consume(std::string_view(buf, static_cast<size_t>(n)));
    } else if (!(n < 0 && errno == EINTR)) {
      Close();
    }
  }
}

void PipedStream::Consume(std::string_view chunk) {
  if (capture_ != nullptr && capture_->size() < kMaxCapture) {
    capture_->append(chunk.substr(0, kMaxCapture - capture_->size()));
  }
  WriteToFile(chunk);
  // A stack dump on the worker's way out goes to the hang report and the worker's log file:
  // the console shows the report's summary, and the failure summary's tail keeps the lines
  // the worker wrote before it hung.
  if (capture_ != nullptr) return;
  if (console_fd_ >= 0 && prefix_.empty()) {
    const size_t cut = chunk.find_last_of("\r\n");
    if (cut == std::string_view::npos) {
      raw_pending_.append(chunk);
      if (raw_pending_.size() >= LineAssembler::kMaxLine) {  // never hold bytes without bound
        (void)WriteAll(console_fd_, raw_pending_);
        raw_pending_.clear();
      }
    } else {
      raw_pending_.append(chunk.substr(0, cut + 1));
      (void)WriteAll(console_fd_, raw_pending_);
      raw_pending_.assign(chunk.substr(cut + 1));
    }
  }
  if (tail_ == nullptr && (console_fd_ < 0 || prefix_.empty())) return;
  assembler_.Feed(chunk, [this](std::string_view line) { EmitLine(line); });
  FlushConsole();
}

void PipedStream::WriteToFile(std::string_view chunk) {
  if (!file_.valid()) return;
  if (absl::Status s = WriteAll(file_.get(), chunk); !s.ok()) {
    spdlog::error("worker log file write failed: {}; further output goes to the console only",
                  s.message());
    file_.Reset();
  }
}

void PipedStream::EmitLine(std::string_view line) {
  if (tail_ != nullptr) tail_->Add(line);
  if (console_fd_ < 0 || prefix_.empty()) return;
  console_buffer_.append(prefix_);
  console_buffer_.append(line);
  console_buffer_.push_back('\n');
  if (duplicate_ != nullptr) duplicate_->Offer(prefix_, line);
}

void PipedStream::FlushConsole() {
  if (duplicate_ != nullptr) duplicate_->Flush();
  if (console_buffer_.empty()) return;
  // One write per batch of whole lines: other workers' lines can only fall between lines.
  (void)WriteAll(console_fd_, console_buffer_);
  console_buffer_.clear();
}

void PipedStream::Close() {
  assembler_.Flush([this](std::string_view line) { EmitLine(line); });
  FlushConsole();
  if (!raw_pending_.empty()) {  // a partial last line still ends with a newline on the console
    raw_pending_.push_back('\n');
    (void)WriteAll(console_fd_, raw_pending_);
    raw_pending_.clear();
  }
  read_end_.Reset();
}

}  // namespace ddprun
