#include "broker/redis/fakes.h"

#include <msgpuck.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "base/check.h"
#include "broker/redis/layout.h"

namespace delayq::broker::redis::testing {
namespace {

// A command's arguments, read back from its RESP encoding.
std::vector<std::string> arguments(const delayq::redis::Command& command) {
  std::string wire;
  command.encode(wire);
  delayq::redis::ReplyReader reader;
  reader.feed(wire);
  auto parsed = reader.next();
  DELAYQ_CHECK(parsed.is_ok() && parsed.value().has_value());
  std::vector<std::string> out;
  for (auto& element : parsed.value()->elements) out.push_back(std::move(element.str));
  return out;
}

}  // namespace

bool Call::script() const {
  return !commands.empty() && !commands[0].empty() && commands[0][0] == "FCALL";
}

bool Call::over_memory() const {
  return script() && commands[0].size() > 1 && commands[0][1].ends_with("_oom");
}

std::vector<std::string> Call::keys() const {
  if (!script() || commands[0].size() < 3) return {};
  const auto count = static_cast<std::size_t>(std::stoul(commands[0][2]));
  return {commands[0].begin() + 3, commands[0].begin() + 3 + static_cast<std::ptrdiff_t>(count)};
}

std::string Call::op() const {
  if (commands.empty() || commands[0].empty()) return "";
  if (!script()) return commands[0][0];
  const std::size_t at = 3 + keys().size();
  return at < commands[0].size() ? commands[0][at] : "";
}

std::vector<std::string> Call::args() const {
  if (!script()) {
    if (commands.empty() || commands[0].empty()) return {};
    return {commands[0].begin() + 1, commands[0].end()};
  }
  const std::size_t at = 3 + keys().size() + 1;
  if (commands[0].size() <= at) return {};
  return {commands[0].begin() + static_cast<std::ptrdiff_t>(at), commands[0].end() - 2};
}

std::string Call::tag() const {
  return script() && commands[0].size() > 1 ? commands[0][commands[0].size() - 2] : "";
}

std::string Call::caller() const {
  return script() ? commands[0].back() : "";
}

ScriptedRedis::ScriptedRedis(boost::asio::io_context& io) : io_(io) {}

void ScriptedRedis::made(Call call) {
  if (responder) {
    if (auto answer = responder(call)) {
      if (answer->is_ok()) ++answered_;
      boost::asio::post(io_, [done = std::move(call.done), answer = std::move(*answer)]() mutable {
        done(std::move(answer));
      });
      return;
    }
  }
  calls.push_back(std::move(call));
}

std::optional<Call> ScriptedRedis::take(const std::string& op) {
  const auto it =
      std::find_if(calls.begin(), calls.end(), [&](const Call& c) { return c.op() == op; });
  if (it == calls.end()) return std::nullopt;
  Call call = std::move(*it);
  calls.erase(it);
  return call;
}

std::size_t ScriptedRedis::count(const std::string& op) const {
  return static_cast<std::size_t>(
      std::count_if(calls.begin(), calls.end(), [&](const Call& c) { return c.op() == op; }));
}

std::size_t ScriptedRedis::answer_each(
    const std::string& op,
    const std::function<delayq::redis::Reply(std::uint32_t, const std::vector<std::string>&)>&
        answer) {
  std::size_t answered = 0;
  std::vector<Call> others;
  while (auto call = take("each")) {
    // each rows k op arg... base...
    const auto args = call->args();
    const auto k = std::stoul(args.at(1));
    if (args.at(2) != op) {
      others.push_back(std::move(*call));
      continue;
    }
    const std::vector<std::string> inner(args.begin() + 3,
                                         args.begin() + 3 + static_cast<std::ptrdiff_t>(k));
    std::vector<delayq::redis::Reply> each;
    for (std::size_t i = 3 + k; i < args.size(); ++i) {
      const auto open = args[i].find('{');
      each.push_back(
          answer(static_cast<std::uint32_t>(std::stoul(args[i].substr(open + 1))), inner));
      ++answered;
    }
    this->answer(*call, reply::ok({reply::array(std::move(each))}));
  }
  for (auto& other : others) calls.push_back(std::move(other));
  return answered;
}

void ScriptedRedis::answer(Call& call, delayq::redis::Reply reply, delayq::redis::Reply readied) {
  std::vector<delayq::redis::Reply> replies;
  if (call.script() && !reply.is_error()) {
    if (readied.type == delayq::redis::ReplyType::kNil) readied = reply::array({});
    replies.push_back(reply::array({std::move(reply), std::move(readied)}));
  } else {
    replies.push_back(std::move(reply));
  }
  if (call.replicas > 0) replies.push_back(delayq::redis::Reply::number(call.replicas));
  ++answered_;
  boost::asio::post(io_, [done = std::move(call.done), replies = std::move(replies)]() mutable {
    done(std::move(replies));
  });
}

void ScriptedRedis::fail(Call& call, Status why) {
  boost::asio::post(
      io_, [done = std::move(call.done), why = std::move(why)]() mutable { done(std::move(why)); });
}

void ScriptedRedis::publish_shard(std::size_t index, const std::string& payload) {
  DELAYQ_CHECK(shard_message_ != nullptr);
  boost::asio::post(io_, [this, index, payload] { shard_message_(index, payload); });
}

void ScriptedRedis::publish(const std::string& payload) {
  DELAYQ_CHECK(message_ != nullptr);
  boost::asio::post(io_, [this, payload] { message_(payload); });
}

void ScriptedRedis::answer_syncs(std::vector<bool> held) {
  auto waiting = std::exchange(syncs_, {});
  answered_ += waiting.size();
  for (auto& done : waiting) {
    boost::asio::post(io_, [done = std::move(done), held] { done(held); });
  }
}

void ScriptedRedis::close() {
  closed = true;
  calls.clear();
  syncs_.clear();
  responder = nullptr;
}

void ScriptedRedis::start(std::function<void(Status)> done) {
  boost::asio::post(io_, [done = std::move(done)] { done(Status::ok()); });
}

void ScriptedRedis::run(delayq::redis::Request request,
                        delayq::redis::Callback<std::vector<delayq::redis::Reply>> done) {
  Call call;
  call.slot = request.slot;
  call.replicas = request.replicas;
  for (const auto& command : request.commands) call.commands.push_back(arguments(command));
  call.done = std::move(done);
  made(std::move(call));
}

void ScriptedRedis::run(std::uint16_t slot, delayq::redis::Command command,
                        delayq::redis::Callback<delayq::redis::Reply> done) {
  Call call;
  call.slot = slot;
  call.commands.push_back(arguments(command));
  call.done = [done = std::move(done)](Result<std::vector<delayq::redis::Reply>> replies) {
    if (!replies.is_ok()) return done(replies.status());
    done(std::move(replies.value().front()));
  };
  made(std::move(call));
}

void ScriptedRedis::run_at(const std::string& address, delayq::redis::Command command,
                           delayq::redis::Callback<delayq::redis::Reply> done) {
  Call call;
  call.address = address;
  call.commands.push_back(arguments(command));
  call.done = [done = std::move(done)](Result<std::vector<delayq::redis::Reply>> replies) {
    if (!replies.is_ok()) return done(replies.status());
    done(std::move(replies.value().front()));
  };
  made(std::move(call));
}

void ScriptedRedis::subscribe(std::string /*channel*/, std::function<void(std::string)> message,
                              std::function<void()> subscribed) {
  message_ = std::move(message);
  resubscribed = std::move(subscribed);
}

void ScriptedRedis::subscribe_shards(std::vector<std::string> channels,
                                     std::function<void(std::size_t, std::string)> message,
                                     std::function<void(std::size_t)> subscribed) {
  shard_channels = std::move(channels);
  shard_message_ = std::move(message);
  shard_resubscribed = std::move(subscribed);
}

void ScriptedRedis::sync_shards(std::function<void(std::vector<bool>)> done) {
  syncs_.push_back(std::move(done));
}

namespace reply {

delayq::redis::Reply array(std::vector<delayq::redis::Reply> elements) {
  delayq::redis::Reply r;
  r.type = delayq::redis::ReplyType::kArray;
  r.elements = std::move(elements);
  return r;
}

delayq::redis::Reply ok(std::vector<delayq::redis::Reply> rest) {
  rest.insert(rest.begin(), delayq::redis::Reply::string("ok"));
  return array(std::move(rest));
}

delayq::redis::Reply code(const std::string& code, const std::string& message) {
  std::vector<delayq::redis::Reply> elements = {delayq::redis::Reply::string(code)};
  if (!message.empty()) elements.push_back(delayq::redis::Reply::string(message));
  return array(std::move(elements));
}

std::string record(const JobView& job, const std::string& body, const std::string& holder) {
  std::string out;
  char buffer[16];
  const auto put = [&](char* end) { out.append(buffer, static_cast<std::size_t>(end - buffer)); };
  put(mp_encode_uint(buffer, kLayout));
  put(mp_encode_uint(buffer, job.attached ? 1 : 0));
  put(mp_encode_uint(buffer, static_cast<std::uint64_t>(job.state)));
  put(mp_encode_uint(buffer, job.priority));
  put(mp_encode_uint(buffer, static_cast<std::uint64_t>(job.due_unix_ms)));
  put(mp_encode_uint(buffer, static_cast<std::uint64_t>(job.deadline_unix_ms)));
  put(mp_encode_uint(buffer, static_cast<std::uint64_t>(job.created_unix_ms)));
  put(mp_encode_uint(buffer, static_cast<std::uint64_t>(job.delay_ms)));
  put(mp_encode_uint(buffer, static_cast<std::uint64_t>(job.ttr.count())));
  for (const std::uint32_t n : {job.counters.reserves, job.counters.timeouts, job.counters.releases,
                                job.counters.buries, job.counters.kicks}) {
    put(mp_encode_uint(buffer, n));
  }
  for (const std::string* text : {&job.tube, &job.key, &job.group, &holder}) {
    put(mp_encode_strl(buffer, static_cast<std::uint32_t>(text->size())));
    out.append(*text);
  }
  return out + body;
}

delayq::redis::Reply job(const JobView& view, std::int64_t now_unix_ms, const std::string& body) {
  delayq::redis::Reply attachment;  // nil: no delivery
  return ok({delayq::redis::Reply::string(std::to_string(view.id)),
             delayq::redis::Reply::string(record(view, body)), attachment,
             delayq::redis::Reply::string(std::to_string(now_unix_ms))});
}

}  // namespace reply

}  // namespace delayq::broker::redis::testing
