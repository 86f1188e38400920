// log_damage.h — where a RocksDB write-ahead log first goes bad, and whether a sound record
// follows the damage: what tells a crash's torn or garbled last write (nothing sound after it,
// never acknowledged) from damage with synced, acknowledged writes behind it.
//
// RocksDB's log: 32 KiB blocks of physical records, each a masked CRC32C, a 16-bit length, a
// type byte (and a 32-bit log number for the recyclable types), then its bytes. A block ends
// with zero padding when fewer than 7 bytes are left in it, and a record split over blocks
// begins every block it continues in, so each block's start is a record's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "base/status.h"

namespace delayq::store {

struct LogDamage {
  std::filesystem::path file;  // the log holding the first bad record
  std::uint64_t offset = 0;    // where that record starts
  std::uint64_t size = 0;      // the log's size: offset..size is what a drop loses
  // A sound record follows: later in the bad record's block, at a later block's start, or in a
  // later log. Without one, the bad record is a torn or garbled tail.
  bool followed = false;
};

// The offset of the first record of `log` (one log file's bytes) that does not read back, if
// any. A header of zeros skips the rest of its block, as RocksDB's reader does.
std::optional<std::uint64_t> first_bad_record(std::string_view log);

// Whether a sound record starts anywhere after `offset` in `log` (see LogDamage::followed).
bool sound_record_after(std::string_view log, std::uint64_t offset);

// Reads the write-ahead logs (NNNNNN.log) of the RocksDB directory `dir` in order and returns
// the first bad record, or nullopt if every record reads back (the damage RocksDB found lies
// elsewhere). Errors: a log that cannot be read (kIOError).
Result<std::optional<LogDamage>> find_log_damage(const std::filesystem::path& dir);

}  // namespace delayq::store
