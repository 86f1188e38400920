// fakes.h — a Redis for the Redis broker's unit tests (never linked into delayqd).
// ScriptedRedis is a Caller that answers nothing by itself: each request waits in `calls` until
// the test answers it (or a responder given by the test does), so a test decides what Redis
// says, in which order, and which answers are lost. It delivers the channels' messages the test
// publishes, and holds sync_shards() rounds until answered. Time: timing/manual_clock.h.
#pragma once

#include <boost/asio/io_context.hpp>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/job.h"
#include "broker/redis/caller.h"

namespace delayq::broker::redis::testing {

// A request as the broker made it. For a jobs.lua call (FCALL), op() and args() are the
// operation and what follows it (without the number and the caller's name that the broker appends).
struct Call {
  std::uint16_t slot = 0;
  std::string address;                             // run_at()'s node, else ""
  std::vector<std::vector<std::string>> commands;  // each command's arguments
  int replicas = 0;                                // the request's WAIT, if any
  delayq::redis::Callback<std::vector<delayq::redis::Reply>> done;

  [[nodiscard]] bool script() const;       // an FCALL of jobs.lua
  [[nodiscard]] bool over_memory() const;  // the allow-oom registration (<name>_oom)
  [[nodiscard]] std::vector<std::string> keys() const;
  [[nodiscard]] std::string op() const;                 // jobs.lua's op; else the command name
  [[nodiscard]] std::vector<std::string> args() const;  // after op(), without tag() and caller()
  // The call's number and the numbers of answers it forgets ("" for a call that changes nothing).
  [[nodiscard]] std::string tag() const;
  [[nodiscard]] std::string caller() const;  // the node that made a jobs.lua call
};

class ScriptedRedis final : public Caller {
 public:
  explicit ScriptedRedis(boost::asio::io_context& io);

  // Calls not answered yet, oldest first.
  std::deque<Call> calls;
  // Runs for each call as it is made; an answer it gives completes the call (on the executor),
  // nullopt leaves it in `calls`.
  std::function<std::optional<Result<std::vector<delayq::redis::Reply>>>(const Call&)> responder;

  // The oldest unanswered call whose op() is `op`, taken out of `calls`; nullopt if none.
  std::optional<Call> take(const std::string& op);
  // How many unanswered calls have op() `op`.
  [[nodiscard]] std::size_t count(const std::string& op) const;
  // Completes `call` on the executor with `reply` as its one command's reply (for a jobs.lua
  // call, wrapped as jobs.lua wraps it: {reply, readied}); or with a failure.
  void answer(Call& call, delayq::redis::Reply reply, delayq::redis::Reply readied = {});
  void fail(Call& call, Status why);
  // Answers every `each` call of `op` waiting (a read on many shards in one call) with
  // `answer(shard, the op's arguments)` for each shard it names; how many shards it answered.
  std::size_t answer_each(
      const std::string& op,
      const std::function<delayq::redis::Reply(std::uint32_t, const std::vector<std::string>&)>&
          answer);
  // A message on shard channel `index`, or on the node-wide channel.
  void publish_shard(std::size_t index, const std::string& payload);
  void publish(const std::string& payload);
  // sync_shards() rounds waiting, answered with each channel's `held`.
  [[nodiscard]] std::size_t syncs_waiting() const { return syncs_.size(); }
  void answer_syncs(std::vector<bool> held);

  std::vector<std::string> primary_list = {"127.0.0.1:7000"};
  std::string subscribe_error;
  std::set<std::size_t> unsubscribed;  // shard channels not subscribed now, by index

  void start(std::function<void(Status)> done) override;
  // Drops every call under way without answering it, as delayq::redis::Client::close() does (their
  // completions hold the node: kept, they would keep it alive).
  void close() override;
  void run(delayq::redis::Request request,
           delayq::redis::Callback<std::vector<delayq::redis::Reply>> done) override;
  void run(std::uint16_t slot, delayq::redis::Command command,
           delayq::redis::Callback<delayq::redis::Reply> done) override;
  void run_at(const std::string& address, delayq::redis::Command command,
              delayq::redis::Callback<delayq::redis::Reply> done) override;
  void subscribe(std::string channel, std::function<void(std::string)> message,
                 std::function<void()> subscribed) override;
  void subscribe_shards(std::vector<std::string> channels,
                        std::function<void(std::size_t, std::string)> message,
                        std::function<void(std::size_t)> subscribed) override;
  void sync_shards(std::function<void(std::vector<bool>)> done) override;
  [[nodiscard]] std::string shard_subscribe_error() const override { return subscribe_error; }
  [[nodiscard]] std::size_t shard_channels_subscribed() const override {
    return shard_channels.size() - unsubscribed.size();
  }
  [[nodiscard]] bool shard_channel_subscribed(std::size_t index) const override {
    return index < shard_channels.size() && !unsubscribed.contains(index);
  }
  [[nodiscard]] bool unsettled(std::uint16_t slot) const override {
    return unsettled_slots.contains(slot);
  }
  std::set<std::uint16_t> unsettled_slots;  // as unsettled() says
  // Only `answered`: the calls and sync_shards() rounds answered so far (a failure is none).
  [[nodiscard]] delayq::redis::ClientStats stats() const override {
    delayq::redis::ClientStats stats;
    stats.answered = answered_;
    return stats;
  }
  [[nodiscard]] std::vector<std::string> primaries() const override { return primary_list; }
  [[nodiscard]] std::string primary_of(std::uint16_t /*slot*/) const override {
    return primary_list.empty() ? std::string() : primary_list.front();
  }

  bool closed = false;
  std::vector<std::string> shard_channels;  // as subscribe_shards() named them
  std::function<void()> resubscribed;       // subscribe()'s `subscribed`
  std::function<void(std::size_t)> shard_resubscribed;

 private:
  void made(Call call);
  boost::asio::io_context& io_;
  std::function<void(std::string)> message_;
  std::function<void(std::size_t, std::string)> shard_message_;
  std::vector<std::function<void(std::vector<bool>)>> syncs_;
  std::uint64_t answered_ = 0;
};

// Jobs.lua's replies, as the broker reads them.
namespace reply {
[[nodiscard]] delayq::redis::Reply array(std::vector<delayq::redis::Reply> elements);
[[nodiscard]] delayq::redis::Reply ok(
    std::vector<delayq::redis::Reply> rest = {});  // {'ok', rest...}
[[nodiscard]] delayq::redis::Reply code(const std::string& code, const std::string& message = "");
// A job's record as jobs.lua packs it (layout 2), with the body behind it.
[[nodiscard]] std::string record(const JobView& job, const std::string& body,
                                 const std::string& holder = "");
// {'ok', id, record, false, now} for a job in `state`.
[[nodiscard]] delayq::redis::Reply job(const JobView& job, std::int64_t now_unix_ms,
                                       const std::string& body = "");
}  // namespace reply

}  // namespace delayq::broker::redis::testing
