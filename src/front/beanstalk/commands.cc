// commands.cc — one handler per beanstalkd verb (the table is in conversation.cc): each turns a
// parsed Command into a broker call and says how its result reads on the wire. Reply words and
// YAML follow beanstalkd 1.12; delayq's extensions are in docs/protocol.md.
#include <chrono>

#include "front/beanstalk/conversation.h"
#include "front/beanstalk/yaml.h"
#include "webhook/rules.h"

namespace delayq::front::beanstalk {
namespace {

std::string word_id(std::string_view word, JobId id) {
  std::string reply(word);
  reply.append(" ").append(std::to_string(id)).append("\r\n");
  return reply;
}

std::string word_only(std::string_view word) {
  std::string reply(word);
  reply += "\r\n";
  return reply;
}

std::string with_body(std::string_view word, const broker::Job& job) {
  std::string bytes;
  bytes.reserve(word.size() + job.body.size() + 48);
  bytes.append(word).append(" ").append(std::to_string(job.view.id)).append(" ");
  bytes.append(std::to_string(job.body.size())).append("\r\n");
  bytes.append(job.body).append("\r\n");
  return bytes;
}

std::string yaml_reply(const std::string& yaml) {
  return "OK " + std::to_string(yaml.size()) + "\r\n" + yaml + "\r\n";
}

}  // namespace

broker::Callback<broker::Job> Conversation::answer_job(std::string_view word) {
  return answer<broker::Job>([word](const broker::Job& job) { return with_body(word, job); });
}

// --- producers

void Conversation::put(const Command& command) {
  broker::PutRequest request;
  request.priority = command.priority;
  request.due = Due::after(std::chrono::seconds{command.delay_seconds});
  request.ttr = broker::Seconds{command.ttr_seconds};
  request.body = command.body;
  put_job(std::move(request), false);
}

void Conversation::putx(const Command& command) {
  broker::PutRequest request;
  request.priority = command.priority;
  request.due = command.due;
  request.ttr = broker::Seconds{command.ttr_seconds};
  request.body = command.body;
  request.key = command.key;
  request.group = command.group;
  request.replace = command.replace;
  if (command.debounce_ms) {
    request.debounce = broker::Millis{static_cast<std::int64_t>(*command.debounce_ms)};
  }
  if (command.max_wait_ms) {
    request.max_wait = broker::Millis{static_cast<std::int64_t>(*command.max_wait_ms)};
  }
  if ((!command.url.empty() && !webhook::parse_url(command.url).is_ok()) ||
      (!command.content_type.empty() &&
       !webhook::check_header_value("type", command.content_type).is_ok())) {
    return reply("BAD_FORMAT\r\n");
  }
  request.url = command.url;
  request.content_type = command.content_type;
  request.traceparent = command.traceparent;  // checked by the broker's put rules
  request.tracestate = command.tracestate;
  put_job(std::move(request), true);
}

// A put makes its connection a producer, even one refused with DRAINING (beanstalkd refuses the
// job only once it has read it).
void Conversation::put_job(broker::PutRequest request, bool extension) {
  mark_producer();
  session_->put(std::move(request), answer<broker::PutResult>(
                                        [](const broker::PutResult& put) {
                                          return word_id(put.debounced  ? "DEBOUNCED"
                                                         : put.inserted ? "INSERTED"
                                                                        : "EXISTS",
                                                         put.job.id);
                                        },
                                        extension ? "CONFLICT" : "NOT_FOUND"));
}

void Conversation::use(const Command& command) {
  if (Status s = session_->use(command.tube); !s.is_ok()) {
    return reply(status_reply(s, "NOT_FOUND"));
  }
  reply("USING " + session_->used() + "\r\n");
}

// --- workers

void Conversation::start_reserve(std::optional<broker::Millis> timeout) {
  mark_worker();
  // After the client's end of input nothing could end a wait: no job ready is TIMED_OUT now.
  if (input_ended_) timeout = broker::Millis{0};
  waiting_ = true;
  const std::uint64_t slot = open_slot();
  reserve_ticket_ =
      session_->reserve(broker::ReserveRequest{{}, timeout}, [this, slot](Result<broker::Job> job) {
        waiting_ = false;
        reserve_ticket_ = 0;
        fill(slot, job.is_ok() ? with_body("RESERVED", job.value())
                               : status_reply(job.status(), "NOT_FOUND"));
        process();  // commands that arrived during the wait
      });
}

void Conversation::reserve(const Command&) {
  start_reserve(std::nullopt);
}

void Conversation::reserve_with_timeout(const Command& command) {
  start_reserve(broker::Millis{std::int64_t{command.timeout_seconds} * 1000});
}

// A worker once it has a job, as in beanstalkd (a NOT_FOUND makes none).
void Conversation::reserve_job(const Command& command) {
  session_->reserve_job(command.id, answer<broker::Job>([this](const broker::Job& job) {
                          mark_worker();
                          return with_body("RESERVED", job);
                        }));
}

void Conversation::erase(const Command& command) {
  session_->erase(broker::JobRef::by_id(command.id),
                  answer<JobId>([](JobId) { return word_only("DELETED"); }));
}

void Conversation::release(const Command& command) {
  broker::ReleaseRequest request;
  request.id = command.id;
  request.priority = command.priority;
  request.delay = std::chrono::seconds{command.delay_seconds};
  // A release that used up the tube's max_attempts buried the job: BURIED, as beanstalkd answers
  // a release whose job it had to bury.
  session_->release(request, answer<JobView>([](const JobView& job) {
                      return word_only(job.state == JobState::kBuried ? "BURIED" : "RELEASED");
                    }));
}

void Conversation::bury(const Command& command) {
  session_->bury(command.id, command.priority,
                 answer<JobView>([](const JobView&) { return word_only("BURIED"); }));
}

void Conversation::touch(const Command& command) {
  session_->touch(command.id, answer<JobView>([](const JobView&) { return word_only("TOUCHED"); }));
}

void Conversation::watch(const Command& command) {
  auto count = session_->watch(command.tube);
  if (!count.is_ok()) return reply(status_reply(count.status(), "NOT_FOUND"));
  reply("WATCHING " + std::to_string(count.value()) + "\r\n");
}

void Conversation::ignore(const Command& command) {
  auto count = session_->ignore(command.tube);
  if (!count.is_ok()) return reply(status_reply(count.status(), "NOT_FOUND"));
  reply("WATCHING " + std::to_string(count.value()) + "\r\n");
}

// --- peeks and kicks

void Conversation::peek(const Command& command) {
  session_->peek(broker::JobRef::by_id(command.id), true, answer_job("FOUND"));
}
void Conversation::peek_ready(const Command&) {
  session_->peek_next(session_->used(), JobState::kReady, answer_job("FOUND"));
}
void Conversation::peek_delayed(const Command&) {
  session_->peek_next(session_->used(), JobState::kDelayed, answer_job("FOUND"));
}
void Conversation::peek_buried(const Command&) {
  session_->peek_next(session_->used(), JobState::kBuried, answer_job("FOUND"));
}

void Conversation::kick(const Command& command) {
  session_->kick(session_->used(), command.bound, answer<std::size_t>([](std::size_t kicked) {
                   return "KICKED " + std::to_string(kicked) + "\r\n";
                 }));
}

void Conversation::kick_job(const Command& command) {
  session_->kick_job(command.id,
                     answer<JobView>([](const JobView&) { return word_only("KICKED"); }));
}

void Conversation::pause_tube(const Command& command) {
  admin().pause_tube(std::string(command.tube), broker::Seconds{command.pause_seconds},
                     answer<TubeStats>([](const TubeStats&) { return word_only("PAUSED"); }));
}

void Conversation::max_attempts(const Command& command) {
  admin().set_max_attempts(std::string(command.tube), command.max_attempts,
                           answer<std::uint32_t>([](std::uint32_t n) {
                             return "MAX_ATTEMPTS " + std::to_string(n) + "\r\n";
                           }));
}

void Conversation::flow_tube(const Command& command) {
  const FlowOptions& given = command.flow;
  broker::FlowChange change;
  change.group_concurrency = given.concurrency;
  change.fair = given.fair;
  change.rate_jobs = given.rate_jobs;
  if (given.rate_period_ms) change.rate_period = broker::Millis{*given.rate_period_ms};
  change.rate_burst = given.burst;
  for (const auto& [group, weight] : given.weights)
    change.group_weights[std::string(group)] = weight;
  admin().set_flow(std::string(command.tube), change,
                   answer<FlowSettings>(
                       [](const FlowSettings& flow) {
                         return "FLOW " + std::to_string(flow.group_concurrency) + " " +
                                (flow.fair ? "1" : "0") + " " + std::to_string(flow.rate_jobs) +
                                "/" + std::to_string(flow.rate_period.count()) + " " +
                                std::to_string(flow.rate_burst) + "\r\n";
                       },
                       "CONFLICT"));
}

void Conversation::quit(const Command&) {
  closing_ = true;
}

// --- stats

void Conversation::stats_job(const Command& command) {
  session_->peek(
      broker::JobRef::by_id(command.id), false,
      answer<broker::Job>([](const broker::Job& job) { return yaml_reply(job_yaml(job)); }));
}

void Conversation::stats_tube(const Command& command) {
  admin().stats_tube(std::string(command.tube), answer<TubeStats>([](const TubeStats& tube) {
                       return yaml_reply(tube_yaml(tube));
                     }));
}

void Conversation::stats(const Command&) {
  // The counts as this command finds them: the commands after it in a pipeline, read before
  // the broker answers, are not in them, as in beanstalkd.
  ServerFacts facts;
  facts.max_job_bytes = context_.limits.max_job_bytes;
  facts.uptime_seconds = static_cast<std::uint64_t>(context_.broker.uptime().count());
  facts.draining = context_.broker.draining();
  admin().stats(answer<ServerStats>([tally = context_.tally, facts](const ServerStats& stats) {
    return yaml_reply(stats_yaml(stats, tally, facts));
  }));
}

void Conversation::list_tubes(const Command&) {
  admin().list_tubes(answer<std::vector<TubeStats>>([](const std::vector<TubeStats>& tubes) {
    std::vector<std::string> names;
    names.reserve(tubes.size());
    for (const TubeStats& tube : tubes) names.push_back(tube.name);
    return yaml_reply(list_yaml(names));
  }));
}

void Conversation::list_tube_used(const Command&) {
  reply("USING " + session_->used() + "\r\n");
}

void Conversation::list_tubes_watched(const Command&) {
  reply(yaml_reply(list_yaml(session_->watched())));
}

// --- delayq's extensions (docs/protocol.md)

void Conversation::reschedule(const Command& command) {
  session_->update(
      broker::JobRef::by_id(command.id), broker::Update{command.due, {}},
      answer<JobView>([](const JobView&) { return word_only("RESCHEDULED"); }, "CONFLICT"));
}

void Conversation::reschedule_key(const Command& command) {
  session_->update(
      broker::JobRef::by_key(std::string(command.tube), std::string(command.key)),
      broker::Update{command.due, {}},
      answer<JobView>([](const JobView&) { return word_only("RESCHEDULED"); }, "CONFLICT"));
}

void Conversation::delete_key(const Command& command) {
  session_->erase(broker::JobRef::by_key(std::string(command.tube), std::string(command.key)),
                  answer<JobId>([](JobId) { return word_only("DELETED"); }));
}

void Conversation::peek_key(const Command& command) {
  session_->peek(broker::JobRef::by_key(std::string(command.tube), std::string(command.key)), true,
                 answer_job("FOUND"));
}

void Conversation::list_group(const Command& command) {
  session_->list_group(std::string(command.tube), std::string(command.group),
                       answer<std::vector<JobView>>([](const std::vector<JobView>& jobs) {
                         return yaml_reply(group_yaml(jobs));
                       }));
}

void Conversation::cancel_group(const Command& command) {
  session_->cancel_group(std::string(command.tube), std::string(command.group),
                         answer<std::size_t>([](std::size_t cancelled) {
                           return "CANCELLED " + std::to_string(cancelled) + "\r\n";
                         }));
}

}  // namespace delayq::front::beanstalk
