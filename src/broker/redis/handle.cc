#include "broker/redis/handle.h"

#include "broker/redis/replies.h"

namespace delayq::broker::redis {

namespace {

// One read or write on several shards (on_shards(), fold_every_shard()): what it asks, and each
// shard's reply, kept or handed to `each`, until the first failure ends it.
struct Gather {
  std::shared_ptr<Core> core;
  std::shared_ptr<SessionState> state;
  std::vector<std::string> args;
  bool write = false;
  std::string lane;            // a read's own, for its calls across slots
  std::vector<Reply> replies;  // by shard, unless `each` takes them
  std::function<void(Reply)> each;
  std::uint32_t left = 0;
  bool finished = false;
  std::function<void(Result<std::vector<Reply>>)> then;
};

// A shard's reply (a kNotFound is one), or a failure, which ends the gathering at once.
void land(const std::shared_ptr<Gather>& g, std::uint32_t shard, Result<Reply> reply) {
  if (g->finished) return;
  const Status failed = reply.is_ok() ? status_of(reply.value()) : reply.status();
  if (!failed.is_ok() && failed.code() != Code::kNotFound) {
    g->finished = true;
    if (g->state->alive) g->then(failed);
    return;
  }
  if (reply.is_ok() && g->each) {
    if (g->state->alive) g->each(std::move(reply.value()));
  } else if (reply.is_ok()) {
    g->replies[shard] = std::move(reply.value());
  }
  if (--g->left > 0) return;
  g->finished = true;
  if (g->state->alive) g->then(std::move(g->replies));
}

void alone(const std::shared_ptr<Gather>& g, std::uint32_t shard) {
  g->core->call(shard, g->args, g->write,
                [g, shard](Result<Reply> reply) { land(g, shard, std::move(reply)); });
}

// The read on the shards of `part` (of one primary) in one call (jobs.lua's each), and on those
// it did not reach in its next; a shard each could not read, alone.
void read_together(const std::shared_ptr<Gather>& g, std::vector<std::uint32_t> part) {
  std::vector<std::string> each = {"each", std::to_string(Core::kRowsPerRead),
                                   std::to_string(g->args.size() - 1)};
  each.insert(each.end(), g->args.begin(), g->args.end());
  for (const auto shard : part) each.push_back(shard_base(g->core->names.prefix, shard));
  const std::uint32_t first = part.front();
  g->core->call_across_slots(
      first, std::move(each),
      [g, part = std::move(part)](Result<Reply> answer) mutable {
        // {'ok', {each shard's reply; '-1': not read, its rows spent; '-2': asked alone}}. A
        // call that failed (Redis out of reach, or no answer in time) fails the whole read at
        // once, as any shard's failure does; an answer of another shape, every shard alone.
        if (!answer.is_ok()) return land(g, part.front(), answer.status());
        const bool answered = answer.value().type == ReplyType::kArray &&
                              answer.value().elements.size() > 1 &&
                              answer.value().elements[0].str == "ok" &&
                              answer.value().elements[1].elements.size() == part.size();
        std::vector<std::uint32_t> unread;
        for (std::size_t i = 0; i < part.size(); ++i) {
          Reply* reply = answered ? &answer.value().elements[1].elements[i] : nullptr;
          if (reply != nullptr && reply->type == ReplyType::kArray) {
            land(g, part[i], std::move(*reply));
          } else if (reply != nullptr && reply->str == "-1") {
            unread.push_back(part[i]);
          } else {
            alone(g, part[i]);
          }
        }
        if (!unread.empty() && !g->finished) read_together(g, std::move(unread));
      },
      // A call still waiting its turn when the read has failed, or its handle is gone, is not
      // sent: at a primary out of reach, each would wait its whole time out in turn.
      {.every_key = true, .lane = g->lane, .wanted = [g] {
         return !g->finished && g->state->alive;
       }});
}

void start(std::shared_ptr<Gather> g, std::vector<std::uint32_t> shards,
           std::vector<std::string> args) {
  DELAYQ_CHECK(!shards.empty());
  g->left = static_cast<std::uint32_t>(shards.size());
  const bool together = !g->write && Core::read_across_slots(args);
  g->args = std::move(args);
  if (!together) {
    for (const auto shard : shards) alone(g, shard);
    return;
  }
  // Its own lane: its calls go to each primary one at a time, and wait for no other read's
  // (at a primary out of reach, each waits out its time).
  g->lane = "each " + std::to_string(++g->core->read_lanes);
  for (auto& part :
       g->core->per_primary(std::move(shards), [](std::uint32_t shard) { return shard; })) {
    read_together(g, std::move(part));
  }
}

}  // namespace

void on_shards(std::shared_ptr<Core> core, std::shared_ptr<SessionState> state,
               std::vector<std::uint32_t> shards, std::vector<std::string> args, bool write,
               std::function<void(Result<std::vector<Reply>>)> then) {
  auto g = std::make_shared<Gather>();
  g->core = std::move(core);
  g->state = std::move(state);
  g->write = write;
  g->replies.resize(g->core->shards);
  g->then = std::move(then);
  start(std::move(g), std::move(shards), std::move(args));
}

void fold_every_shard(const std::shared_ptr<Core>& core, std::shared_ptr<SessionState> state,
                      std::vector<std::string> args, std::function<void(Reply)> each,
                      std::function<void(Status)> then) {
  auto g = std::make_shared<Gather>();
  g->core = core;
  g->state = std::move(state);
  g->each = std::move(each);
  g->then = [then = std::move(then)](Result<std::vector<Reply>> replies) {
    then(replies.status());
  };
  start(std::move(g), core->every_shard_number(), std::move(args));
}

void every_shard(const std::shared_ptr<Core>& core, std::shared_ptr<SessionState> state,
                 std::vector<std::string> args, bool write,
                 std::function<void(Result<std::vector<Reply>>)> then) {
  on_shards(core, std::move(state), core->every_shard_number(), std::move(args), write,
            std::move(then));
}

}  // namespace delayq::broker::redis
