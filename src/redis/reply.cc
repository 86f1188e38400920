#include "redis/reply.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <new>
#include <stdexcept>

namespace delayq::redis {

// --- Command

Command::Command(std::initializer_list<std::string_view> args) {
  for (const auto value : args) arg(value);
}

Command& Command::arg(std::string_view head, std::string_view tail) {
  if (count_ == 0) name_ = std::string(head).append(tail);
  // Written in place ("$<length>\r\n<head><tail>\r\n"), the string grown once and cut to
  // what was written: a call names thirty or so arguments.
  const std::size_t length = head.size() + tail.size();
  const std::size_t at = args_.size();
  args_.resize(at + encoded_size(length));
  char* out = args_.data() + at;
  *out++ = '$';
  const auto [end, error] = std::to_chars(out, out + 20, length);
  DELAYQ_CHECK(error == std::errc{});
  out = end;
  *out++ = '\r';
  *out++ = '\n';
  for (const std::string_view part : {head, tail}) {
    if (part.empty()) continue;  // (an empty view's data() may be null, which memcpy may not take)
    std::memcpy(out, part.data(), part.size());
    out += part.size();
  }
  *out++ = '\r';
  *out++ = '\n';
  args_.resize(static_cast<std::size_t>(out - args_.data()));
  ++count_;
  return *this;
}

Command& Command::arg(std::int64_t value) {
  char digits[24];
  const auto [end, error] = std::to_chars(digits, digits + sizeof digits, value);
  DELAYQ_CHECK(error == std::errc{});
  return arg(std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

char* Command::add_encoded(std::string_view bytes, std::size_t count) {
  DELAYQ_CHECK(count_ > 0);  // the name comes first, through arg()
  const std::size_t at = args_.size();
  args_.append(bytes);
  count_ += count;
  return args_.data() + at;
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

// hiredis's reader builds Reply values in place (its object functions): a reply's root is the
// ReplyReader's own (the reader's privdata), every element the next of its array's vector. So
// a reply costs no allocation beyond its strings and vectors, and nothing is copied out of
// hiredis's own objects. An array grows as its elements come (room for a few thousand is made
// at its header), so a header alone asks for little memory; hiredis holds pointers only to the
// arrays still being filled, which a later sibling's growth cannot move.
Reply* place(const redisReadTask* task) {
  if (task->parent == nullptr) {
    auto* root = static_cast<Reply*>(task->privdata);
    *root = Reply{};
    return root;
  }
  auto& elements = static_cast<Reply*>(task->parent->obj)->elements;
  DELAYQ_CHECK(static_cast<std::size_t>(task->idx) == elements.size());
  return &elements.emplace_back();
}

// A value too large to hold (a stream that is not what Redis sends) is hiredis's
// out-of-memory error, which next() reports, not an exception through its C frames.
template <typename Make>
void* made(Make make) noexcept {
  try {
    return make();
  } catch (const std::bad_alloc&) {
    return nullptr;
  } catch (const std::length_error&) {
    return nullptr;
  }
}

void* make_string(const redisReadTask* task, char* text, std::size_t length) {
  return made([&] {
    Reply* to = place(task);
    to->type = task->type == REDIS_REPLY_STATUS  ? ReplyType::kStatus
               : task->type == REDIS_REPLY_ERROR ? ReplyType::kError
                                                 : ReplyType::kString;
    to->str.assign(text, length);
    return to;
  });
}

// More elements than any reply of Redis to delayq holds: a stream that is not Redis's.
constexpr int kMostElements = 1 << 24;

void* make_array(const redisReadTask* task, int elements) {
  if (elements > kMostElements) return nullptr;
  return made([&] {
    Reply* to = place(task);
    to->type = ReplyType::kArray;
    to->elements.reserve(static_cast<std::size_t>(std::clamp(elements, 0, 4096)));
    return to;
  });
}

void* make_integer(const redisReadTask* task, long long value) {
  return made([&] {
    Reply* to = place(task);
    to->type = ReplyType::kInteger;
    to->integer = value;
    return to;
  });
}

void* make_nil(const redisReadTask* task) {
  return made([&] { return place(task); });  // a Reply is nil as made
}

// The root is the ReplyReader's and every element a part of it: nothing to free on its own.
void free_nothing(void*) {}

redisReplyObjectFunctions in_place = {.createString = make_string,
                                      .createArray = make_array,
                                      .createInteger = make_integer,
                                      .createNil = make_nil,
                                      .freeObject = free_nothing};

}  // namespace

ReplyReader::ReplyReader() : reader_(redisReaderCreateWithFunctions(&in_place)) {
  DELAYQ_CHECK(reader_ != nullptr);
  reader_->privdata = &root_;
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
  return std::optional<Reply>(std::move(root_));
}

}  // namespace delayq::redis
