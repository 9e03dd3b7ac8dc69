#pragma once
// Reading the small files a command line names: tokens, PEM certificates, error files.
// Errors name the setting the path came from, so a user knows what to fix.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ddprun {

/// The whole file. NotFound when it cannot be opened, InvalidArgument when it cannot be read.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);
/// At most `max_bytes` of the file from byte `offset` on (a part of a log that may be large).
absl::StatusOr<std::string> ReadFilePart(const std::string& path, uint64_t offset,
                                         size_t max_bytes);

/// At most `max_bytes` of an open file from byte `offset` on, read with pread (the file's
/// own offset is left as it is): a memfd a child wrote its output to, say.
std::string ReadFdPart(int fd, uint64_t offset, size_t max_bytes);

/// A secret from a file, surrounding whitespace removed. `setting` names where the path came
/// from ("--token-file"); errors say "<setting>='<path>' cannot be read" or "... is empty".
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& setting);

/// "" when only its owner may read the secret file `path`; else what to say about it (a
/// warning: the file works, but others on the machine can read the secret).
std::string ExposedSecretFile(const std::string& path, const std::string& setting);

/// A PEM file: "<setting>='<path>' cannot be read" or "... is not a PEM file".
absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& setting);

}  // namespace ddprun
