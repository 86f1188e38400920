#include "redis/reply.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace delayq::redis {
namespace {

// Every kind of RESP2 reply, with a bulk string that holds "\r\n" and a nested array.
const std::string kStream =
    "+OK\r\n"
    "-MOVED 3999 127.0.0.1:6381\r\n"
    ":-42\r\n"
    "$5\r\na\r\nbc\r\n"
    "$0\r\n\r\n"
    "$-1\r\n"
    "*-1\r\n"
    "*0\r\n"
    "*3\r\n:1\r\n*2\r\n$3\r\nfoo\r\n$-1\r\n+PONG\r\n";

const std::vector<std::string> kExpected = {
    "OK",
    "(error) MOVED 3999 127.0.0.1:6381",
    "(integer) -42",
    "\"a\r\nbc\"",
    "\"\"",
    "(nil)",
    "(nil)",
    "[]",
    "[(integer) 1, [\"foo\", (nil)], PONG]",
};

std::vector<std::string> drain(ReplyReader& reader) {
  std::vector<std::string> out;
  for (;;) {
    auto next = reader.next();
    EXPECT_TRUE(next.is_ok()) << next.status().to_string();
    if (!next.is_ok() || !next.value().has_value()) return out;
    out.push_back(describe(*next.value()));
  }
}

// What reading `bytes` first fails with (kOk when nothing fails before they are read).
Code first_error(std::string_view bytes) {
  ReplyReader reader;
  reader.feed(bytes);
  for (;;) {
    auto next = reader.next();
    if (!next.is_ok()) return next.code();
    if (!next.value().has_value()) return Code::kOk;
  }
}

TEST(ReplyReaderTest, ReadsEveryKindOfReply) {
  ReplyReader reader;
  reader.feed(kStream);
  EXPECT_EQ(drain(reader), kExpected);
}

TEST(ReplyReaderTest, AStreamSplitAtEveryByteReadsTheSame) {
  for (std::size_t split = 0; split <= kStream.size(); ++split) {
    ReplyReader reader;
    reader.feed(std::string_view(kStream).substr(0, split));
    auto got = drain(reader);
    reader.feed(std::string_view(kStream).substr(split));
    const auto rest = drain(reader);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, kExpected) << "split at " << split;
  }
}

TEST(ReplyReaderTest, AStreamFedByteByByteReadsTheSame) {
  ReplyReader reader;
  std::vector<std::string> got;
  for (const char c : kStream) {
    reader.feed(std::string_view(&c, 1));
    const auto some = drain(reader);
    got.insert(got.end(), some.begin(), some.end());
  }
  EXPECT_EQ(got, kExpected);
}

// Replies are built in place, nested arrays inside the slots of their parents: each reply read
// is whole and the next starts afresh, whatever the one before held.
TEST(ReplyReaderTest, NestedArraysAndTheRepliesAfterThemReadWhole) {
  ReplyReader reader;
  reader.feed("*2\r\n*2\r\n*1\r\n$26\r\nabcdefghijklmnopqrstuvwxyz\r\n:7\r\n*0\r\n$-1\r\n");
  reader.feed(":3\r\n*1\r\n+x\r\n");
  EXPECT_EQ(drain(reader),
            (std::vector<std::string>{"[[[\"abcdefghijklmnopqrstuvwxyz\"], (integer) 7], []]",
                                      "(nil)", "(integer) 3", "[x]"}));
}

// A reader dropped inside a reply, or one that found corruption inside an array, frees what it
// read (the sanitizers' builds check).
TEST(ReplyReaderTest, AReaderDroppedOrCorruptedInsideAReplyLeavesNothingBehind) {
  {
    ReplyReader reader;
    reader.feed("*3\r\n$30\r\n012345678901234567890123456789\r\n*2\r\n:1\r\n");
    const auto next = reader.next();
    ASSERT_TRUE(next.is_ok());
    EXPECT_FALSE(next.value().has_value());
  }
  EXPECT_EQ(first_error("*2\r\n$30\r\n012345678901234567890123456789\r\n?bad\r\n"),
            Code::kCorruption);
}

// An array of more elements than any reply holds (2^24) is an error of the stream; one of 2^24
// is read as far as its elements have come (its header alone asks for little memory).
TEST(ReplyReaderTest, AnArrayOfMoreElementsThanAnyReplyHoldsIsCorruption) {
  EXPECT_EQ(first_error("*16777217\r\n:1\r\n"), Code::kCorruption);
  EXPECT_EQ(first_error("*16777216\r\n:1\r\n*16777216\r\n:2\r\n"), Code::kOk);
}

TEST(ReplyReaderTest, BytesThatAreNotRespAreCorruption) {
  EXPECT_EQ(first_error("?what\r\n"), Code::kCorruption);
}

TEST(ReplyTest, AnErrorsCodeIsItsFirstWord) {
  EXPECT_EQ(Reply::error("MOVED 1 h:2").error_code(), "MOVED");
  EXPECT_EQ(Reply::error("CLUSTERDOWN").error_code(), "CLUSTERDOWN");
  EXPECT_EQ(Reply::status("OK").error_code(), "");
  EXPECT_EQ(Reply::number(7).text(), "7");
}

TEST(CommandTest, EncodesAnArrayOfBulkStrings) {
  Command command{"SET", "k\r\n"};
  command.arg(std::int64_t{-5});
  std::string wire;
  command.encode(wire);
  EXPECT_EQ(wire, "*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$2\r\n-5\r\n");
  EXPECT_EQ(command.name(), "SET");
  EXPECT_EQ(command.size(), 3U);
}

TEST(CommandTest, AnEncodedCommandReadsBackAsTheSameArguments) {
  Command command{"EVALSHA", std::string_view("\0bin\xff", 5), ""};
  std::string wire;
  command.encode(wire);
  // A command is a RESP array of bulk strings: the reader reads it as one.
  ReplyReader reader;
  reader.feed(wire);
  auto next = reader.next();
  ASSERT_TRUE(next.is_ok());
  ASSERT_TRUE(next.value().has_value());
  const Reply& array = *next.value();
  ASSERT_EQ(array.elements.size(), 3U);
  EXPECT_EQ(array.elements[1].str, std::string("\0bin\xff", 5));
  EXPECT_EQ(array.elements[2].str, "");
}

}  // namespace
}  // namespace delayq::redis
