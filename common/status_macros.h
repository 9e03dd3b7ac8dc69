#pragma once
// RETURN_IF_ERROR and ASSIGN_OR_RETURN, which Debian's Abseil (20220623) does not ship.
//
//   DDPRUN_RETURN_IF_ERROR(MakeDirs(dir));
//   DDPRUN_ASSIGN_OR_RETURN(UniqueFd file, OpenForAppend(path));

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DDPRUN_STATUS_CONCAT_INNER(a, b) a##b
#define DDPRUN_STATUS_CONCAT(a, b) DDPRUN_STATUS_CONCAT_INNER(a, b)

/// Returns the status of `expr` (an absl::Status) from the calling function unless it is OK.
#define DDPRUN_RETURN_IF_ERROR(expr)                                    \
  do {                                                                  \
    if (::absl::Status ddprun_status_ = (expr); !ddprun_status_.ok()) { \
      return ddprun_status_;                                            \
    }                                                                   \
  } while (false)

/// Evaluates `expr` (an absl::StatusOr<T>); returns its status unless OK, else moves its
/// value into `lhs` (a declaration or an existing variable).
#define DDPRUN_ASSIGN_OR_RETURN(lhs, expr) \
  DDPRUN_ASSIGN_OR_RETURN_IMPL(DDPRUN_STATUS_CONCAT(ddprun_statusor_, __LINE__), lhs, expr)

#define DDPRUN_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr)  \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(*statusor)
