// The C API's error paths: no exception, no crash, a message saying what is wrong.

#include "ddp_worker.h"

#include <stdlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using ::testing::HasSubstr;

TEST(CApiTest, InitOutsideALauncherFailsWithTheMissingVariableAndANullWorker) {
  ::unsetenv("WORLD_SIZE");
  ddp_worker* w = reinterpret_cast<ddp_worker*>(0x1);
  EXPECT_EQ(ddp_worker_init(&w), -1);
  EXPECT_EQ(w, nullptr);
  EXPECT_THAT(ddp_worker_last_error(), HasSubstr("WORLD_SIZE is not set"));
  EXPECT_EQ(ddp_worker_init(nullptr), -1);
  EXPECT_THAT(ddp_worker_last_error(), HasSubstr("out is NULL"));
}

TEST(CApiTest, ANullWorkerIsAnErrorNotACrash) {
  EXPECT_EQ(ddp_worker_rank(nullptr), -1);
  EXPECT_THAT(ddp_worker_last_error(), HasSubstr("ddp_worker_rank: the ddp_worker is NULL"));
  EXPECT_EQ(ddp_worker_world_size(nullptr), -1);
  EXPECT_EQ(ddp_worker_barrier(nullptr, "x", 1.0), -1);
  EXPECT_THAT(ddp_worker_last_error(), HasSubstr("ddp_worker_barrier"));
  ddp_worker_finalize(nullptr);
}

}  // namespace
