#include "broker/redis/handle.h"

#include <algorithm>
#include <numeric>

#include "broker/redis/replies.h"

namespace delayq::broker::redis {

namespace {

// What every_shard() gathers: each shard's reply, or the first failure.
struct Gathered {
  Gathered(std::uint32_t shards, std::function<void(Result<std::vector<Reply>>)> done)
      : replies(shards), left(shards), then(std::move(done)) {}
  std::vector<Reply> replies;
  std::uint32_t left;
  std::optional<Status> failure;
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
    if (!reply.is_ok()) {
      if (!gathered->failure) gathered->failure = reply.status();
    } else if (Status s = status_of(reply.value()); !s.is_ok() && s.code() != Code::kNotFound) {
      if (!gathered->failure) gathered->failure = s;
    } else {
      gathered->replies[shard] = std::move(reply.value());
    }
    if (--gathered->left > 0 || !state->alive) return;
    if (gathered->failure) return gathered->then(*gathered->failure);
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
          // {'ok', {each shard's reply, or '-2': asked alone}}; a call that failed, every shard
          // asked alone.
          const bool answered = answer.is_ok() && answer.value().type == ReplyType::kArray &&
                                answer.value().elements.size() > 1 &&
                                answer.value().elements[0].str == "ok" &&
                                answer.value().elements[1].elements.size() == part.size();
          for (std::size_t i = 0; i < part.size(); ++i) {
            if (!answered) {
              alone(part[i]);
              continue;
            }
            Reply& reply = answer.value().elements[1].elements[i];
            if (reply.type != ReplyType::kArray) {
              alone(part[i]);
            } else {
              land(part[i], std::move(reply));
            }
          }
        },
        true);
  }
}

}  // namespace delayq::broker::redis
