#include "common/printable.h"

#include <gtest/gtest.h>

namespace ddprun {
namespace {

TEST(PrintableTest, ControlCharactersBecomeEscapes) {
  EXPECT_EQ(Printable("node1"), "node1");
  EXPECT_EQ(Printable("a\n[ddprun] forged"), "a\\x0a[ddprun] forged");
  EXPECT_EQ(Printable(std::string("x\0y\x7f\r", 5)), "x\\x00y\\x7f\\x0d");
  EXPECT_EQ(Printable("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 is kept
}

}  // namespace
}  // namespace ddprun
