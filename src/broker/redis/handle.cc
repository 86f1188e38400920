#include "broker/redis/handle.h"

#include <algorithm>
#include <numeric>

#include "broker/redis/replies.h"

namespace delayq::broker::redis {

namespace {

// What every_shard() gathers: each shard's reply, until the first failure ends it.
struct Gathered {
  Gathered(std::uint32_t shards, std::function<void(Result<std::vector<Reply>>)> done)
      : replies(shards), left(shards), then(std::move(done)) {}
  std::vector<Reply> replies;
  std::uint32_t left;
  bool finished = false;
  std::function<void(Result<std::vector<Reply>>)> then;
};

}  // namespace

void Handle::every_shard(std::vector<std::string> args, bool write,
                         std::function<void(Result<std::vector<Reply>>)> then) {
  const std::uint32_t shards = core_->shards;
  const bool all_tubes_stats = args.front() == "stats" && args.size() == 1;
  auto gathered = std::make_shared<Gathered>(shards, std::move(then));
  auto land = [core = core_, state = state_, gathered, all_tubes_stats](std::uint32_t shard,
                                                                        Result<Reply> reply) {
    if (gathered->finished) return;
    Status failed = reply.is_ok() ? status_of(reply.value()) : reply.status();
    if (!failed.is_ok() && failed.code() != Code::kNotFound) {
      gathered->finished = true;
      if (state->alive) gathered->then(failed);
      return;
    }
    if (reply.is_ok()) gathered->replies[shard] = std::move(reply.value());
    if (--gathered->left > 0) return;
    gathered->finished = true;
    if (!state->alive) return;
    if (all_tubes_stats) {
      std::size_t most = 0;
      for (const auto& r : gathered->replies) most = std::max(most, r.elements.size());
      core->tubes_seen = most > 0 ? most - 1 : 0;  // {'ok', a row per tube}
    }
    gathered->then(std::move(gathered->replies));
  };
  auto alone = [core = core_, args, write, land](std::uint32_t shard) {
    core->call(shard, args, write,
               [land, shard](Result<Reply> reply) mutable { land(shard, std::move(reply)); });
  };
  const std::size_t per_call = write ? 1 : Core::shards_per_read(args, core_->tubes_seen);
  if (per_call <= 1) {
    for (std::uint32_t shard = 0; shard < shards; ++shard) alone(shard);
    return;
  }
  // Its own lane: its calls go to each primary one at a time, and wait for no other read's
  // (at a primary out of reach, each waits out its time).
  const std::string lane = "each " + std::to_string(++core_->reads_across_slots);
  std::vector<std::uint32_t> all(shards);
  std::iota(all.begin(), all.end(), 0U);
  for (auto& part : core_->per_primary(
           all, [](std::uint32_t shard) { return shard; }, per_call)) {
    std::vector<std::string> each = {"each", std::to_string(args.size() - 1)};
    each.insert(each.end(), args.begin(), args.end());
    for (const auto shard : part) each.push_back(shard_base(core_->names.prefix, shard));
    const std::uint32_t first = part.front();
    core_->call_across_slots(
        first, std::move(each),
        [part = std::move(part), land, alone](Result<Reply> answer) mutable {
          // {'ok', {each shard's reply, or '-2': asked alone}}. A call that failed (Redis out
          // of reach, or no answer in time) fails the whole read at once, as any shard's
          // failure does; an answer of another shape, every shard asked alone.
          if (!answer.is_ok()) return land(part.front(), answer.status());
          const bool answered = answer.value().type == ReplyType::kArray &&
                                answer.value().elements.size() > 1 &&
                                answer.value().elements[0].str == "ok" &&
                                answer.value().elements[1].elements.size() == part.size();
          for (std::size_t i = 0; i < part.size(); ++i) {
            if (!answered || answer.value().elements[1].elements[i].type != ReplyType::kArray) {
              alone(part[i]);
            } else {
              land(part[i], std::move(answer.value().elements[1].elements[i]));
            }
          }
        },
        // A call still waiting its turn when the read has failed, or its handle is gone, is
        // not sent: at a primary out of reach, each would wait its whole time out in turn.
        {.every_key = true, .lane = lane, .wanted = [gathered, state = state_] {
           return !gathered->finished && state->alive;
         }});
  }
}

}  // namespace delayq::broker::redis
