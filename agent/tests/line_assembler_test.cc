#include "agent/logs/line_assembler.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Collects what a LineAssembler emits.
class LineAssemblerTest : public ::testing::Test {
 protected:
  void Feed(std::string_view chunk) { assembler_.Feed(chunk, emit_); }
  void Flush() { assembler_.Flush(emit_); }

  LineAssembler assembler_;
  std::vector<std::string> lines_;
  LineAssembler::Emit emit_ = [this](std::string_view line) { lines_.emplace_back(line); };
};

TEST_F(LineAssemblerTest, OneWholeLine) {
  Feed("hello\n");
  EXPECT_THAT(lines_, ElementsAre("hello"));
}

TEST_F(LineAssemblerTest, SeveralLinesInOneChunk) {
  Feed("a\nbb\nccc\n");
  EXPECT_THAT(lines_, ElementsAre("a", "bb", "ccc"));
}

TEST_F(LineAssemblerTest, LineSplitAcrossChunks) {
  Feed("hel");
  EXPECT_THAT(lines_, IsEmpty());
  Feed("lo wo");
  EXPECT_THAT(lines_, IsEmpty());
  Feed("rld\nnext");
  EXPECT_THAT(lines_, ElementsAre("hello world"));
  Feed("\n");
  EXPECT_THAT(lines_, ElementsAre("hello world", "next"));
}

TEST_F(LineAssemblerTest, PartialLastLineOnlyOnFlush) {
  Feed("done\nno newline");
  EXPECT_THAT(lines_, ElementsAre("done"));
  Flush();
  EXPECT_THAT(lines_, ElementsAre("done", "no newline"));
  Flush();  // nothing left
  EXPECT_THAT(lines_, ElementsAre("done", "no newline"));
}

TEST_F(LineAssemblerTest, FlushWithNothingPendingEmitsNothing) {
  Flush();
  Feed("x\n");
  Flush();
  EXPECT_THAT(lines_, ElementsAre("x"));
}

TEST_F(LineAssemblerTest, EmptyLinesAreKept) {
  Feed("\n\na\n\n");
  EXPECT_THAT(lines_, ElementsAre("", "", "a", ""));
}

TEST_F(LineAssemblerTest, EmptyChunkDoesNothing) {
  Feed("");
  Feed("ab");
  Feed("");
  Feed("c\n");
  EXPECT_THAT(lines_, ElementsAre("abc"));
}

TEST_F(LineAssemblerTest, CarriageReturnIsPartOfTheLine) {
  Feed("win\r\n");
  EXPECT_THAT(lines_, ElementsAre("win\r"));
}

TEST_F(LineAssemblerTest, OverlongPartialLineIsEmittedAsAPiece) {
  const std::string half(LineAssembler::kMaxLine / 2, 'x');
  Feed(half);
  EXPECT_THAT(lines_, IsEmpty());
  Feed(half);  // reaches kMaxLine without a newline
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0].size(), LineAssembler::kMaxLine);
  Feed("tail\n");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[1], "tail");
}

TEST_F(LineAssemblerTest, OverlongChunkWithoutNewlineIsNotHeld) {
  Feed(std::string(LineAssembler::kMaxLine + 10, 'y'));
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0], std::string(LineAssembler::kMaxLine + 10, 'y'));
  Flush();
  EXPECT_EQ(lines_.size(), 1u);
}

TEST_F(LineAssemblerTest, ShortPartialIsHeld) {
  Feed(std::string(LineAssembler::kMaxLine - 1, 'z'));
  EXPECT_THAT(lines_, IsEmpty());
  Feed("\n");
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0].size(), LineAssembler::kMaxLine - 1);
}

TEST(LineTailTest, KeepsTheLastLines) {
  LineTail tail(3);
  for (const char* line : {"1", "2", "3", "4", "5"}) tail.Add(line);
  EXPECT_THAT(tail.lines(), ElementsAre("3", "4", "5"));
}

TEST(LineTailTest, FewerLinesThanCapacity) {
  LineTail tail(5);
  tail.Add("a");
  tail.Add("");
  EXPECT_THAT(tail.lines(), ElementsAre("a", ""));
}

TEST(LineTailTest, ZeroCapacityKeepsNothing) {
  LineTail tail(0);
  tail.Add("a");
  EXPECT_THAT(tail.lines(), IsEmpty());
}

TEST(LineTailTest, TruncatesLongLines) {
  LineTail tail(2);
  tail.Add(std::string(400, 'a'));
  tail.Add(std::string(1000, 'b'));
  ASSERT_EQ(tail.lines().size(), 2u);
  EXPECT_EQ(tail.lines()[0], std::string(400, 'a'));
  EXPECT_EQ(tail.lines()[1], std::string(400, 'b') + " [...]");
}

TEST_F(LineAssemblerTest, NewlineRightAfterAForcedSplitAddsNoEmptyLine) {
  Feed(std::string(LineAssembler::kMaxLine, 'x'));
  Feed("\nnext\n");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[0].size(), LineAssembler::kMaxLine);
  EXPECT_EQ(lines_[1], "next");
}

}  // namespace
}  // namespace ddprun
