#include "redis/client.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <unordered_map>
#include <utility>

#include "redis/slot.h"

namespace delayq::redis {
namespace asio = boost::asio;
using SteadyClock = std::chrono::steady_clock;

// --- Script

Script::Script(std::string source) : name_("delayq_") {
  // Named after everything loaded, the registrations too (with NAME for the name they take):
  // a library that registers differently is another library.
  const std::string registrations =
      "redis.register_function('NAME', run)\n"
      "redis.register_function{function_name='NAME_oom', callback=run, flags={'allow-oom'}}\n"
      "redis.register_function{function_name='NAME_slots', callback=run,\n"
      "  flags={'allow-oom', 'allow-cross-slot-keys'}}\n";
  const std::string named = source + "\n" + registrations;
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  DELAYQ_CHECK(EVP_Digest(named.data(), named.size(), digest.data(), &size, EVP_sha1(), nullptr) ==
               1);
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned int i = 0; i < size; ++i) {
    name_.push_back(kHex[digest[i] >> 4]);
    name_.push_back(kHex[digest[i] & 0xF]);
  }
  std::string registered = registrations;
  for (auto at = registered.find("NAME"); at != std::string::npos; at = registered.find("NAME")) {
    registered.replace(at, 4, name_);
  }
  library_ = "#!lua name=" + name_ + "\n" + source + "\n" + registered;
}

bool Script::missing(const Reply& error) {
  return error.is_error() && error.str.starts_with("ERR Function not found");
}

Command Script::call(const std::vector<std::string_view>& keys,
                     const std::vector<std::string_view>& args, bool over_memory) const {
  return call_as(over_memory ? name_ + "_oom" : name_, keys, args);
}

Command Script::call_across_slots(const std::vector<std::string_view>& keys,
                                  const std::vector<std::string_view>& args) const {
  return call_as(name_ + "_slots", keys, args);
}

Command Script::begin(std::size_t keys, std::size_t bytes, bool over_memory) const {
  return over_memory ? begin_as(name_ + "_oom", keys, bytes) : begin_as(name_, keys, bytes);
}

Command Script::begin_as(std::string_view function, std::size_t keys, std::size_t bytes) {
  Command command;
  command.reserve(bytes + Command::encoded_size(5) + Command::encoded_size(function.size()) +
                  Command::encoded_size(20));
  command.arg("FCALL").arg(function).arg(static_cast<std::int64_t>(keys));
  return command;
}

Command Script::call_as(std::string_view function, const std::vector<std::string_view>& keys,
                        const std::vector<std::string_view>& args) {
  std::size_t bytes = 0;
  for (const auto key : keys) bytes += Command::encoded_size(key.size());
  for (const auto value : args) bytes += Command::encoded_size(value.size());
  Command command = begin_as(function, keys.size(), bytes);
  for (const auto key : keys) command.arg(key);
  for (const auto value : args) command.arg(value);
  return command;
}

// --- addresses

namespace {

constexpr std::uint16_t kNoNode = 0xFFFF;
constexpr Millis kFirstBackoff{10};
constexpr Millis kLastBackoff{320};
// MOVED replies followed at once, before a request starts to wait between tries: a slot that
// moves back and forth must not spin.
constexpr int kImmediateRedirections = 5;

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

// "host:port", "[v6]:port" or "v6:port" (as MOVED names IPv6 nodes): the port after the last ':'.
std::optional<HostPort> split_address(std::string_view address) {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = address.substr(0, colon);
  const std::string_view digits = address.substr(colon + 1);
  unsigned port = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535) {
    return std::nullopt;
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return HostPort{std::string(host), static_cast<std::uint16_t>(port)};
}

std::string join(std::string_view host, std::int64_t port) {
  return std::string(host) + ":" + std::to_string(port);
}

// Where a node's connection is kept (and the libraries sent on it).
std::string connection_key(const std::string& address, bool second) {
  return second ? address + " (second)" : address;
}

// The "host:port" of a MOVED or ASK reply ("MOVED 3999 127.0.0.1:6381"); a node that does not
// know its own host name sends ":6381", meaning the host the reply came from.
std::string redirection_target(std::string_view error, std::string_view replied_from) {
  const auto space = error.rfind(' ');
  std::string_view target = error.substr(space + 1);
  if (!target.empty() && target.front() == ':') {
    const auto from = split_address(replied_from);
    return from ? from->host + std::string(target) : std::string();
  }
  const auto parts = split_address(target);
  return parts ? join(parts->host, parts->port) : std::string();
}

}  // namespace

// --- the client's state, shared with the handlers under way

struct Client::Impl : std::enable_shared_from_this<Client::Impl> {
  struct Call {
    Request request;
    Callback<std::vector<Reply>> done;
    SteadyClock::time_point deadline;
    int tries = 0;
    int waits = 0;
    std::string ask;  // send once to this node, after ASKING
    Status problem;   // what the last try met, for the timeout's message
    std::unique_ptr<asio::steady_timer> timer;
    // The try under way: where it went, the outcomes of its commands (then its WAIT's), and how
    // many have yet to come (the last completes the try: on_replies()).
    std::string address;
    std::vector<Outcome> outcomes;
    std::size_t left = 0;
  };
  using CallPtr = std::shared_ptr<Call>;
  // A request waiting for its WAIT's answer (Request::replicas).
  struct AckWaiter {
    int replicas = 0;
    Millis timeout{0};
    std::function<void(Outcome)> done;
  };
  // The WAITs of one connection: at most one in flight; the requests written after it wait for
  // the next, which is sent when it comes back and covers them all.
  struct Acks {
    std::weak_ptr<Connection> connection;
    bool in_flight = false;
    std::vector<AckWaiter> next;
  };

  Impl(asio::any_io_executor executor_in, ClientOptions options_in)
      : executor(std::move(executor_in)),
        options(std::move(options_in)),
        owner(kSlotCount, kNoNode),
        refresh_timer(executor) {}

  // The connection to `address` (the second one: for requests that WAIT, Request::replicas).
  std::shared_ptr<Connection> connection(const std::string& address, bool second = false);
  void dispatch(const CallPtr& call);
  void on_replies(const CallPtr& call, const std::string& address, std::vector<Outcome> outcomes);
  void redispatch_later(const CallPtr& call, Status problem);
  // Whether a request written to a connection that broke goes again: it may run twice
  // (Request::send_again), and a reply timeout still fits before its deadline, so that a Redis
  // that stops answering fails it when it did before.
  [[nodiscard]] bool may_send_again(const Call& call) const {
    return call.request.send_again &&
           SteadyClock::now() + options.connection.reply_timeout < call.deadline;
  }
  void await_replicas(const std::string& key, const std::shared_ptr<Connection>& target,
                      AckWaiter waiter);
  void send_wait(const std::shared_ptr<Acks>& state, const std::shared_ptr<Connection>& target,
                 std::vector<AckWaiter> group);
  void finish(const CallPtr& call, Result<std::vector<Reply>> result);

  void refresh(std::function<void(Status)> done);
  void ask_topology(std::vector<std::string> candidates, std::size_t index, std::string errors);
  bool take_topology(const Reply& slots, const std::string& asked);
  void end_refresh(const Status& status);
  void schedule_refresh();
  void shutdown();
  void resubscribe();
  void keep_alive();
  void place_shard_channels();
  void place_later();
  std::shared_ptr<Connection> shard_subscriber(const std::string& address);
  void unplace(const std::shared_ptr<Connection>& from, const std::string& name);
  void sync_round();

  asio::any_io_executor executor;
  ClientOptions options;
  bool closed = false;
  bool is_standalone = false;
  std::vector<std::string> nodes;    // primaries, by index
  std::vector<std::uint16_t> owner;  // slot -> index into nodes
  std::unordered_map<std::string, std::shared_ptr<Connection>> connections;
  // The libraries whose FUNCTION LOAD the connection to each address has been sent (a new
  // connection starts with none).
  std::unordered_map<std::string, std::vector<const Script*>> libraries_sent;
  std::unordered_map<std::string, std::shared_ptr<Acks>> acks;  // by connection, as above
  bool refreshing = false;
  std::vector<std::function<void(Status)>> refresh_waiters;
  asio::steady_timer refresh_timer;
  ClientStats stats;
  // The subscription, when there is one.
  std::string channel;
  std::function<void(std::string)> on_message;
  std::function<void()> on_subscribed;
  std::shared_ptr<Connection> subscriber;
  asio::steady_timer resubscribe_timer{executor};
  // The shard channels (subscribe_shards), each with the connection it is subscribed on (null:
  // to be subscribed where the map says), and one connection per primary that has some.
  struct ShardChannel {
    std::string name;
    std::uint16_t slot = 0;
    std::shared_ptr<Connection> on;
    bool subscribed = false;          // its SSUBSCRIBE on `on` was answered
    std::uint64_t subscriptions = 0;  // how many times it was (sync_shards compares)
    void unplace() {
      on = nullptr;
      subscribed = false;
    }
  };
  // When requests of a slot last met ASK, TRYAGAIN, CLUSTERDOWN, READONLY...: while it
  // migrates or fails over, its shard channel's messages may come from another node than the
  // one the channel is subscribed on, so sync_shards() does not count it as held. Such a slot
  // is unsettled for kUnsettledFor.
  std::unordered_map<std::uint16_t, SteadyClock::time_point> unsettled;
  static constexpr std::chrono::seconds kUnsettledFor{10};
  [[nodiscard]] bool slot_unsettled(std::uint16_t slot) const {
    const auto it = unsettled.find(slot);
    return it != unsettled.end() && SteadyClock::now() - it->second < kUnsettledFor;
  }
  // The sync_shards() round under way, and the callers waiting for the next.
  bool syncing = false;
  std::vector<std::function<void(std::vector<bool>)>> sync_next;
  std::vector<ShardChannel> shard_channels;
  std::unordered_map<std::string, std::size_t> shard_channel_index;
  std::unordered_map<std::string, std::shared_ptr<Connection>> shard_subscribers;
  std::function<void(std::size_t, std::string)> on_shard_message;
  std::function<void(std::size_t)> on_shard_subscribed;
  asio::steady_timer place_timer{executor};
  bool place_armed = false;
  Millis place_backoff{200};
  // The last SSUBSCRIBE refusal, until one succeeds (shard_subscribe_error()).
  std::string shard_subscribe_error;
  bool keeping_alive = false;
  asio::steady_timer ping_timer{executor};
};

std::shared_ptr<Connection> Client::Impl::connection(const std::string& address, bool second) {
  const std::string key = connection_key(address, second);
  auto& slot = connections[key];
  if (slot && !slot->broken()) return slot;
  if (slot) ++stats.reconnects;
  const auto parts = split_address(address);
  DELAYQ_CHECK(parts.has_value());
  slot = std::make_shared<Connection>(executor, parts->host, parts->port, options.connection);
  libraries_sent.erase(key);
  return slot;
}

// --- requests

void Client::Impl::dispatch(const CallPtr& call) {
  if (closed) return;
  ++call->tries;
  std::string address = std::move(call->ask);
  call->ask.clear();
  const bool asking = !address.empty();
  if (!asking) {
    const auto index = owner[call->request.slot];
    if (index == kNoNode) {
      refresh(nullptr);
      redispatch_later(call, Status(Code::kIOError, "slot " + std::to_string(call->request.slot) +
                                                        " is served by no known node"));
      return;
    }
    address = nodes[index];
  }
  // A request that WAITs goes on the second connection: a WAIT blocks the one it is read from.
  const bool second = call->request.replicas > 0;
  auto target = connection(address, second);
  if (const Script* script = call->request.script; script != nullptr) {
    // A connection's first call of a library is preceded by its FUNCTION LOAD, without REPLACE:
    // a node that has the library answers "already exists" (one error reply per connection)
    // without compiling anything, and one that lacks it has it before the call runs. Without
    // this, the burst of calls a node sends when it starts each failed on a fresh Redis
    // (129 loads of 1.2 ms each and 130 failed FCALLs measured at one node's start).
    auto& sent = libraries_sent[connection_key(address, second)];
    if (std::find(sent.begin(), sent.end(), script) == sent.end()) {
      sent.push_back(script);
      ++stats.library_loads_sent;
      target->send(Command{"FUNCTION", "LOAD", script->library()}, [](Outcome) {});
    }
  }
  const auto count = call->request.commands.size();
  // The commands' outcomes, then the WAIT's if the request waits for replicas; the last to
  // arrive completes the request. (A try is dispatched again only once all of the one before
  // have arrived.)
  call->outcomes.assign(count + (second ? 1 : 0), Outcome{});
  call->left = call->outcomes.size();
  call->address = address;
  auto arrived = [self = shared_from_this(), call](std::size_t i, Outcome outcome) {
    call->outcomes[i] = std::move(outcome);
    if (--call->left == 0) {
      self->on_replies(call, std::exchange(call->address, {}), std::move(call->outcomes));
    }
  };
  for (std::size_t i = 0; i < count; ++i) {
    // ASKING lets the next command alone into a slot being imported.
    if (asking) target->send(Command{"ASKING"}, [](Outcome) {});
    target->send(call->request.commands[i],
                 [arrived, i](Outcome outcome) { arrived(i, std::move(outcome)); });
  }
  if (second) {
    await_replicas(
        connection_key(address, second), target,
        AckWaiter{call->request.replicas, call->request.replica_timeout,
                  [arrived, count](Outcome outcome) { arrived(count, std::move(outcome)); }});
  }
}

// WAIT answers for the writes made on its connection before it, so one WAIT covers every request
// written before it was sent. While one is in flight, the requests written meanwhile wait for the
// next, sent when it comes back: one WAIT per round trip to the replicas, not one per request
// (each of which would hold up the connection for the replicas' round trip).
void Client::Impl::await_replicas(const std::string& key, const std::shared_ptr<Connection>& target,
                                  AckWaiter waiter) {
  auto& slot = acks[key];
  if (!slot || slot->connection.lock() != target) {
    // A new connection: a WAIT in flight on the old one answers its own (it failed with it).
    slot = std::make_shared<Acks>();
    slot->connection = target;
  }
  if (slot->in_flight) {
    slot->next.push_back(std::move(waiter));
    return;
  }
  std::vector<AckWaiter> group;
  group.push_back(std::move(waiter));
  send_wait(slot, target, std::move(group));
}

void Client::Impl::send_wait(const std::shared_ptr<Acks>& state,
                             const std::shared_ptr<Connection>& target,
                             std::vector<AckWaiter> group) {
  int replicas = 0;
  Millis timeout{0};
  for (const auto& waiter : group) {
    replicas = std::max(replicas, waiter.replicas);
    timeout = std::max(timeout, waiter.timeout);
  }
  state->in_flight = true;
  ++stats.waits;
  target->send(Command{"WAIT", std::to_string(replicas), std::to_string(timeout.count())},
               [self = shared_from_this(), state, target, group = std::move(group),
                replicas](Outcome outcome) mutable {
                 state->in_flight = false;
                 auto next = std::exchange(state->next, {});
                 // Fewer replicas than asked within the timeout (a replica stopped answering), or
                 // the connection broke: those written meanwhile get the same answer at once,
                 // rather than each WAIT in turn holding up all behind it for its whole timeout.
                 // Otherwise their WAIT goes now, before this one's requests complete: one sent
                 // again from its completion (a redirection to the same node) waits for the
                 // WAIT after it.
                 const bool short_of_replicas = !outcome.status.is_ok() ||
                                                outcome.reply.type != ReplyType::kInteger ||
                                                outcome.reply.integer < replicas;
                 if (!next.empty() && !short_of_replicas && !self->closed) {
                   self->send_wait(state, target, std::move(next));
                   next.clear();
                 }
                 for (auto& waiter : next) waiter.done(outcome);
                 for (auto& waiter : group) waiter.done(outcome);
               });
}

void Client::Impl::on_replies(const CallPtr& call, const std::string& address,
                              std::vector<Outcome> outcomes) {
  if (closed) return;
  const Outcome& first = outcomes.front();
  if (first.status.is_ok()) ++stats.answered;
  if (!first.status.is_ok()) {
    if (first.written && !may_send_again(*call)) {
      finish(call, Status(Code::kIOError, first.status.message() + " (the command may have run)"));
      return;
    }
    if (first.written) ++stats.sent_again;
    refresh(nullptr);
    redispatch_later(call, first.status);
    return;
  }
  const std::string_view code = first.reply.error_code();
  if (code == "MOVED") {
    ++stats.moved;
    unsettled[call->request.slot] = SteadyClock::now();
    const auto target = redirection_target(first.reply.str, address);
    if (!target.empty()) {
      auto known = std::find(nodes.begin(), nodes.end(), target);
      if (known == nodes.end()) {
        nodes.push_back(target);
        known = nodes.end() - 1;
      }
      owner[call->request.slot] = static_cast<std::uint16_t>(known - nodes.begin());
    }
    refresh(nullptr);  // one slot moved: others may have moved with it
    if (call->tries <= kImmediateRedirections) {
      dispatch(call);
    } else {
      redispatch_later(call, Status(Code::kIOError, first.reply.str));
    }
    return;
  }
  if (code == "ASK") {
    ++stats.ask;
    unsettled[call->request.slot] = SteadyClock::now();
    call->ask = redirection_target(first.reply.str, address);
    if (call->ask.empty()) {
      finish(call, Status(Code::kIOError, address + " answered " + first.reply.str));
      return;
    }
    dispatch(call);
    return;
  }
  if (code == "TRYAGAIN" || code == "LOADING" || code == "MASTERDOWN" || code == "CLUSTERDOWN" ||
      code == "READONLY") {
    // The slot migrates, or its node changes: its scripts may run, and publish, elsewhere.
    unsettled[call->request.slot] = SteadyClock::now();
    if (code == "TRYAGAIN") ++stats.try_again;
    if (code == "LOADING" || code == "MASTERDOWN") ++stats.loading;
    if (code == "CLUSTERDOWN") ++stats.cluster_down;
    if (code == "READONLY") {
      // The node is a replica now (a failover, or a name that still points to the old
      // primary): drop the connection, so the next try reconnects, and ask who serves now.
      ++stats.read_only;
      connection(address, call->request.replicas > 0)
          ->close(Status(Code::kIOError, address + " is read-only"));
    }
    if (code != "TRYAGAIN" && code != "LOADING") refresh(nullptr);
    redispatch_later(call, Status(Code::kIOError, address + " answered " + first.reply.str));
    return;
  }
  if (call->request.script != nullptr && Script::missing(first.reply)) {
    ++stats.function_loads;
    auto self = shared_from_this();
    // REPLACE: another client may load the same library at the same moment.
    connection(address, call->request.replicas > 0)
        ->send(Command{"FUNCTION", "LOAD", "REPLACE", call->request.script->library()},
               [self, call](Outcome loaded) {
                 if (self->closed) return;
                 if (!loaded.status.is_ok() || loaded.reply.is_error()) {
                   self->redispatch_later(call, loaded.status.is_ok()
                                                    ? Status(Code::kIOError, loaded.reply.str)
                                                    : loaded.status);
                   return;
                 }
                 self->dispatch(call);
               });
    return;
  }
  std::vector<Reply> replies;
  replies.reserve(outcomes.size());
  for (auto& outcome : outcomes) {
    if (!outcome.status.is_ok()) {
      if (may_send_again(*call)) {  // the WAIT's connection broke: the whole request again
        ++stats.sent_again;
        refresh(nullptr);
        redispatch_later(call, outcome.status);
        return;
      }
      finish(call,
             Status(Code::kIOError, outcome.status.message() + " (the commands before it ran)"));
      return;
    }
    replies.push_back(std::move(outcome.reply));
  }
  finish(call, std::move(replies));
}

void Client::Impl::redispatch_later(const CallPtr& call, Status problem) {
  call->problem = std::move(problem);
  const auto backoff = std::min(kFirstBackoff * (1 << std::min(call->waits, 5)), kLastBackoff);
  ++call->waits;
  if (SteadyClock::now() + backoff >= call->deadline) {
    finish(call,
           Status(Code::kTimedOut,
                  "gave up after " + std::to_string(options.request_timeout.count()) + " ms and " +
                      std::to_string(call->tries) + " tries; last: " + call->problem.message()));
    return;
  }
  if (!call->timer) call->timer = std::make_unique<asio::steady_timer>(executor);
  call->timer->expires_after(backoff);
  call->timer->async_wait(
      [self = shared_from_this(), call](const boost::system::error_code& error) {
        if (!error) self->dispatch(call);
      });
}

void Client::Impl::finish(const CallPtr& call, Result<std::vector<Reply>> result) {
  auto done = std::move(call->done);
  call->timer.reset();
  done(std::move(result));
}

// --- topology

void Client::Impl::refresh(std::function<void(Status)> done) {
  if (done) refresh_waiters.push_back(std::move(done));
  if (refreshing || closed) return;
  refreshing = true;
  // Known primaries first, then the seeds: a seed may be gone for good.
  std::vector<std::string> candidates = nodes;
  for (const auto& seed : options.seeds) {
    const auto parts = split_address(seed);
    if (!parts) continue;
    auto address = join(parts->host, parts->port);
    if (std::find(candidates.begin(), candidates.end(), address) == candidates.end()) {
      candidates.push_back(std::move(address));
    }
  }
  ask_topology(std::move(candidates), 0, {});
}

void Client::Impl::ask_topology(std::vector<std::string> candidates, std::size_t index,
                                std::string errors) {
  if (closed) return;
  if (index >= candidates.size()) {
    end_refresh(Status(Code::kIOError,
                       "no Redis node gave the cluster's topology" +
                           (errors.empty() ? std::string(" (no address)") : ": " + errors)));
    return;
  }
  const std::string address = candidates[index];
  connection(address)->send(
      Command{"CLUSTER", "SLOTS"},
      [self = shared_from_this(), candidates = std::move(candidates), index, address,
       errors = std::move(errors)](Outcome outcome) mutable {
        if (self->closed) return;
        std::string problem;
        if (!outcome.status.is_ok()) {
          problem = outcome.status.message();
        } else if (outcome.reply.is_error() &&
                   outcome.reply.str.find("cluster support disabled") != std::string::npos) {
          // A single Redis: it serves every slot.
          self->is_standalone = true;
          self->nodes = {address};
          std::fill(self->owner.begin(), self->owner.end(), std::uint16_t{0});
          self->end_refresh(Status::ok());
          return;
        } else if (outcome.reply.is_error()) {
          problem = address + " answered " + outcome.reply.str;
        } else if (!self->take_topology(outcome.reply, address)) {
          problem = address + " sent a CLUSTER SLOTS reply that cannot be read";
        } else {
          self->end_refresh(Status::ok());
          return;
        }
        if (!errors.empty()) errors += "; ";
        errors += problem;
        self->ask_topology(std::move(candidates), index + 1, std::move(errors));
      });
}

// CLUSTER SLOTS: [[first slot, last slot, [host, port, id, ...] (primary), replicas...], ...].
// A host "" or "?" means the node does not know its address: the one it was reached at.
bool Client::Impl::take_topology(const Reply& slots, const std::string& asked) {
  if (slots.type != ReplyType::kArray) return false;
  std::vector<std::string> new_nodes;
  std::vector<std::uint16_t> new_owner(kSlotCount, kNoNode);
  const auto asked_parts = split_address(asked);
  for (const auto& range : slots.elements) {
    if (range.type != ReplyType::kArray || range.elements.size() < 3) return false;
    const auto& first = range.elements[0];
    const auto& last = range.elements[1];
    const auto& primary = range.elements[2];
    if (first.type != ReplyType::kInteger || last.type != ReplyType::kInteger ||
        primary.type != ReplyType::kArray || primary.elements.size() < 2 ||
        primary.elements[1].type != ReplyType::kInteger || first.integer < 0 ||
        last.integer >= kSlotCount || first.integer > last.integer) {
      return false;
    }
    std::string host = primary.elements[0].str;
    if ((host.empty() || host == "?") && asked_parts) host = asked_parts->host;
    const auto address = join(host, primary.elements[1].integer);
    auto known = std::find(new_nodes.begin(), new_nodes.end(), address);
    if (known == new_nodes.end()) {
      new_nodes.push_back(address);
      known = new_nodes.end() - 1;
    }
    const auto index = static_cast<std::uint16_t>(known - new_nodes.begin());
    for (auto slot = first.integer; slot <= last.integer; ++slot) {
      new_owner[static_cast<std::size_t>(slot)] = index;
    }
  }
  is_standalone = false;
  nodes = std::move(new_nodes);
  owner = std::move(new_owner);
  return true;
}

void Client::Impl::end_refresh(const Status& status) {
  refreshing = false;
  if (status.is_ok()) {
    ++stats.refreshes;
    // A shard channel whose slot has moved is subscribed where it now is. (Its old node also
    // says sunsubscribe when the slot leaves it, if the connection to it still works.)
    bool moved = false;
    for (auto& entry : shard_channels) {
      const auto index = owner[entry.slot];
      if (entry.on && index != kNoNode && entry.on->address() != nodes[index]) {
        entry.unplace();
        moved = true;
      }
    }
    if (moved)
      asio::post(executor, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->place_shard_channels();
      });
  }
  auto waiters = std::move(refresh_waiters);
  refresh_waiters.clear();
  for (auto& waiter : waiters) waiter(status);
  schedule_refresh();
}

void Client::Impl::schedule_refresh() {
  if (closed) return;
  refresh_timer.expires_after(options.refresh_period);
  refresh_timer.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
    auto self = weak.lock();
    if (!error && self) self->refresh(nullptr);
  });
}

void Client::Impl::resubscribe() {
  if (closed) return;
  std::string address = nodes.empty() ? std::string() : nodes.front();
  if (address.empty() && !options.seeds.empty()) {
    const auto parts = split_address(options.seeds.front());
    if (parts) address = join(parts->host, parts->port);
  }
  auto retry = [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self || self->closed) return;
    self->resubscribe_timer.expires_after(Millis{200});
    self->resubscribe_timer.async_wait(
        [weak = self->weak_from_this()](const boost::system::error_code& error) {
          auto again = weak.lock();
          if (!error && again) again->resubscribe();
        });
  };
  if (address.empty()) return retry();
  const auto parts = split_address(address);
  subscriber = std::make_shared<Connection>(executor, parts->host, parts->port, options.connection);
  subscriber->on_message([weak = weak_from_this()](std::string, std::string payload) {
    auto self = weak.lock();
    if (self && !self->closed && self->on_message) self->on_message(std::move(payload));
  });
  subscriber->on_broken([retry](const Status&) { retry(); });
  subscriber->send(Command{"SUBSCRIBE", channel},
                   [weak = weak_from_this(), retry, mine = subscriber](Outcome outcome) {
                     auto self = weak.lock();
                     if (!self || self->closed) return;
                     if (outcome.status.is_ok() && outcome.reply.is_error()) {
                       mine->close(Status(Code::kIOError, outcome.reply.str));  // on_broken retries
                       return;
                     }
                     if (!outcome.status.is_ok()) return;
                     if (self->on_subscribed) self->on_subscribed();
                   });
}

// A PING every 5 s on each subscriber's connection, which must be answered within the reply
// timeout: a node that went silent without closing the connection (a paused VM, a lost link) is
// noticed, and the subscriptions made again, instead of waiting for messages that never come.
// Shard connections left with no channel are closed.
void Client::Impl::keep_alive() {
  ping_timer.expires_after(Millis{5000});
  ping_timer.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
    auto self = weak.lock();
    if (error || !self || self->closed) return;
    if (self->subscriber && !self->subscriber->broken()) {
      self->subscriber->send(Command{"PING"}, [](Outcome) {});
    }
    for (auto it = self->shard_subscribers.begin(); it != self->shard_subscribers.end();) {
      const auto& target = it->second;
      const bool used = std::any_of(self->shard_channels.begin(), self->shard_channels.end(),
                                    [&](const ShardChannel& c) { return c.on == target; });
      if (!used || target->broken()) {
        target->close(Status(Code::kIOError, "no shard channel left on it"));
        it = self->shard_subscribers.erase(it);
        continue;
      }
      target->send(Command{"PING"}, [](Outcome) {});
      ++it;
    }
    self->keep_alive();
  });
}

std::shared_ptr<Connection> Client::Impl::shard_subscriber(const std::string& address) {
  auto& target = shard_subscribers[address];
  if (target && !target->broken()) return target;
  const auto parts = split_address(address);
  DELAYQ_CHECK(parts.has_value());
  target = std::make_shared<Connection>(executor, parts->host, parts->port, options.connection);
  std::weak_ptr<Connection> weak_target = target;
  target->on_message([weak = weak_from_this()](std::string name, std::string payload) {
    auto self = weak.lock();
    if (!self || self->closed || !self->on_shard_message) return;
    if (const auto it = self->shard_channel_index.find(name);
        it != self->shard_channel_index.end()) {
      self->on_shard_message(it->second, std::move(payload));
    }
  });
  target->on_unsubscribed([weak = weak_from_this(), weak_target](std::string name) {
    auto self = weak.lock();
    if (self && !self->closed) self->unplace(weak_target.lock(), name);
  });
  target->on_broken([weak = weak_from_this(), weak_target](const Status&) {
    auto self = weak.lock();
    if (self && !self->closed) self->unplace(weak_target.lock(), "");
  });
  return target;
}

// The channel (every channel, for "") subscribed on `from` is no longer: subscribe it again,
// where the map says once it was asked again.
void Client::Impl::unplace(const std::shared_ptr<Connection>& from, const std::string& name) {
  bool any = false;
  for (auto& entry : shard_channels) {
    if (entry.on && entry.on == from && (name.empty() || entry.name == name)) {
      entry.unplace();
      any = true;
    }
  }
  if (any) place_later();
}

// After 200 ms, doubling up to 5 s while SSUBSCRIBEs keep being refused (a NOPERM is no
// passing state: it must not cost the node a topology and a command per channel five times a
// second).
void Client::Impl::place_later() {
  if (place_armed || closed) return;
  place_armed = true;
  const Millis delay = place_backoff;
  if (!shard_subscribe_error.empty()) place_backoff = std::min(place_backoff * 2, Millis{5000});
  place_timer.expires_after(delay);
  place_timer.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
    auto self = weak.lock();
    if (error || !self || self->closed) return;
    self->place_armed = false;
    self->refresh([weak = self->weak_from_this()](const Status&) {
      if (auto again = weak.lock()) again->place_shard_channels();
    });
  });
}

// One round of sync_shards(): a PING on every connection with a subscribed shard channel.
void Client::Impl::sync_round() {
  syncing = true;
  struct Round {
    std::vector<std::function<void(std::vector<bool>)>> dones;
    std::vector<bool> held;  // subscribed at the start, and its connection answered
    std::vector<std::uint64_t> subscriptions;
    std::size_t left = 0;
  };
  auto round = std::make_shared<Round>();
  round->dones = std::move(sync_next);
  sync_next.clear();
  std::vector<std::shared_ptr<Connection>> targets;
  for (const auto& entry : shard_channels) {
    round->held.push_back(entry.subscribed);
    round->subscriptions.push_back(entry.subscriptions);
    if (entry.subscribed && std::find(targets.begin(), targets.end(), entry.on) == targets.end()) {
      targets.push_back(entry.on);
    }
  }
  auto end = [weak = weak_from_this(), round] {
    auto self = weak.lock();
    if (!self || self->closed) return;
    // Held throughout: still subscribed, not made again meanwhile (messages in between lost),
    // and on the node that serves the slot as far as the map says (a replica that has it, as
    // after a failover, gets its messages later, over the cluster bus).
    // Nor a slot that migrated or failed over in the last 10 s.
    const auto settled_since = SteadyClock::now() - kUnsettledFor;
    std::erase_if(self->unsettled, [&](const auto& e) { return e.second < settled_since; });
    for (std::size_t i = 0; i < round->held.size(); ++i) {
      const auto& entry = self->shard_channels[i];
      const auto index = self->owner[entry.slot];
      round->held[i] = round->held[i] && entry.subscribed &&
                       entry.subscriptions == round->subscriptions[i] && index != kNoNode &&
                       entry.on->address() == self->nodes[index] &&
                       !self->slot_unsettled(entry.slot);
    }
    self->syncing = false;
    for (auto& done : round->dones) done(round->held);
    if (!self->sync_next.empty()) self->sync_round();
  };
  round->left = targets.size();
  if (targets.empty()) return asio::post(executor, end);
  for (const auto& target : targets) {
    target->send(Command{"PING"}, [weak = weak_from_this(), round, target, end](Outcome outcome) {
      auto self = weak.lock();
      if (!self || self->closed) return;
      if (outcome.status.is_ok()) ++self->stats.answered;
      if (!outcome.status.is_ok() || outcome.reply.is_error()) {
        for (std::size_t i = 0; i < round->held.size(); ++i) {
          if (self->shard_channels[i].on == target) round->held[i] = false;
        }
      }
      if (--round->left == 0) end();
    });
  }
}

// Subscribes each channel not subscribed on the primary that serves its slot, one SSUBSCRIBE
// each (channels of different slots cannot share one in a cluster).
void Client::Impl::place_shard_channels() {
  if (closed) return;
  bool unplaced = false;
  for (std::size_t i = 0; i < shard_channels.size(); ++i) {
    auto& entry = shard_channels[i];
    if (entry.on) continue;
    const auto index = owner[entry.slot];
    if (index == kNoNode) {
      unplaced = true;
      continue;
    }
    auto target = shard_subscriber(nodes[index]);
    entry.on = target;
    target->send(Command{"SSUBSCRIBE", entry.name},
                 [weak = weak_from_this(), i, target](Outcome outcome) {
                   auto self = weak.lock();
                   if (!self || self->closed) return;
                   auto& placed = self->shard_channels[i];
                   // Broken (on_broken places it again), or placed elsewhere meanwhile.
                   if (!outcome.status.is_ok() || placed.on != target) return;
                   if (outcome.reply.is_error()) {  // MOVED, CLUSTERDOWN, NOPERM...
                     placed.unplace();
                     self->shard_subscribe_error = outcome.reply.str;
                     ++self->stats.shard_subscribe_errors;
                     self->place_later();
                     return;
                   }
                   self->place_backoff = Millis{200};
                   self->shard_subscribe_error.clear();
                   placed.subscribed = true;
                   ++placed.subscriptions;
                   ++self->stats.shard_subscriptions;
                   if (self->on_shard_subscribed) self->on_shard_subscribed(i);
                 });
  }
  if (unplaced) place_later();
}

void Client::Impl::shutdown() {
  closed = true;
  refresh_timer.cancel();
  resubscribe_timer.cancel();
  place_timer.cancel();
  ping_timer.cancel();
  sync_next.clear();  // (their callers hold their owners: no cycle left behind)
  if (subscriber) subscriber->close(Status(Code::kIOError, "the client is closed"));
  for (auto& [address, target] : shard_subscribers) {
    target->close(Status(Code::kIOError, "the client is closed"));
  }
  shard_subscribers.clear();
  for (auto& [address, target] : connections) {
    target->close(Status(Code::kIOError, "the client is closed"));
  }
  connections.clear();
}

// --- Client

Client::Client(asio::any_io_executor executor, ClientOptions options)
    : impl_(std::make_shared<Impl>(std::move(executor), std::move(options))) {}

Client::~Client() {
  impl_->shutdown();
}

void Client::close() {
  impl_->shutdown();
}

void Client::start(std::function<void(Status)> done) {
  auto impl = impl_;
  impl->refresh([impl, done = std::move(done)](Status status) {
    // Completions never run inside the call that started them.
    asio::post(impl->executor, [done, status] { done(status); });
  });
}

void Client::run(Request request, Callback<std::vector<Reply>> done) {
  DELAYQ_CHECK(!request.commands.empty() && request.slot < kSlotCount);
  auto call = std::make_shared<Impl::Call>();
  call->request = std::move(request);
  call->done = std::move(done);
  call->deadline = SteadyClock::now() + impl_->options.request_timeout;
  // Never inside this call: a reply comes from the network, or a retry from a timer, and the
  // one path that completes at once (no node for the slot, deadline 0) goes through a post.
  asio::post(impl_->executor, [impl = impl_, call] { impl->dispatch(call); });
}

void Client::run(std::uint16_t slot, Command command, Callback<Reply> done) {
  Request request;
  request.slot = slot;
  request.commands.push_back(std::move(command));
  run(std::move(request), [done = std::move(done)](Result<std::vector<Reply>> replies) {
    if (!replies.is_ok()) {
      done(replies.status());
      return;
    }
    done(std::move(replies.value().front()));
  });
}

void Client::run_at(const std::string& address, Command command, Callback<Reply> done) {
  impl_->connection(address)->send(command, [done = std::move(done)](Outcome outcome) {
    if (!outcome.status.is_ok()) {
      done(outcome.status);
      return;
    }
    done(std::move(outcome.reply));
  });
}

void Client::refresh() {
  impl_->refresh(nullptr);
}

void Client::subscribe(std::string channel, std::function<void(std::string)> message,
                       std::function<void()> subscribed) {
  DELAYQ_CHECK(impl_->channel.empty());
  impl_->channel = std::move(channel);
  impl_->on_message = std::move(message);
  impl_->on_subscribed = std::move(subscribed);
  asio::post(impl_->executor, [impl = impl_] {
    impl->resubscribe();
    if (!std::exchange(impl->keeping_alive, true)) impl->keep_alive();
  });
}

void Client::subscribe_shards(std::vector<std::string> channels,
                              std::function<void(std::size_t, std::string)> message,
                              std::function<void(std::size_t)> subscribed) {
  DELAYQ_CHECK(impl_->shard_channels.empty());
  for (auto& name : channels) {
    impl_->shard_channel_index.emplace(name, impl_->shard_channels.size());
    const auto slot = key_slot(name);
    impl_->shard_channels.push_back({std::move(name), slot, nullptr});
  }
  impl_->on_shard_message = std::move(message);
  impl_->on_shard_subscribed = std::move(subscribed);
  asio::post(impl_->executor, [impl = impl_] {
    impl->place_shard_channels();
    if (!std::exchange(impl->keeping_alive, true)) impl->keep_alive();
  });
}

void Client::sync_shards(std::function<void(std::vector<bool>)> done) {
  asio::post(impl_->executor, [impl = impl_, done = std::move(done)]() mutable {
    if (impl->closed) return;
    impl->sync_next.push_back(std::move(done));
    if (!impl->syncing) impl->sync_round();
  });
}

std::string Client::shard_subscribe_error() const {
  return impl_->shard_subscribe_error;
}

std::size_t Client::shard_channels_subscribed() const {
  return static_cast<std::size_t>(
      std::count_if(impl_->shard_channels.begin(), impl_->shard_channels.end(),
                    [](const auto& entry) { return entry.subscribed; }));
}

bool Client::shard_channel_subscribed(std::size_t index) const {
  return index < impl_->shard_channels.size() && impl_->shard_channels[index].subscribed;
}

bool Client::unsettled(std::uint16_t slot) const {
  return impl_->slot_unsettled(slot);
}

bool Client::standalone() const noexcept {
  return impl_->is_standalone;
}

std::vector<std::string> Client::primaries() const {
  return impl_->nodes;
}

std::string Client::primary_of(std::uint16_t slot) const {
  const auto index = impl_->owner[slot % kSlotCount];
  return index == kNoNode ? std::string() : impl_->nodes[index];
}

const ClientStats& Client::stats() const noexcept {
  return impl_->stats;
}

}  // namespace delayq::redis
