// completions.h — how a local session or admin completes a call (broker.h's rules): on the
// executor, once the batch its result depends on is durable, and never once its owner is gone.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "broker/broker.h"
#include "broker/local/node.h"

namespace delayq::broker::local {

class Completions {
 public:
  explicit Completions(Node& node) : node_(node) {}
  ~Completions() { forget(); }
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;

  // No completion runs after this (the owner is going away).
  void forget() noexcept {
    if (alive_) *alive_ = false;
  }

  // Completes `done` with `result` once batch `batch` is durable.
  template <typename T>
  void finish(std::uint64_t batch, broker::Callback<T> done, Result<T> result) {
    node_.when_durable(
        batch, [alive = alive(), done = std::move(done), result = std::move(result)]() mutable {
          if (*alive) done(std::move(result));
        });
    node_.touched();
  }
  // A result about one job: it waits for that job's latest change (this call's included).
  void finish_job(broker::Callback<JobView> done, JobId id, Result<JobView> view) {
    finish(view.is_ok() ? node_.batch_of(id) : node_.barrier(), std::move(done), std::move(view));
  }
  // Anything else (counts, lists, errors) waits for everything done so far.
  template <typename T>
  void finish_all(broker::Callback<T> done, Result<T> result) {
    finish(node_.barrier(), std::move(done), std::move(result));
  }
  // `f`, for someone else to call (the node's backup, a wakeup): does nothing once the owner is
  // gone.
  template <typename F>
  auto guarded(F f) {
    return [alive = alive(), f = std::move(f)](auto&&... args) mutable {
      if (*alive) f(std::forward<decltype(args)>(args)...);
    };
  }

 private:
  // Made at the first call that needs it: an idle connection holds no allocation for it.
  const std::shared_ptr<bool>& alive() {
    if (!alive_) alive_ = std::make_shared<bool>(true);
    return alive_;
  }

  Node& node_;
  std::shared_ptr<bool> alive_;
};

}  // namespace delayq::broker::local
