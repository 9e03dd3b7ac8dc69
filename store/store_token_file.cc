#include "store/store_token_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

absl::StatusOr<std::string> RandomToken() {
  char bytes[16];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    return ErrnoStatus(errno, "cannot draw a random Store token");
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof bytes));
}

}  // namespace

absl::StatusOr<StoreTokenFile> StoreTokenFile::Create(const std::string& token) {
  std::string value = token;
  if (value.empty()) {
    absl::StatusOr<std::string> random = RandomToken();
    if (!random.ok()) return random.status();
    value = *random;
  }
  const char* tmp = ::getenv("TMPDIR");
  std::string folder =
      absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/ddprun-token-XXXXXX");
  if (::mkdtemp(folder.data()) == nullptr) {  // 0700
    return ErrnoStatus(errno, absl::StrCat("cannot make a folder for the Store token like ", folder,
                                           " (is TMPDIR writable?)"));
  }
  StoreTokenFile file(folder, folder + "/store-token");
  UniqueFd fd(
      ::open(file.path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot create ", file.path_));
  DDPRUN_RETURN_IF_ERROR(WriteAll(fd.get(), value));
  return file;
}

StoreTokenFile::StoreTokenFile(StoreTokenFile&& other) noexcept
    : folder_(std::move(other.folder_)), path_(std::move(other.path_)) {
  other.folder_.clear();
  other.path_.clear();
}

StoreTokenFile::~StoreTokenFile() {
  if (path_.empty()) return;
  ::unlink(path_.c_str());
  ::rmdir(folder_.c_str());
}

}  // namespace ddprun
