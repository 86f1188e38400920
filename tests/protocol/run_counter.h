// run_counter.h — the witness of the kill -9 tests of recurring schedules: a worker that takes
// the runs of a one-second schedule over HTTP (reserve, then delete) and counts their instants
// (from their keys, "<name>@<instant>"). No run is lost if every instant between the first and
// the last it took came; none is doubled if none came again after its job was deleted. A run
// reserved when its node died comes back, as any reserved job does: delivery at least once, not
// a second run.
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "front/http/client.h"

namespace delayq::testing {

struct RunCounter {
  std::string tube{};
  std::map<std::int64_t, int> reserved{};  // instant -> times reserved
  std::set<std::int64_t> deleted{};
  std::vector<std::string> doubled{};

  // One reserve (and delete); false if the server did not answer (it is down).
  bool take(front::http::Client& http) {
    auto response =
        http.request("POST", "/v1/reserve", R"({"tubes":[")" + tube + R"("],"timeout":"2s"})",
                     std::chrono::milliseconds(4000));
    if (!response.is_ok()) return false;
    if (response.value().status == 204) return true;
    if (response.value().status != 200) return false;
    const boost::json::object job = boost::json::parse(response.value().body).as_object();
    const std::string key(job.at("key").as_string());
    const std::int64_t instant = std::stoll(key.substr(key.find('@') + 1));
    if (deleted.contains(instant)) doubled.push_back(key);
    ++reserved[instant];
    auto erased =
        http.request("DELETE", "/v1/jobs/" + std::to_string(job.at("id").to_number<std::int64_t>()),
                     "", std::chrono::milliseconds(4000));
    if (erased.is_ok() && erased.value().status == 200) deleted.insert(instant);
    return erased.is_ok();
  }

  // Whether every instant from the first taken up to one after `after_unix_ms` has come.
  [[nodiscard]] bool caught_up(std::int64_t after_unix_ms) const {
    if (reserved.empty() || reserved.rbegin()->first <= after_unix_ms) return false;
    const std::int64_t first = reserved.begin()->first;
    const std::int64_t last = reserved.rbegin()->first;
    return static_cast<std::int64_t>(reserved.size()) == (last - first) / 1000 + 1;
  }

  // Takes runs until caught up with the present (the runs put to catch up after a kill, which
  // come in the order their nodes learn of them in Redis mode), or `most` runs.
  void drain(front::http::Client& http, int most = 60) {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    for (int i = 0; i < most && !caught_up(now); ++i) ASSERT_TRUE(take(http));
  }

  // None doubled, none lost, at least `at_least` instants seen.
  void check(std::size_t at_least) const {
    EXPECT_TRUE(doubled.empty()) << "a run came again after its job was deleted: "
                                 << doubled.front();
    ASSERT_GE(reserved.size(), at_least);
    std::int64_t previous = reserved.begin()->first;
    for (const auto& [instant, times] : reserved) {
      if (instant == previous) continue;
      EXPECT_EQ(instant - previous, 1000)
          << "runs between " << previous << " and " << instant << " were lost";
      previous = instant;
    }
  }
};

}  // namespace delayq::testing
