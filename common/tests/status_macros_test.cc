#include "common/status_macros.h"

#include <memory>

#include "gtest/gtest.h"

namespace ddprun {
namespace {

absl::Status Step(bool ok, int& calls) {
  ++calls;
  return ok ? absl::OkStatus() : absl::InternalError("step failed");
}

absl::Status TwoSteps(bool first_ok, int& calls) {
  DDPRUN_RETURN_IF_ERROR(Step(first_ok, calls));
  DDPRUN_RETURN_IF_ERROR(Step(true, calls));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(bool ok) {
  if (!ok) return absl::NotFoundError("no int");
  return std::make_unique<int>(7);
}

absl::StatusOr<int> Twice(bool ok) {
  DDPRUN_ASSIGN_OR_RETURN(std::unique_ptr<int> value, MakeInt(ok));  // move-only works
  int doubled = 0;
  DDPRUN_ASSIGN_OR_RETURN(doubled, absl::StatusOr<int>(*value * 2));  // an existing variable
  return doubled;
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtTheFirstError) {
  int calls = 0;
  EXPECT_EQ(TwoSteps(false, calls).message(), "step failed");
  EXPECT_EQ(calls, 1);
  calls = 0;
  EXPECT_TRUE(TwoSteps(true, calls).ok());
  EXPECT_EQ(calls, 2);
}

TEST(StatusMacrosTest, AssignOrReturnMovesTheValueOrReturnsTheStatus) {
  EXPECT_EQ(*Twice(true), 14);
  EXPECT_EQ(Twice(false).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ddprun
