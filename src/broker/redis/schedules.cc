#include "broker/redis/schedules.h"

#include <boost/asio/post.hpp>

namespace delayq::broker::redis {

template <typename T>
void RedisSchedules::refuse(broker::Callback<T> done) {
  boost::asio::post(io_, [done = std::move(done)] {
    done(Status(Code::kNotSupported,
                "recurring schedules are kept by the local store only, not in Redis mode"));
  });
}

void RedisSchedules::set(schedule::Definition, broker::Callback<broker::ScheduleView> done) {
  refuse(std::move(done));
}
void RedisSchedules::get(std::string, broker::Callback<broker::ScheduleView> done) {
  refuse(std::move(done));
}
void RedisSchedules::list(std::string, std::size_t,
                          broker::Callback<std::vector<broker::ScheduleView>> done) {
  refuse(std::move(done));
}
void RedisSchedules::remove(std::string, broker::Callback<broker::ScheduleView> done) {
  refuse(std::move(done));
}
void RedisSchedules::pause(std::string, bool, broker::Callback<broker::ScheduleView> done) {
  refuse(std::move(done));
}
void RedisSchedules::trigger(std::string, broker::Callback<broker::PutResult> done) {
  refuse(std::move(done));
}
void RedisSchedules::backfill(std::string, std::int64_t, std::int64_t,
                              broker::Callback<std::vector<broker::PutResult>> done) {
  refuse(std::move(done));
}

}  // namespace delayq::broker::redis
