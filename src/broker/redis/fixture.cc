#include "broker/redis/fixture.h"

#include "broker/redis/layout.h"

namespace delayq::broker::redis::testing {

namespace {

// The answers of a healthy cluster to what a node asks while it opens.
std::optional<Result<std::vector<delayq::redis::Reply>>> opening_answer(const Call& call,
                                                                        std::uint32_t shards) {
  const std::string op = call.op();
  const auto args = call.args();
  const auto one = [](delayq::redis::Reply r) {
    return std::optional<Result<std::vector<delayq::redis::Reply>>>(
        std::vector<delayq::redis::Reply>{r});
  };
  if (op == "INFO" && !args.empty() && args[0] == "server") {
    return one(delayq::redis::Reply::string("# Server\r\nredis_version:7.0.15\r\n"));
  }
  if (op == "INFO") {
    return one(delayq::redis::Reply::string(
        "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n"
        "slave0:ip=127.0.0.1,port=7001,state=online,offset=1,lag=0\r\n"));
  }
  if (op == "CONFIG" && args.size() == 2) {
    return one(reply::array(
        {delayq::redis::Reply::string(args[1]),
         delayq::redis::Reply::string(args[1] == "appendonly" ? "yes" : "noeviction")}));
  }
  if (op == "HSETNX") return one(delayq::redis::Reply::number(1));
  if (op == "HGET") return one(delayq::redis::Reply::string(std::to_string(shards)));
  if (op == "HSET") return one(delayq::redis::Reply::number(1));
  if (op == "HGETALL") return one(reply::array({}));
  return std::nullopt;
}

// A shard's heads of some tubes and their depths, as jobs.lua answers them: a depth not given is
// 1 for a head, 0 for none.
std::pair<delayq::redis::Reply, delayq::redis::Reply> heads_and_depths(
    const std::vector<std::string>& heads, const std::vector<std::int64_t>& depths) {
  std::vector<delayq::redis::Reply> h;
  std::vector<delayq::redis::Reply> d;
  for (std::size_t i = 0; i < heads.size(); ++i) {
    h.push_back(delayq::redis::Reply::string(heads[i]));
    d.push_back(
        delayq::redis::Reply::number(i < depths.size() ? depths[i] : (heads[i].empty() ? 0 : 1)));
  }
  return {reply::array(std::move(h)), reply::array(std::move(d))};
}

}  // namespace

void NodeTest::open_node(RedisBrokerOptions options, std::uint32_t shards) {
  options.shards = shards;
  options.metrics = &metrics;
  auto fake = std::make_unique<ScriptedRedis>(io);
  redis = fake.get();
  redis->responder = [shards](const Call& call) { return opening_answer(call, shards); };
  auto opened = RedisBroker::open(io, std::move(options), std::move(fake), clock);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  broker = std::move(opened).value();
  redis->responder = nullptr;
  settle();
  // The overdue gauge's first look at every shard: nothing overdue. (The heartbeat stays
  // unanswered: a test of leases answers it.)
  answer_all("overdue",
             reply::ok({delayq::redis::Reply::string("-1"),
                        delayq::redis::Reply::string(std::to_string(clock->now_unix_ms()))}));
  settle();
}

void NodeTest::TearDown() {
  broker.reset();
  redis = nullptr;
  clock->drop_waits();
  settle();
}

std::unique_ptr<broker::Session> NodeTest::session() {
  broker::SessionOptions options;
  options.watch_default = true;
  return broker->open_session(options);
}

Call NodeTest::take(const std::string& op) {
  auto call = redis->take(op);
  if (!call) {
    std::string made;
    for (const auto& c : redis->calls) made += " " + c.op();
    ADD_FAILURE() << "no " << op << " call; waiting:" << made;
    return Call{};
  }
  return std::move(*call);
}

void NodeTest::answer_probe(Call& call, const std::vector<std::string>& heads,
                            const std::vector<std::int64_t>& depths) {
  auto [h, d] = heads_and_depths(heads, depths);
  redis->answer(call, reply::ok({std::move(h), std::move(d)}));
}

std::uint32_t NodeTest::shard_of(const Call& call) {
  const auto keys = call.keys();
  if (keys.empty()) return 0;
  const auto open = keys[0].find('{');
  return static_cast<std::uint32_t>(std::stoul(keys[0].substr(open + 1)));
}

std::vector<std::uint32_t> NodeTest::shards_named(const Call& call, std::size_t from) {
  const auto args = call.args();
  std::vector<std::uint32_t> shards;
  for (std::size_t i = from; i < args.size(); ++i) {
    const auto open = args[i].find('{');
    shards.push_back(static_cast<std::uint32_t>(std::stoul(args[i].substr(open + 1))));
  }
  return shards;
}

void NodeTest::answer_acquire(Call call, const std::vector<std::int64_t>& got) {
  std::vector<delayq::redis::Reply> each;
  for (const auto g : got) each.push_back(delayq::redis::Reply::number(g));
  redis->answer(call, reply::ok({reply::array(std::move(each))}));
  settle();
}

std::vector<std::uint32_t> NodeTest::grant_acquires(std::int64_t epoch) {
  std::vector<std::uint32_t> taken;
  while (auto call = redis->take("acquire_all")) {
    // acquire_all node lease_ms most base...
    const auto most = std::stoul(call->args().at(2));
    std::vector<std::int64_t> got;
    std::size_t here = 0;
    for (const auto shard : shards_named(*call, 3)) {
      if (here++ < most) taken.push_back(shard);
      got.push_back(here <= most ? epoch++ : -1);
    }
    answer_acquire(std::move(*call), got);
  }
  return taken;
}

JobView NodeTest::ready_job(JobId id, const std::string& tube) const {
  JobView job;
  job.id = id;
  job.tube = tube;
  job.state = JobState::kReady;
  job.priority = 1024;
  job.created_unix_ms = clock->now_unix_ms() - 1000;
  job.due_unix_ms = job.created_unix_ms;
  job.ttr = std::chrono::seconds(60);
  return job;
}

delayq::redis::Reply NodeTest::reserved(JobView job, const std::vector<std::string>& heads,
                                        const std::vector<std::int64_t>& depths) const {
  job.state = JobState::kReserved;
  job.deadline_unix_ms = clock->now_unix_ms() + job.ttr.count() * 1000;
  ++job.counters.reserves;
  delayq::redis::Reply r = reply::job(job, clock->now_unix_ms());
  auto [h, d] = heads_and_depths(heads, depths);
  r.elements.push_back(std::move(h));
  r.elements.push_back(std::move(d));
  return r;
}

std::size_t NodeTest::answer_all(const std::string& op, const delayq::redis::Reply& reply) {
  std::size_t answered = 0;
  while (auto call = redis->take(op)) {
    redis->answer(*call, reply);
    ++answered;
  }
  return answered;
}

}  // namespace delayq::broker::redis::testing
