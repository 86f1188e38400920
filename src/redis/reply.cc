#include "redis/reply.h"

#include <hiredis/hiredis.h>

#include <charconv>

namespace delayq::redis {

// --- Command

Command::Command(std::initializer_list<std::string_view> args) {
  for (const auto value : args) arg(value);
}

Command& Command::arg(std::string_view value) {
  if (count_ == 0) name_ = std::string(value);
  // "$<length>\r\n" made in place: a call names thirty or so arguments.
  char head[24] = {'$'};
  auto [end, error] = std::to_chars(head + 1, head + sizeof head - 2, value.size());
  DELAYQ_CHECK(error == std::errc{});
  *end++ = '\r';
  *end++ = '\n';
  args_.append(head, static_cast<std::size_t>(end - head));
  args_.append(value).append("\r\n", 2);
  ++count_;
  return *this;
}

Command& Command::arg(std::int64_t value) {
  char digits[24];
  const auto [end, error] = std::to_chars(digits, digits + sizeof digits, value);
  DELAYQ_CHECK(error == std::errc{});
  return arg(std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

void Command::encode(std::string& out) const {
  DELAYQ_CHECK(count_ > 0);
  out.append("*").append(std::to_string(count_)).append("\r\n").append(args_);
}

// --- Reply

std::string_view Reply::error_code() const noexcept {
  if (type != ReplyType::kError) return {};
  const std::string_view text(str);
  return text.substr(0, text.find(' '));
}

std::string Reply::text() const {
  switch (type) {
    case ReplyType::kString:
    case ReplyType::kStatus:
    case ReplyType::kError:
      return str;
    case ReplyType::kInteger:
      return std::to_string(integer);
    case ReplyType::kArray:
    case ReplyType::kNil:
      return {};
  }
  return {};
}

std::string describe(const Reply& reply) {
  switch (reply.type) {
    case ReplyType::kString:
      return "\"" + reply.str + "\"";
    case ReplyType::kStatus:
      return reply.str;
    case ReplyType::kError:
      return "(error) " + reply.str;
    case ReplyType::kInteger:
      return "(integer) " + std::to_string(reply.integer);
    case ReplyType::kNil:
      return "(nil)";
    case ReplyType::kArray: {
      std::string text = "[";
      for (std::size_t i = 0; i < reply.elements.size(); ++i) {
        if (i > 0) text += ", ";
        text += describe(reply.elements[i]);
      }
      return text + "]";
    }
  }
  return {};
}

// --- ReplyReader

namespace {

Reply convert(const redisReply& from) {
  Reply to;
  switch (from.type) {
    case REDIS_REPLY_STRING:
      to.type = ReplyType::kString;
      break;
    case REDIS_REPLY_STATUS:
      to.type = ReplyType::kStatus;
      break;
    case REDIS_REPLY_ERROR:
      to.type = ReplyType::kError;
      break;
    case REDIS_REPLY_INTEGER:
      to.type = ReplyType::kInteger;
      to.integer = from.integer;
      return to;
    case REDIS_REPLY_ARRAY:
      to.type = ReplyType::kArray;
      to.elements.reserve(from.elements);
      for (std::size_t i = 0; i < from.elements; ++i)
        to.elements.push_back(convert(*from.element[i]));
      return to;
    default:
      return to;  // nil
  }
  to.str.assign(from.str, from.len);
  return to;
}

}  // namespace

ReplyReader::ReplyReader() : reader_(redisReaderCreate()) {
  DELAYQ_CHECK(reader_ != nullptr);
}

ReplyReader::~ReplyReader() {
  redisReaderFree(reader_);
}

void ReplyReader::feed(std::string_view bytes) {
  // Fails only when allocation fails (or after an earlier protocol error, which next() reports).
  redisReaderFeed(reader_, bytes.data(), bytes.size());
}

Result<std::optional<Reply>> ReplyReader::next() {
  void* object = nullptr;
  if (redisReaderGetReply(reader_, &object) != REDIS_OK) {
    return Status(Code::kCorruption, std::string("not a Redis reply: ") + reader_->errstr);
  }
  if (object == nullptr) return std::optional<Reply>();
  std::unique_ptr<redisReply, decltype(&freeReplyObject)> owned(static_cast<redisReply*>(object),
                                                                &freeReplyObject);
  return std::optional<Reply>(convert(*owned));
}

}  // namespace delayq::redis
