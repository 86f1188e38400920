#include <algorithm>
#include <boost/asio/post.hpp>
#include <optional>
#include <set>

#include "broker/redis/core.h"
#include "redis/slot.h"

namespace delayq::broker::redis {

namespace {

// The calls that change nothing: a lost answer is asked again as it was, with no answer kept.
bool reads_only(const std::vector<std::string>& args) {
  static const std::set<std::string, std::less<>> kReads = {
      "peek", "peek_next", "stats", "probe", "kickable", "overdue", "schedule_get", "schedule_all"};
  const std::string& op = args.front();
  return kReads.contains(op) || Core::group_read(args);
}

// The reserves waiting as `holder n tube...` from args[i] on (jobs.lua's serve()).
void holders_from(const std::vector<std::string>& args, std::size_t i,
                  std::vector<std::string>& out) {
  while (i + 1 < args.size()) {
    out.push_back(args[i]);
    i += 2 + static_cast<std::size_t>(std::max<std::int64_t>(0, to_int(args[i + 1])));
  }
}

// Whom a call may reserve jobs for, in the order its reply gives them: the waiters a firing or
// a put serves, a reserve's holder, a delete's (its prefetch), each delete's of an erasemany.
std::vector<std::string> holders_of(const std::vector<std::string>& args) {
  const std::string& op = args.front();
  std::vector<std::string> out;
  if (op == "fire") {
    holders_from(args, 3, out);
  } else if (op == "put") {
    holders_from(args, 12, out);
  } else if (op == "putmany" && args.size() > 3) {
    holders_from(args, 4 + 9 * static_cast<std::size_t>(std::max<std::int64_t>(0, to_int(args[3]))),
                 out);
  } else if ((op == "reserve" || op == "reserve_job" || op == "erase") && args.size() > 1) {
    out.push_back(args[1]);
  } else if (op == "erasemany") {
    for (std::size_t i = 2; i + 3 < args.size();
         i += 4 + static_cast<std::size_t>(std::max<std::int64_t>(0, to_int(args[i + 3])))) {
      out.push_back(args[i]);
    }
  }
  return out;
}

// The jobs a call's reply reserved, each with its holder's place in holders_of().
std::vector<std::pair<std::size_t, const Reply*>> reserved_in(const std::string& op,
                                                              const Reply& reply) {
  std::vector<std::pair<std::size_t, const Reply*>> out;
  const auto& e = reply.elements;
  if (e.empty() || (e[0].str != "ok" && !(op == "put" && e[0].str == "debounced"))) return out;
  const auto is_job = [](const Reply& r) {  // {'ok', id, record, ...}, not a refusal
    return r.type == ReplyType::kArray && r.elements.size() > 2 && r.elements[0].str == "ok";
  };
  const auto served = [&](const Reply& list) {
    for (std::size_t i = 0; i < list.elements.size(); ++i) {
      if (is_job(list.elements[i])) out.emplace_back(i, &list.elements[i]);
    }
  };
  if ((op == "fire" || op == "put") && e.size() > 5) {
    served(e[5]);
  } else if (op == "putmany") {
    served(e.back());
  } else if (op == "reserve" || op == "reserve_job") {
    out.emplace_back(0, &reply);
  } else if (op == "erase" && e.size() > 2 && is_job(e[2])) {
    out.emplace_back(0, &e[2]);
  } else if (op == "erasemany" && e.size() > 1) {
    for (std::size_t i = 0; i < e[1].elements.size(); ++i) {
      const auto& one = e[1].elements[i].elements;
      if (one.size() > 2 && is_job(one[2])) out.emplace_back(i, &one[2]);
    }
  }
  return out;
}

}  // namespace

void Core::call(std::uint32_t shard, std::vector<std::string> args, bool write,
                std::function<void(Result<Reply>)> done) {
  if (!pending_puts.empty()) flush_puts();
  if (!pending_erases.empty()) flush_erases();
  // A call that changes something is numbered, so that one sent again after its answer was lost
  // is answered as it was, not run twice (jobs.lua keeps the answer until the node says, in the
  // shard's next call, that it has it). A call that changes nothing is simply asked again.
  std::string tag;     // "[+]<number>[,<number answered>...]"
  std::string number;  // the call's own
  // `lost` reads and voids the kept answers, unnumbered: asked again, it answers the same.
  const bool asks_lost = args.front() == "lost";
  if (!reads_only(args) && !asks_lost) {
    // "+": the kept answers' hash lives for another minute from now. Said at most every 10 s
    // per shard (a PEXPIRE was a twentieth of an erase's cost), so that an answer is kept for at
    // least 50 s, past the 10 s in which its call may be sent again.
    const SteadyTime now = clock->steady_now();
    auto& refreshed = answers_refreshed[shard];
    if (refreshed == SteadyTime{} || now - refreshed >= kAnswersRefresh) {
      refreshed = now;
      tag = "+";
    }
    number = std::to_string(++calls_made);
    tag += number;
    if (auto it = answers_had.find(shard); it != answers_had.end()) {
      // At most kMostForgotten a call (jobs.lua unpacks them into one HDEL); the rest next.
      std::size_t cut = 0;
      for (std::size_t n = 0; n < kMostForgotten && cut != std::string::npos; ++n) {
        cut = it->second.find(',', cut + 1);
      }
      if (cut == std::string::npos) {
        tag += it->second;
        answers_had.erase(it);
      } else {
        tag += it->second.substr(0, cut);
        it->second.erase(0, cut);
      }
    }
  }
  // The node's kept answers in the shard are named too.
  const bool answers = !number.empty() || asks_lost;
  const auto slot = shard_slot(shard);
  delayq::redis::Request request;
  request.slot = slot;
  request.send_again = true;
  // Only puts (a schedule's runs and records among them) make Redis hold more; every other call
  // frees memory or keeps it level, and runs while Redis is over its maxmemory, so that workers
  // can drain it and jobs still fire.
  const std::string& op = args.front();
  ++calls_by_op[op];
  const bool grows = op == "put" || op == "putmany" || op == "putrun" ||
                     (op == "schedule_save" && args.size() > 3 && !args[3].empty());
  using delayq::redis::Command;
  if (!keys_named) keys_named.emplace(names.prefix, node);
  std::size_t bytes = keys_named->size(shard, answers) + Command::encoded_size(tag.size()) +
                      Command::encoded_size(node.size());
  for (const auto& arg : args) bytes += Command::encoded_size(arg.size());
  Command command = script.begin(kShardKeyCount + (answers ? 1 : 0), bytes, !grows);
  keys_named->add(shard, answers, command);
  for (const auto& arg : args) command.arg(arg);
  command.arg(tag).arg(node);  // jobs.lua's run() takes the call's number, then the caller, last
  request.commands.push_back(std::move(command));
  request.script = &script;
  const bool wait = write && options.wait_for_replica && replicated(slot);
  if (wait) {
    // On a connection of their own (the client's), so that a replica that stops answering
    // holds up only the calls that wait for it, not reserves, firings and leases.
    request.replicas = 1;
    request.replica_timeout = options.wait_timeout;
  }
  // The calls that may be answered 'moved' (a put, or a lookup by key, of a tube that lives
  // in another shard) keep their arguments until the answer, to go there.
  const bool may_move = op == "put" || op == "putrun" || op == "erase" || op == "peek" ||
                        op == "update" || op == "unrun";
  std::vector<std::string> kept;
  // What to ask about the call if it fails (note_lost()); a `lost` call is asked again as is.
  std::optional<LostCall> lost;
  if (!number.empty()) lost = LostCall{number, op, holders_of(args)};
  if (may_move) kept = std::move(args);
  ++calls_under_way;
  client->run(std::move(request), [self = shared_from_this(), shard, slot, write,
                                   number = std::move(number), lost = std::move(lost),
                                   args = std::move(kept), done = std::move(done)](
                                      Result<std::vector<Reply>> replies) mutable {
    --self->calls_under_way;
    if (self->closed) return;
    // A WAIT that saw no replica: no WAIT to that primary for the next 5 s (then one tries
    // again), or every write behind it would wait out its second too.
    if (replies.is_ok() && replies.value().size() > 1 &&
        replies.value()[1].type == ReplyType::kInteger && replies.value()[1].integer == 0) {
      self->no_wait_until[self->client->primary_of(slot)] =
          self->clock->steady_now() + Millis{5000};
    }
    if (!replies.is_ok()) {
      // The call may have run without its answer coming back, and could not be sent again
      // in time: what it made ready here, this node will not hear (it skips its own
      // messages). Every tube's best in the shard is unknown: the next reserve asks, and
      // waiting ones at the next five-second look (resync() probes the shards whose best is
      // unknown).
      for (auto& [tube, h] : self->hints) forget_head(h, shard);
      if (lost) self->note_lost(shard, std::move(*lost));
      // Redis could not be reached in time, or a connection broke: an error of the store, not a
      // reserve's timeout.
      return done(Status(Code::kIOError, "Redis: " + replies.status().message()));
    }
    if (!number.empty()) (self->answers_had[shard] += ',') += number;
    Answer answer = split_answer(std::move(replies.value().front()));
    if (answer.reply.is_error()) return done(error_status(answer.reply.str));
    if (const auto home = args.empty() ? std::nullopt : self->moved_to(answer.reply, shard)) {
      // The tube lives in another shard (flow.lua): the call goes there, and a put takes its
      // id there ("put[run] shards shard ...").
      if ((args[0] == "put" || args[0] == "putrun") && args.size() > 2) {
        args[2] = std::to_string(*home);
      }
      return self->call(*home, std::move(args), write, std::move(done));
    }
    // The tubes whose best ready job the call made better: this node's waiting reserves learn
    // of it now, not from the message (which it skips).
    self->notify_readied(shard, answer.readied);
    done(std::move(answer.reply));
  });
}

void Core::note_lost(std::uint32_t shard, LostCall lost) {
  lost_calls[shard].push_back(std::move(lost));
  ask_lost(shard);
}

void Core::ask_lost(std::uint32_t shard) {
  const auto it = lost_calls.find(shard);
  if (closed || asking_lost.contains(shard) || it == lost_calls.end()) return;
  asking_lost.insert(shard);
  std::vector<LostCall>& pending = it->second;
  const auto end =
      pending.begin() + static_cast<std::ptrdiff_t>(std::min(pending.size(), kMostLostAsked));
  auto asked = std::make_shared<std::vector<LostCall>>(std::make_move_iterator(pending.begin()),
                                                       std::make_move_iterator(end));
  pending.erase(pending.begin(), end);
  if (pending.empty()) lost_calls.erase(it);
  std::vector<std::string> args = {"lost"};
  for (const auto& one : *asked) args.push_back(one.number);
  call(shard, std::move(args), false,
       [self = shared_from_this(), shard, asked](Result<Reply> reply) {
         self->asking_lost.erase(shard);
         if (self->closed) return;
         const bool answered = reply.is_ok() && reply.value().elements.size() > 1 &&
                               reply.value().elements[0].str == "ok" &&
                               reply.value().elements[1].elements.size() == asked->size();
         if (!answered) {  // Redis still out of reach: asked again in a second
           auto& waiting = self->lost_calls[shard];
           waiting.insert(waiting.begin(), asked->begin(), asked->end());
           std::shared_ptr<Timer> timer = self->clock->timer();
           timer->expires_after(Millis{1000});
           timer->async_wait([self, shard, timer](bool expired) {
             if (expired) self->ask_lost(shard);
           });
           return;
         }
         const SteadyTime now = self->clock->steady_now();
         const auto& found = reply.value().elements[1].elements;
         for (std::size_t i = 0; i < asked->size(); ++i) {
           const LostCall& one = (*asked)[i];
           if (found[i].str == "void") {
             ++self->lost_void;
             self->voided.push_back({now, shard, one.number});
             continue;
           }
           if (found[i].type != ReplyType::kArray || found[i].elements.size() < 2) {
             ++self->lost_unknown;  // the kept answers had expired: nothing to go by
             continue;
           }
           ++self->lost_ran;
           (self->answers_had[shard] += ',') += one.number;
           for (const auto& [place, job] : reserved_in(one.op, found[i].elements[1])) {
             auto got = job_of(*job);
             if (got.is_ok() && place < one.holders.size()) {
               self->undo_reservation(one.holders[place], got.value());
             }
           }
         }
         self->ask_lost(shard);  // those that failed meanwhile, or past kMostLostAsked
       });
}

void Core::forget_voided() {
  const SteadyTime now = clock->steady_now();
  while (!voided.empty() && now - voided.front().at >= kVoidedLife) {
    (answers_had[voided.front().shard] += ',') += voided.front().number;
    voided.pop_front();
  }
}

void Core::trickle_from(const std::shared_ptr<std::vector<std::function<void()>>>& sends,
                        std::size_t from, std::size_t each) {
  if (closed) return;
  const std::size_t to = std::min(from + each, sends->size());
  for (std::size_t i = from; i < to; ++i) (*sends)[i]();
  if (to == sends->size()) return;
  std::shared_ptr<Timer> timer = clock->timer();
  timer->expires_after(kTrickleGap);
  timer->async_wait([self = shared_from_this(), sends, to, each, timer](bool expired) {
    if (expired) self->trickle_from(sends, to, each);
  });
}

std::uint32_t Core::burst_shard() {
  if (!burst) burst = next_shard();
  return *burst;
}

void Core::queue_put(std::uint32_t shard, std::vector<std::string> args,
                     std::function<void(Result<Reply>)> done) {
  pending_puts[shard].push_back({std::move(args), std::move(done)});
  post_flush();
}

void Core::post_flush() {
  if (flush_posted) return;
  flush_posted = true;
  asio::post(io, [self = shared_from_this()] {
    self->flush_posted = false;
    if (!self->pending_puts.empty()) self->flush_puts();
    if (!self->pending_erases.empty()) self->flush_erases();
  });
}

std::size_t Core::queue_erase(std::uint32_t shard, PendingErase erase) {
  auto& queued = pending_erases[shard];
  queued.push_back(std::move(erase));
  post_flush();
  return queued.size() - 1;
}

void Core::flush_erases() {
  constexpr std::size_t kMostPerCall = 100;  // bounds how long one script holds its shard
  ++erase_turn;
  auto all = std::move(pending_erases);
  pending_erases.clear();
  for (auto& [shard, erases] : all) {
    for (std::size_t from = 0; from < erases.size(); from += kMostPerCall) {
      const std::size_t count = std::min(kMostPerCall, erases.size() - from);
      if (count == 1) {
        // erase holder id tube key [bound tube...]
        auto& one = erases[from].args;
        std::vector<std::string> args = {"erase", std::move(one[0]), std::move(one[1]), "", ""};
        if (one.size() > 4) {
          args.push_back(std::move(one[2]));
          args.insert(args.end(), std::make_move_iterator(one.begin() + 4),
                      std::make_move_iterator(one.end()));
        }
        call(shard, std::move(args), true, std::move(erases[from].done));
        continue;
      }
      std::vector<std::string> args = {"erasemany", std::to_string(count)};
      auto sent = std::make_shared<std::vector<std::function<void(Result<Reply>)>>>();
      for (std::size_t i = from; i < from + count; ++i) {
        args.insert(args.end(), std::make_move_iterator(erases[i].args.begin()),
                    std::make_move_iterator(erases[i].args.end()));
        sent->push_back(std::move(erases[i].done));
      }
      call(shard, std::move(args), true, [sent](Result<Reply> reply) {
        // {ok, {each one's erase reply}}
        if (!reply.is_ok() || reply.value().elements.size() != 2 ||
            reply.value().elements[1].elements.size() != sent->size()) {
          const Status failed =
              reply.is_ok() ? Status(Code::kIOError, "Redis: an erasemany reply of " +
                                                         delayq::redis::describe(reply.value()))
                            : reply.status();
          for (auto& done : *sent) done(failed);
          return;
        }
        auto& each = reply.value().elements[1].elements;
        for (std::size_t i = 0; i < sent->size(); ++i) (*sent)[i](std::move(each[i]));
      });
    }
  }
}

void Core::flush_puts() {
  constexpr std::size_t kMostPerCall = 100;  // bounds how long one script holds its shard
  auto all = std::move(pending_puts);
  pending_puts.clear();
  burst.reset();
  for (auto& [shard, puts] : all) {
    for (std::size_t from = 0; from < puts.size(); from += kMostPerCall) {
      const std::size_t count = std::min(kMostPerCall, puts.size() - from);
      // The reserves waiting here for the tubes of the jobs put ready (no delay) are served by
      // the call itself, as a firing's are: no second call between the put and the worker.
      std::set<std::string> ready_tubes;
      for (std::size_t i = from; i < from + count; ++i) {
        const auto& job = puts[i].args;  // tube pri delay_or_at absolute ...
        if (job[2] == "0" && job[3] == "0") ready_tubes.insert(job[0]);
      }
      std::vector<std::string> waiting;
      const auto handed = ready_tubes.empty() ? std::vector<std::shared_ptr<Waiter>>{}
                                              : handed_to_call(waiting, &ready_tubes);
      if (count == 1) {
        std::vector<std::string> args = {"put", std::to_string(shards), std::to_string(shard)};
        args.insert(args.end(), puts[from].args.begin(), puts[from].args.end());
        args.insert(args.end(), waiting.begin(), waiting.end());
        call(shard, std::move(args), true,
             [self = shared_from_this(), handed,
              done = std::move(puts[from].done)](Result<Reply> reply) {
               // {ok, id, due, replaced, now, served}
               const Reply* served = reply.is_ok() && reply.value().elements.size() > 5
                                         ? &reply.value().elements[5]
                                         : nullptr;
               self->after_handing(handed, served);
               done(std::move(reply));
             });
        continue;
      }
      std::vector<std::string> args = {"putmany", std::to_string(shards), std::to_string(shard),
                                       std::to_string(count)};
      // Kept until the answer: a put that the shard answers 'moved' goes to the tube's home.
      auto sent = std::make_shared<std::vector<PendingPut>>();
      for (std::size_t i = from; i < from + count; ++i) {
        args.insert(args.end(), puts[i].args.begin(), puts[i].args.end());
        sent->push_back(std::move(puts[i]));
      }
      args.insert(args.end(), waiting.begin(), waiting.end());
      call(shard, std::move(args), true,
           [self = shared_from_this(), handed, sent, shard](Result<Reply> reply) {
             if (!reply.is_ok() || reply.value().elements.size() != sent->size() + 3) {
               const Status failed =
                   reply.is_ok()
                       ? Status(Code::kIOError, "Redis: a putmany reply of " +
                                                    delayq::redis::describe(reply.value()))
                       : reply.status();
               self->after_handing(handed, nullptr);
               for (auto& put : *sent) put.done(failed);
               return;
             }
             // {ok, now, <a put's reply>..., served}: each put that went in gets the present
             // as a single put's reply has it.
             auto& elements = reply.value().elements;
             self->after_handing(handed, &elements.back());
             for (std::size_t i = 0; i < sent->size(); ++i) {
               Reply& one = elements[i + 2];
               PendingPut& put = (*sent)[i];
               if (const auto home = self->moved_to(one, shard)) {
                 self->queue_put(*home, std::move(put.args), std::move(put.done));
                 continue;
               }
               if (!one.elements.empty() &&
                   (one.elements[0].str == "ok" || one.elements[0].str == "debounced")) {
                 one.elements.push_back(elements[1]);
               }
               put.done(std::move(one));
             }
           });
    }
  }
}

bool Core::replicated(std::uint16_t slot) const {
  const std::string primary = client->primary_of(slot);
  const auto it = replicas.find(primary);
  if (it == replicas.end() || it->second == 0) return false;
  const auto off = no_wait_until.find(primary);
  return off == no_wait_until.end() || off->second <= clock->steady_now();
}

// INFO replication on every primary, every 5 s: "connected_slaves:N" and each
// "slaveK:...,state=online,...".
void Core::check_replicas(std::function<void()> done) {
  const auto primaries = client->primaries();
  auto left = std::make_shared<std::size_t>(primaries.size());
  auto finished = std::make_shared<std::function<void()>>(std::move(done));
  auto self = shared_from_this();
  const auto again = [self] {
    self->replica_timer->expires_after(Millis{5000});
    self->replica_timer->async_wait([self](bool expired) {
      if (expired && !self->closed) self->check_replicas(nullptr);
    });
  };
  if (primaries.empty()) {
    if (*finished) (*finished)();
    return again();
  }
  for (const auto& address : primaries) {
    client->run_at(address, Command{"INFO", "replication"},
                   [self, address = address, left, finished, again](Result<Reply> reply) {
                     if (self->closed) return;
                     int online = 0;
                     if (reply.is_ok()) online = replicas_acknowledging(reply.value().str);
                     self->replicas[address] = online;
                     if (--*left > 0) return;
                     if (*finished) (*finished)();
                     again();
                   });
  }
}

}  // namespace delayq::broker::redis
