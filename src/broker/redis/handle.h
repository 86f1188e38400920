// handle.h — what a client's session and an admin handle on the Redis broker share: the node's
// Core, the state that outlives them (SessionState), completions posted for later that do not run
// once they are gone, and calls on every shard.
#pragma once

#include <boost/asio/post.hpp>

#include "broker/redis/core.h"

namespace delayq::broker::redis {

// jobs.lua on each of `shards` (at least one) with `args`, reads in calls across slots where
// they may go (Core::read_across_slots); `then` gets the replies by shard number (a shard's
// kNotFound is a reply; a shard not asked, an empty one), or the first failure; not once
// `state` is no longer alive.
void on_shards(std::shared_ptr<Core> core, std::shared_ptr<SessionState> state,
               std::vector<std::uint32_t> shards, std::vector<std::string> args, bool write,
               std::function<void(Result<std::vector<Reply>>)> then);
// The same on every shard.
void every_shard(const std::shared_ptr<Core>& core, std::shared_ptr<SessionState> state,
                 std::vector<std::string> args, bool write,
                 std::function<void(Result<std::vector<Reply>>)> then);

// A read of every shard whose replies are folded as they come: `each` gets each shard's reply
// (a kNotFound is one) as it lands, and none is kept, so a read whose replies are large
// (a row for each tube a shard remembers) holds only those under way (a call's to each
// primary); `then` gets the end, or
// the first failure. Neither once `state` is no longer alive.
void fold_every_shard(const std::shared_ptr<Core>& core, std::shared_ptr<SessionState> state,
                      std::vector<std::string> args, std::function<void(Reply)> each,
                      std::function<void(Status)> then);

class Handle {
 protected:
  explicit Handle(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~Handle() { state_->alive = false; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // Completes `done` later on the executor, unless the handle is gone by then.
  template <typename T>
  void post(Callback<T> done, Result<T> result) {
    asio::post(core_->io,
               [state = state_, done = std::move(done), result = std::move(result)]() mutable {
                 if (state->alive) done(std::move(result));
               });
  }
  // redis::every_shard(), not once the handle is gone.
  void every_shard(std::vector<std::string> args, bool write,
                   std::function<void(Result<std::vector<Reply>>)> then) {
    redis::every_shard(core_, state_, std::move(args), write, std::move(then));
  }
  [[nodiscard]] Status check(const std::string& tube) const {
    return check_tube_name(tube, core_->options.max_name_bytes);
  }

  std::shared_ptr<Core> core_;
  std::shared_ptr<SessionState> state_ = std::make_shared<SessionState>();
};

}  // namespace delayq::broker::redis
