// layout.h — where the Redis broker keeps things, and how it reads what jobs.lua writes.
// A job lives in one of `shards` logical shards (fixed at a cluster's first start, kept in
// dq:meta); shard s has a fixed set of keys, all starting with "dq:{s}", so they share one hash
// slot and every change is one script on one node, which names them all. The shard is chosen by the
// job's key (tube + key), else by its group (tube + group), else in turn; a job id is seq * shards
// + shard, so the id names its shard. The keys and the record layout are drawn in jobs.lua;
// docs/redis-mode.md has the whole picture and the bytes per job.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/job.h"
#include "base/status.h"
#include "redis/reply.h"

namespace delayq::broker::redis {

// The base of shard s's keys: "<prefix>:{s}" ("dq:{s}" by default).
[[nodiscard]] std::string shard_base(std::string_view prefix, std::uint32_t shard);
// Shard s's channel, "<prefix>:{s}:events", in the shard's slot: where its calls announce, with
// SPUBLISH, a better ready job ('r') or an earlier timer ('t'). (jobs.lua names it the same way.)
[[nodiscard]] std::string shard_channel(std::string_view prefix, std::uint32_t shard);
// Every key of shard s, in the order jobs.lua takes them (its KEYS): a script names them all,
// so that Redis knows every key it may touch.
[[nodiscard]] std::vector<std::string> shard_keys(std::string_view prefix, std::uint32_t shard);
// The hash slot of shard s's keys and channel (their hash tag is the shard's number).
[[nodiscard]] std::uint16_t shard_slot(std::uint32_t shard);
inline constexpr std::size_t kShardKeyCount = 23;
// The keys a call on a shard names, as a command's arguments: shard_keys(), then, for a call
// that is numbered, the node's kept answers in the shard ("<prefix>:{s}:ans:<node>"). Encoded
// once per width of the shard's number, as a template in which only the number is written for
// each call: no string is made for a key. Not thread-safe.
class ShardKeys {
 public:
  ShardKeys(std::string_view prefix, std::string_view node);
  // The bytes add() adds for `shard`.
  [[nodiscard]] std::size_t size(std::uint32_t shard, bool answers);
  // Adds shard s's keys (and the answers' key when `answers`) to `command`.
  void add(std::uint32_t shard, bool answers, delayq::redis::Command& command);

 private:
  struct Template {
    std::string encoded;                 // every key, the shard's number written as zeros
    std::size_t keys_end = 0;            // where the answers' key starts
    std::vector<std::size_t> number_at;  // where each key's number is
  };
  const Template& of_width(std::size_t digits);
  std::string prefix_;
  std::string node_;
  std::vector<Template> templates_;  // by the width of the shard's number, less one
};
// The shard a job with this key (or, without a key, this group) lives in.
[[nodiscard]] std::uint32_t shard_of_name(std::string_view tube, std::string_view name,
                                          std::uint32_t shards);
[[nodiscard]] inline std::uint32_t shard_of_id(JobId id, std::uint32_t shards) {
  return static_cast<std::uint32_t>(id % shards);
}

// Keys outside the shards, each in a slot of its own, and the channel where nodes announce what
// the others must react to (tube settings, leases; before the shard channels, what scripts
// announce, which nodes still take from there). A prefix of letters, digits, '_'
// and '-' lets several delayq deployments share one Redis.
struct Names {
  explicit Names(const std::string& given)
      : prefix(given),
        meta(given + ":meta"),
        nodes(given + ":nodes"),
        webhooks(given + ":webhooks"),
        pauses(given + ":pauses"),
        max_attempts(given + ":max-attempts"),
        waiting(given + ":waiting"),
        schedules(given + ":schedules"),
        flows(given + ":flows"),
        events(given + ":events") {}
  std::string prefix;
  std::string meta;          // hash: shards
  std::string nodes;         // zset: node -> lease expiry (ms, Redis's clock)
  std::string webhooks;      // hash: tube -> webhook
  std::string pauses;        // hash: tube -> "<until unix ms> <seconds> <pauses so far>"
  std::string max_attempts;  // hash: tube -> n
  std::string waiting;       // hash: node -> reserves waiting there (stats' current-waiting)
  std::string schedules;     // zset, score 0: every schedule's name (listing by name)
  std::string flows;         // hash: tube -> flow control settings (store::encode_flow)
  std::string events;        // channel
};
// Letters, digits, '_' and '-', 1 to 64 of them.
[[nodiscard]] Status check_prefix(std::string_view prefix);

// The layout of what jobs.lua stores, kept as "layout" in dq:meta and as each record's first
// object; docs/redis-mode.md draws it. Layout 1 (before the mark) is upgraded at a node's start.
inline constexpr std::uint8_t kLayout = 2;

// A record as jobs.lua packs it, with the body that follows it.
struct Record {
  JobView view;
  std::string body;
  std::string holder;  // the session holding it, when reserved
};
// Errors: kCorruption when the bytes are not a record.
[[nodiscard]] Result<Record> decode_record(JobId id, std::string_view bytes);

// A new job's record after its times, as a put sends it for jobs.lua to put behind the part that
// needs Redis's clock: the TTR, five zero counters, the tube, key and group, no holder, and the
// body.
[[nodiscard]] std::string new_record_tail(std::uint32_t ttr_seconds, std::string_view tube,
                                          std::string_view key, std::string_view group,
                                          std::string_view body);

// What a node knows of a tube's best ready job in one shard (the head of the tube's part of the
// shard's ready set), so that a reserve tries the shard holding the best job first: none, may
// hold one (not known which), or the best one's priority, creation time (whole milliseconds)
// and id. Jobs of one priority are taken oldest first: within a shard ids follow the puts, but
// across shards only their times do. jobs.lua writes a head as "priority:created:id", "" for
// none.
struct Head {
  enum class Kind : std::uint8_t { kNone, kUnknown, kKnown };
  Kind kind = Kind::kUnknown;
  std::uint32_t priority = 0;
  std::int64_t created_unix_ms = 0;
  JobId id = 0;

  // "" is none; "priority:created:id" known; anything else unknown (a message of an older node
  // says only that the tube has ready jobs).
  [[nodiscard]] static Head parse(std::string_view text);
  [[nodiscard]] std::string text() const;  // as parse() reads it
  [[nodiscard]] bool known() const { return kind == Kind::kKnown; }
  // Reserved before `other`: both known, the smaller (priority, created, id).
  [[nodiscard]] bool before(const Head& other) const;
};

// A message: `told` became the shard's best job of the tube. Messages announce only better
// jobs, so it stands, unless the node already knows of a better one (which a reserve elsewhere
// may have taken: the reserve that tries it learns so from the shard's answer).
[[nodiscard]] Head after_message(const Head& known, const Head& told);
// A shard's answer to a call of this node (reserve, probe): the head as the call left it. It
// replaces what is known, unless a message came while the call was on its way (`told_since`):
// then the better of the two stands, and an unknown head stays unknown.
[[nodiscard]] Head after_answer(const Head& known, const Head& told, bool told_since);

// The turns nodes take at a job another node made ready (its head, in the shard): `nodes` in
// the order of a hash of the job and each name, so that each job starts its round at another
// node and every node computes the same order. The node whose turn comes after `after` (the
// first: nullptr), leaving out `from` (the node that made it ready); nullopt once all had theirs.
[[nodiscard]] std::optional<std::string> next_turn(const std::set<std::string>& nodes,
                                                   std::uint32_t shard, std::string_view from,
                                                   std::string_view head, const std::string* after);

}  // namespace delayq::broker::redis
