#include <array>

#include "broker/redis/core.h"
#include "redis/slot.h"
#include "store/record.h"

namespace delayq::broker::redis {

void Core::load_conf(std::function<void(Status)> done) {
  auto left = std::make_shared<int>(4);
  auto failed = std::make_shared<Status>();
  auto step = [left, failed, done](Status status) {
    if (!status.is_ok()) *failed = std::move(status);
    if (--*left == 0) done(*failed);
  };
  auto self = shared_from_this();
  client->run(delayq::redis::key_slot(names.webhooks), Command{"HGETALL", names.webhooks},
              [self, step](Result<Reply> r) {
                if (!r.is_ok()) return step(r.status());
                std::map<std::string, Webhook> loaded;
                for (std::size_t i = 0; i + 1 < r.value().elements.size(); i += 2) {
                  const auto& tube = r.value().elements[i].str;
                  auto webhook = store::decode_webhook(tube, r.value().elements[i + 1].str);
                  if (webhook.is_ok()) loaded.emplace(tube, std::move(webhook).value());
                }
                const bool changed = loaded != self->webhook_map;
                self->webhook_map = std::move(loaded);
                if (changed && self->webhooks_handler) self->webhooks_handler();
                step(Status::ok());
              });
  client->run(delayq::redis::key_slot(names.pauses), Command{"HGETALL", names.pauses},
              [self, step](Result<Reply> r) {
                if (!r.is_ok()) return step(r.status());
                std::map<std::string, Pause> loaded;
                for (std::size_t i = 0; i + 1 < r.value().elements.size(); i += 2) {
                  const std::string& value = r.value().elements[i + 1].str;
                  Pause pause;
                  const auto first = value.find(' ');
                  const auto second = value.find(' ', first + 1);
                  pause.until_unix_ms = to_int(value.substr(0, first));
                  pause.seconds = to_int(value.substr(first + 1, second - first - 1));
                  pause.count = static_cast<std::uint64_t>(to_int(value.substr(second + 1)));
                  loaded.emplace(r.value().elements[i].str, pause);
                }
                self->pauses = std::move(loaded);
                self->watch_pauses();
                step(Status::ok());
              });
  client->run(delayq::redis::key_slot(names.max_attempts), Command{"HGETALL", names.max_attempts},
              [self, step](Result<Reply> r) {
                if (!r.is_ok()) return step(r.status());
                std::map<std::string, std::uint32_t> loaded;
                for (std::size_t i = 0; i + 1 < r.value().elements.size(); i += 2) {
                  loaded.emplace(r.value().elements[i].str,
                                 static_cast<std::uint32_t>(to_int(r.value().elements[i + 1].str)));
                }
                self->max_attempts = std::move(loaded);
                step(Status::ok());
              });
  client->run(delayq::redis::key_slot(names.flows), Command{"HGETALL", names.flows},
              [self, step](Result<Reply> r) {
                if (!r.is_ok()) return step(r.status());
                std::map<std::string, FlowSettings, std::less<>> loaded;
                for (std::size_t i = 0; i + 1 < r.value().elements.size(); i += 2) {
                  const auto& tube = r.value().elements[i].str;
                  auto flow = store::decode_flow(tube, r.value().elements[i + 1].str);
                  if (flow.is_ok()) loaded.emplace(tube, std::move(flow).value());
                }
                self->flows = std::move(loaded);
                step(Status::ok());
              });
}

std::optional<std::uint32_t> Core::moved_to(const Reply& answer, std::uint32_t shard) {
  if (answer.type != ReplyType::kArray || answer.elements.size() != 2 ||
      answer.elements[0].str != "moved") {
    return std::nullopt;
  }
  load_conf([](Status) {});
  const auto home = static_cast<std::uint32_t>(to_int(answer.elements[1].str));
  if (home >= shards || home == shard) return std::nullopt;
  return home;
}

// When a pause ends, every shard may have ready jobs of its tube that reserves skipped (and a
// reserve may have cleared their hints while the pause held): look at them all again. The shards
// end the pause on their primary's clock: one that runs behind this node's still reads the tube
// as paused, so empty, at the first look, and nothing else would tell the node to look again.
// Hence the later looks, for clocks up to 10 s apart.
void Core::watch_pauses() {
  static constexpr std::array<std::int64_t, 3> kLooksAfterTheEndMs = {0, 1000, 10000};
  const auto now = clock->now_unix_ms();
  std::int64_t first = 0;
  for (const auto& [tube, pause] : pauses) {
    for (const std::int64_t after : kLooksAfterTheEndMs) {
      const std::int64_t at = pause.until_unix_ms + after;
      if (pause.until_unix_ms != 0 && at > now && (first == 0 || at < first)) first = at;
    }
  }
  if (first == 0) {
    conf_timer->cancel();
  } else {
    conf_timer->expires_after(Millis{first - now});
    conf_timer->async_wait([self = shared_from_this()](bool expired) {
      if (expired) self->watch_pauses();
    });
  }
  // A paused tube's jobs are answered as none (reserves skip them): a tube whose pause may have
  // ended must be looked at again.
  for (const auto& [tube, pause] : pauses) ever_paused.insert(tube);
  for (auto& [tube, h] : hints) {
    if (!paused(tube) && ever_paused.contains(tube)) {
      forget_heads(h);
      ++looks_again;
    }
  }
  pump();
}

void Core::publish_conf() {
  client->run(delayq::redis::key_slot(names.events), Command{"PUBLISH", names.events, "c"},
              [](Result<Reply>) {});
}

}  // namespace delayq::broker::redis
