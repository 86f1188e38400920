// client.h — a Redis Cluster client on Asio: routes each request to the primary that serves its
// slot and follows the cluster when it moves.
// The topology (slot -> primary) comes from CLUSTER SLOTS, asked of a known node or a seed at
// start, every refresh_period, and whenever a reply says the map is stale. A request is one or
// more commands sent back to back on one pipelined connection to the node, optionally followed
// by a WAIT for the node's replicas (Request::replicas), which requests share. Replies that ask the
// client to go elsewhere or come back later are handled here and never reach the caller: MOVED
// (update the slot, resend at once), ASK (resend once to the node named, after ASKING), TRYAGAIN,
// CLUSTERDOWN, LOADING, MASTERDOWN and READONLY (wait 10 ms, doubling up to 320 ms, refresh the
// map, resend), a missing function (FUNCTION LOAD, resend). A connection's first call of a script
// is preceded by the library's FUNCTION LOAD, so that a fresh node has it before the call, not
// after the call fails. A connection that breaks before a command was written is replaced and the
// command resent; one that breaks after fails the request with kIOError: the command may have run
// (unless the request may be sent again: Request::send_again).
// All of this ends at the request's deadline (kTimedOut, saying what it last met). A single Redis
// without cluster support serves every slot. Threads: every call on the executor given; completions
// run there, never inside the call. Destroying the client drops the requests under way without
// completing them.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "redis/connection.h"
#include "redis/reply.h"

namespace delayq::redis {

template <typename T>
using Callback = std::function<void(Result<T>)>;

// Lua code run in Redis as a function (Redis 7's FCALL), loaded where a node does not have it.
// `source` defines `local function run(keys, args)`; it is loaded once per node as a library
// named after its SHA-1, so that its top level (every local function, every table) runs at the
// load and not at each call, as an EVALSHA script's would, and two versions never collide.
// run() is registered twice: as <name>, which Redis refuses to run while it is over its
// maxmemory (OOM), and as <name>_oom, flagged allow-oom, which it runs anyway: for calls that
// free memory or keep it level (a delete, a reserve), so that work goes on and frees room.
class Script {
 public:
  explicit Script(std::string source);
  // The library as FUNCTION LOAD takes it: the shebang naming it, source, the registrations.
  [[nodiscard]] const std::string& library() const noexcept { return library_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }  // "delayq_<sha>"
  // "FCALL <name> <keys.size()> <keys...> <args...>"; FCALL <name>_oom with `over_memory`.
  [[nodiscard]] Command call(const std::vector<std::string_view>& keys,
                             const std::vector<std::string_view>& args,
                             bool over_memory = false) const;
  // The same as registered with allow-oom and allow-cross-slot-keys (<name>_slots): the script
  // may touch keys of any slot the node serves, beside `keys` (which route the call and must
  // share a slot). Keys of a slot it does not serve are an error for the script to catch.
  [[nodiscard]] Command call_across_slots(const std::vector<std::string_view>& keys,
                                          const std::vector<std::string_view>& args) const;
  // The same begun: "FCALL <name>[_oom] <keys>", with room for `bytes` more (the
  // Command::encoded_size() of each argument to come); the caller adds the keys, then the
  // arguments.
  [[nodiscard]] Command begin(std::size_t keys, std::size_t bytes, bool over_memory = false) const;
  // Whether `error` says the function is not loaded on the node that answered.
  [[nodiscard]] static bool missing(const Reply& error);

 private:
  [[nodiscard]] static Command begin_as(std::string_view function, std::size_t keys,
                                        std::size_t bytes);
  [[nodiscard]] static Command call_as(std::string_view function,
                                       const std::vector<std::string_view>& keys,
                                       const std::vector<std::string_view>& args);
  std::string library_;
  std::string name_;
};

struct ClientOptions {
  // Where to ask for the topology first: "host:port" (an IPv6 address in brackets:
  // "[::1]:7000"). Any node of the cluster will do. No default: at least one.
  std::vector<std::string> seeds;
  ConnectionOptions connection;
  // How long one request may spend being redirected, retried and reconnected before it fails
  // with kTimedOut. It bounds how long a failover can hold a request. Default: 10 s.
  Millis request_timeout{10000};
  // How often the topology is asked for when nothing prompts it. Default: 10 s.
  Millis refresh_period{10000};
};

struct Request {
  std::uint16_t slot = 0;          // the slot its keys hash to (key_slot())
  std::vector<Command> commands;   // at least one; the first decides routing and retries
  const Script* script = nullptr;  // set when commands[0] is script->call(...)
  // When above 0: completes only once `replicas` replicas of the node have the commands, or
  // `replica_timeout` has passed (WAIT replicas timeout), with WAIT's answer (how many did)
  // after the commands' replies. Such requests go on a second connection to the node, since
  // Redis reads nothing more from a connection whose WAIT blocks: the others are not held up.
  // They share WAITs: one at a time per connection, covering every request written before it,
  // and when one comes back short (fewer replicas in time: a replica stopped answering), the
  // requests written after it are answered with it, not made to wait out a timeout each.
  int replicas = 0;
  Millis replica_timeout{1000};
  // The commands may run twice (they change nothing, or their script answers a repeat as it
  // answered the first: jobs.lua's numbered calls): one whose connection broke after it was
  // written is sent again, like one not written yet, while a reply timeout still fits before
  // the deadline; without this it fails with kIOError (it may have run).
  bool send_again = false;
};

// How often the client met each redirection and retry, since it was made (tests and metrics).
struct ClientStats {
  std::uint64_t moved = 0;
  std::uint64_t ask = 0;
  std::uint64_t try_again = 0;
  std::uint64_t cluster_down = 0;
  std::uint64_t loading = 0;
  std::uint64_t read_only = 0;
  std::uint64_t function_loads = 0;       // a node lacked the function: loaded, then sent again
  std::uint64_t library_loads_sent = 0;   // FUNCTION LOADs ahead of a connection's first call
  std::uint64_t reconnects = 0;           // connections replaced after they broke
  std::uint64_t sent_again = 0;           // requests sent again after their answer was lost
  std::uint64_t refreshes = 0;            // topologies read
  std::uint64_t waits = 0;                // WAITs sent (Request::replicas)
  std::uint64_t shard_subscriptions = 0;  // shard channels subscribed (subscribe_shards), again too
  std::uint64_t shard_subscribe_errors = 0;  // SSUBSCRIBEs answered with an error
  // Requests and sync_shards() PINGs that Redis answered (an error reply too): a count that
  // stops moving while calls are under way says Redis has gone silent.
  std::uint64_t answered = 0;
};

class Client {
 public:
  Client(boost::asio::any_io_executor executor, ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Reads the topology; completes with ok, or with why no seed could give it.
  void start(std::function<void(Status)> done);
  // Closes every connection and drops every request under way without completing it, as the
  // destructor does; for an owner whose handlers may keep the client alive past its use.
  void close();

  // Runs the request's commands on the primary of its slot; completes with one reply each.
  // The first command's redirections and retries are handled as the header says, by sending
  // the whole request again; later commands should be ones that cannot be redirected, as their
  // error replies come back as they are. A Redis error reply that is not a redirection
  // is a reply, not a failure. Errors: kIOError (a connection broke after the request was sent:
  // it may have run), kTimedOut (the deadline passed).
  void run(Request request, Callback<std::vector<Reply>> done);
  // One command for `slot`.
  void run(std::uint16_t slot, Command command, Callback<Reply> done);
  // One command to the node at `address` ("host:port", as primaries() names it), with no
  // redirection followed: per-node questions (CONFIG GET, INFO).
  void run_at(const std::string& address, Command command, Callback<Reply> done);

  // Asks for the topology now (requests meanwhile use the one they have).
  void refresh();

  // Subscribes to `channel` (classic pub/sub, which a cluster broadcasts to every node) on a
  // connection of its own to a primary. `message` runs for each message; `subscribed` each
  // time the subscription is (re)established, after a break during which messages were lost.
  // A broken subscription is re-made every 200 ms until it holds; a PING every 5 s finds one
  // whose node went silent. One subscription per client.
  void subscribe(std::string channel, std::function<void(std::string)> message,
                 std::function<void()> subscribed);
  // Subscribes to shard channels (sharded pub/sub, Redis 7: a message sent with SPUBLISH goes
  // only to the nodes of its channel's slot, where a classic PUBLISH crosses the cluster bus to
  // every node). Each channel is subscribed on the primary that serves its slot, one connection
  // per primary. `message` runs with the channel's index in `channels` and the message;
  // `subscribed` with its index each time its subscription is (re)made, after a break during
  // which its messages were lost. A channel whose slot moves (its node says sunsubscribe, a
  // refreshed map says so, SSUBSCRIBE answers MOVED) or whose connection breaks is subscribed
  // again where the map says, every 200 ms until it holds; a PING every 5 s on each connection
  // finds a silent node. Once per client.
  void subscribe_shards(std::vector<std::string> channels,
                        std::function<void(std::size_t, std::string)> message,
                        std::function<void(std::size_t)> subscribed);
  // Completes once every message the shard channels' nodes sent before this call has come (a
  // PING on each connection that carries a subscribed channel: a node answers it after what it
  // wrote there before), with, for each channel by index, whether it stayed subscribed
  // throughout (subscribed at the call, its connection answered, not subscribed again since, on
  // the node the map names for its slot, and the slot not met migrating or failing over by a
  // request in the last 10 s).
  // So whoever heard no message on a channel that held knows that nothing was published there
  // before the call. Calls that come while a round is under way share the next round.
  void sync_shards(std::function<void(std::vector<bool>)> done);
  // The error the last refused SSUBSCRIBE got, until one succeeds ("" if none): a refusal that
  // lasts (an ACL without the channels, a proxy without sharded pub/sub) is for the owner to
  // report. (Such refusals are tried again ever more slowly, up to every 5 s.)
  [[nodiscard]] std::string shard_subscribe_error() const;
  // How many of the channels given to subscribe_shards() are subscribed now (their SSUBSCRIBE
  // answered, on the node it went to).
  [[nodiscard]] std::size_t shard_channels_subscribed() const;
  // Whether channel `index` of subscribe_shards() is subscribed now.
  [[nodiscard]] bool shard_channel_subscribed(std::size_t index) const;

  // Whether a request for `slot` met a migration or a failover (ASK, TRYAGAIN, MOVED, CLUSTERDOWN,
  // LOADING, MASTERDOWN, READONLY) in the last 10 s.
  [[nodiscard]] bool unsettled(std::uint16_t slot) const;
  // Whether the server is a single Redis without cluster support.
  [[nodiscard]] bool standalone() const noexcept;
  // The primaries of the latest topology, "host:port". (Not their replicas: CLUSTER SLOTS leaves
  // out a replica that has not replicated a byte yet; INFO replication on each primary tells.)
  [[nodiscard]] std::vector<std::string> primaries() const;
  // The primary that serves `slot` as far as the client knows ("" if none).
  [[nodiscard]] std::string primary_of(std::uint16_t slot) const;
  [[nodiscard]] const ClientStats& stats() const noexcept;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace delayq::redis
