#include "broker/redis/handle.h"

#include "broker/redis/replies.h"

namespace delayq::broker::redis {

void Handle::every_shard(std::vector<std::string> args, bool write,
                         std::function<void(Result<std::vector<Reply>>)> then) {
  const std::uint32_t shards = core_->shards;
  auto replies = std::make_shared<std::vector<Reply>>(shards);
  auto left = std::make_shared<std::uint32_t>(shards);
  auto failure = std::make_shared<std::optional<Status>>();
  auto finish = std::make_shared<std::function<void(Result<std::vector<Reply>>)>>(std::move(then));
  for (std::uint32_t shard = 0; shard < shards; ++shard) {
    core_->call(shard, args, write,
                [state = state_, replies, left, failure, finish, shard](Result<Reply> reply) {
                  if (!reply.is_ok()) {
                    if (!*failure) *failure = reply.status();
                  } else if (Status s = status_of(reply.value());
                             !s.is_ok() && s.code() != Code::kNotFound) {
                    if (!*failure) *failure = s;
                  } else {
                    (*replies)[shard] = std::move(reply.value());
                  }
                  if (--*left > 0 || !state->alive) return;
                  if (*failure) return (*finish)(**failure);
                  (*finish)(std::move(*replies));
                });
  }
}

}  // namespace delayq::broker::redis
