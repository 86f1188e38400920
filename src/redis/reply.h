// reply.h — Redis's RESP2 wire format: the commands delayq sends and the replies it reads.
// Command encodes arguments as a RESP array of bulk strings (binary-safe). ReplyReader turns a
// byte stream, fed in pieces of any size, into whole Reply values; it parses with hiredis's
// reader (libhiredis), which builds the Reply values in place. Costs: a command is encoded once,
// where it is built; a reply is made once, by the parse. Not thread-safe.
// Protocol: https://redis.io/docs/reference/protocol-spec/
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

struct redisReader;

namespace delayq::redis {

// One command: its arguments, already encoded.
class Command {
 public:
  Command() = default;
  Command(std::initializer_list<std::string_view> args);

  Command& arg(std::string_view value) { return arg(value, {}); }
  // One argument made of `head` then `tail` (a shard's key: its base, then its own name), with
  // no string made for it.
  Command& arg(std::string_view head, std::string_view tail);
  Command& arg(std::int64_t value);
  // Adds `count` arguments already encoded as arg() encodes them (`bytes`); where their copy
  // starts in the command, for the caller to write into (valid until the next argument).
  char* add_encoded(std::string_view bytes, std::size_t count);
  // Room for arguments of `bytes` in all, so that a command of many is encoded without growing.
  void reserve(std::size_t bytes) { args_.reserve(bytes); }
  // What an argument of `bytes` adds to a command ("$<length>\r\n<bytes>\r\n"), at most.
  [[nodiscard]] static constexpr std::size_t encoded_size(std::size_t bytes) noexcept {
    return bytes + 25;  // '$', 20 digits, two "\r\n"
  }

  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  // Appends "*<count>\r\n" and the arguments to `out`.
  void encode(std::string& out) const;

 private:
  std::string args_;  // "$<len>\r\n<bytes>\r\n" for each argument
  std::size_t count_ = 0;
  std::string name_;  // the first argument, for messages
};

enum class ReplyType { kString, kArray, kInteger, kNil, kStatus, kError };

struct Reply {
  ReplyType type = ReplyType::kNil;
  std::string str;  // kString (bulk), kStatus ("OK"), kError ("MOVED 3999 127.0.0.1:6381")
  std::int64_t integer = 0;
  std::vector<Reply> elements;  // kArray

  [[nodiscard]] bool is_error() const noexcept { return type == ReplyType::kError; }
  [[nodiscard]] bool is_nil() const noexcept { return type == ReplyType::kNil; }
  // An error's first word ("MOVED", "ERR", "TRYAGAIN"); empty for other replies.
  [[nodiscard]] std::string_view error_code() const noexcept;
  // A bulk string, a status or an error as text; an integer in decimal; "" otherwise.
  [[nodiscard]] std::string text() const;

  static Reply status(std::string text) { return {ReplyType::kStatus, std::move(text), 0, {}}; }
  static Reply error(std::string text) { return {ReplyType::kError, std::move(text), 0, {}}; }
  static Reply string(std::string text) { return {ReplyType::kString, std::move(text), 0, {}}; }
  static Reply number(std::int64_t value) { return {ReplyType::kInteger, {}, value, {}}; }
};

// How a reply reads in a message or a test: "OK", "(error) MOVED 1 h:1", "(integer) 3",
// "(nil)", "\"bulk\"", "[a, b]".
[[nodiscard]] std::string describe(const Reply& reply);

class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  // Adds received bytes.
  void feed(std::string_view bytes);
  // The next whole reply, nullopt if more bytes are needed, or kCorruption when the stream is
  // not RESP (the connection must then be dropped: nothing after it can be trusted).
  [[nodiscard]] Result<std::optional<Reply>> next();

 private:
  redisReader* reader_;
  Reply root_;  // the reply being read (hiredis's privdata)
};

}  // namespace delayq::redis
