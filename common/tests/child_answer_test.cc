#include "common/child_answer.h"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace ddprun {
namespace {

TEST(AnswerFromChild, ReturnsWhatTheChildComputedInItsOwnProcess) {
  const pid_t parent = ::getpid();
  absl::StatusOr<std::string> answer =
      AnswerFromChild([] { return std::to_string(::getpid()) + std::string(100000, 'x'); }, "test");
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_NE(answer->substr(0, answer->find('x')), std::to_string(parent));
  EXPECT_EQ(answer->size() - answer->find('x'), 100000u);  // more than a pipe holds
}

TEST(AnswerFromChild, AChildThatDiesIsAnErrorThatNamesTheWork) {
  absl::StatusOr<std::string> answer = AnswerFromChild(
      []() -> std::string {
        ::raise(SIGSEGV);
        return "never";
      },
      "GPU probe");
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.status().message().find("the GPU probe process died before answering"),
            std::string::npos)
      << answer.status();
}

}  // namespace
}  // namespace ddprun
