#include "common/small_file.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddprun {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

absl::StatusOr<std::string> ReadFilePart(const std::string& path, uint64_t offset,
                                         size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  in.seekg(static_cast<std::streamoff>(offset));
  std::string part(max_bytes, '\0');
  in.read(part.data(), static_cast<std::streamsize>(max_bytes));
  part.resize(static_cast<size_t>(in.gcount()));
  return part;
}

std::string ReadFdPart(int fd, uint64_t offset, size_t max_bytes) {
  std::string out;
  char buf[8192];
  while (out.size() < max_bytes) {
    const ssize_t n = ::pread(fd, buf, std::min(sizeof buf, max_bytes - out.size()),
                              static_cast<off_t>(offset + out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& setting) {
  constexpr size_t kMaxTokenFile = 4096;  // a token is a line (/dev/zero never ends)
  absl::StatusOr<std::string> text = ReadFilePart(path, 0, kMaxTokenFile + 1);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(setting, "='", path, "' cannot be read"));
  }
  if (text->size() > kMaxTokenFile) {
    return absl::InvalidArgumentError(absl::StrCat(setting, "='", path, "' holds more than ",
                                                   kMaxTokenFile, " bytes; a token is one line"));
  }
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(setting, "='", path, "' is empty"));
  }
  return token;
}

std::string ExposedSecretFile(const std::string& path, const std::string& setting) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & (S_IRGRP | S_IROTH)) == 0) return "";
  return absl::StrFormat(
      "%s='%s' can be read by other users (mode %04o): anyone on this machine can read the "
      "secret in it; chmod 600 %s",
      setting, path, st.st_mode & 07777, path);
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& setting) {
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(setting, "='", path, "' cannot be read"));
  }
  if (!absl::StrContains(*text, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(setting, "='", path, "' is not a PEM file"));
  }
  return text;
}

}  // namespace ddprun
