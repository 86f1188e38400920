// schedules.h — recurring schedules in Redis mode (broker/schedules.h). This mode does not keep
// schedules: every call completes with kNotSupported, on the executor. docs/schedules.md says so
// where users look; the local broker keeps them.
#pragma once

#include <boost/asio/io_context.hpp>

#include "broker/schedules.h"

namespace delayq::broker::redis {

class RedisSchedules final : public broker::Schedules {
 public:
  explicit RedisSchedules(boost::asio::io_context& io) : io_(io) {}

  void set(schedule::Definition definition, broker::Callback<broker::ScheduleView> done) override;
  void get(std::string name, broker::Callback<broker::ScheduleView> done) override;
  void list(std::string after, std::size_t limit,
            broker::Callback<std::vector<broker::ScheduleView>> done) override;
  void remove(std::string name, broker::Callback<broker::ScheduleView> done) override;
  void pause(std::string name, bool paused, broker::Callback<broker::ScheduleView> done) override;
  void trigger(std::string name, broker::Callback<broker::PutResult> done) override;
  void backfill(std::string name, std::int64_t from_unix_ms, std::int64_t to_unix_ms,
                broker::Callback<std::vector<broker::PutResult>> done) override;

 private:
  template <typename T>
  void refuse(broker::Callback<T> done);
  boost::asio::io_context& io_;
};

}  // namespace delayq::broker::redis
