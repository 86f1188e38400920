#include "store/log_damage.h"

#include <algorithm>
#include <boost/crc.hpp>
#include <cstddef>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace delayq::store {

namespace {

constexpr std::uint64_t kBlock = 32768;
constexpr std::uint64_t kHeader = 7;             // checksum, length, type
constexpr std::uint64_t kRecyclableHeader = 11;  // and the log's number
// Full, first, middle, last; their recyclable forms (5 to 8); the WAL's compression type (9).
constexpr unsigned kLastType = 9;

using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

// RocksDB stores a CRC masked, so that a CRC of bytes holding CRCs stays well spread.
std::uint32_t masked(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

std::uint64_t block_end(std::uint64_t at) {
  return (at / kBlock + 1) * kBlock;
}

// The size of the sound record at `at` (header and bytes), or 0 if none is there.
std::uint64_t sound_record_at(std::string_view log, std::uint64_t at) {
  const std::uint64_t end = std::min<std::uint64_t>(block_end(at), log.size());
  if (at >= end || end - at < kHeader) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(log.data() + at);
  const unsigned type = p[6];
  if (type == 0 || type > kLastType) return 0;
  const std::uint64_t header = type >= 5 && type <= 8 ? kRecyclableHeader : kHeader;
  const std::uint64_t length = p[4] | (std::uint64_t{p[5]} << 8);
  if (header + length > end - at) return 0;
  Crc32c crc;
  crc.process_bytes(p + 6, header - 6);  // the type, and the log's number if there is one
  crc.process_bytes(p + header, length);
  const std::uint32_t stored =
      p[0] | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
  return masked(crc.checksum()) == stored ? header + length : 0;
}

bool zero_header(std::string_view log, std::uint64_t at) {
  return log.size() - at >= kHeader &&
         std::all_of(log.begin() + static_cast<std::ptrdiff_t>(at),
                     log.begin() + static_cast<std::ptrdiff_t>(at + kHeader),
                     [](char c) { return c == '\0'; });
}

}  // namespace

std::optional<std::uint64_t> first_bad_record(std::string_view log) {
  std::uint64_t at = 0;
  while (at < log.size()) {
    if (block_end(at) - at < kHeader || zero_header(log, at)) {  // padding to the block's end
      at = block_end(at);
      continue;
    }
    const std::uint64_t size = sound_record_at(log, at);
    if (size == 0) return at;
    at += size;
  }
  return std::nullopt;
}

bool sound_record_after(std::string_view log, std::uint64_t offset) {
  // Anywhere in the rest of the bad record's block (its length may be what is damaged), then
  // at the start of every later block.
  for (std::uint64_t at = offset + 1; at < std::min<std::uint64_t>(block_end(offset), log.size());
       ++at) {
    if (sound_record_at(log, at) != 0) return true;
  }
  for (std::uint64_t at = block_end(offset); at < log.size(); at += kBlock) {
    if (sound_record_at(log, at) != 0) return true;
  }
  return false;
}

Result<std::optional<LogDamage>> find_log_damage(const std::filesystem::path& dir) {
  std::vector<std::pair<std::uint64_t, std::filesystem::path>> logs;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 4 || !name.ends_with(".log")) continue;
    const std::string digits = name.substr(0, name.size() - 4);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    logs.emplace_back(std::stoull(digits), entry.path());
  }
  if (error) return Status(Code::kIOError, "cannot list " + dir.string() + ": " + error.message());
  std::sort(logs.begin(), logs.end());
  std::optional<LogDamage> damage;
  for (const auto& [number, path] : logs) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return Status(Code::kIOError, "cannot read " + path.string());
    if (damage) {  // a later log: any sound record in it follows the damage
      if (sound_record_at(bytes, 0) != 0 || sound_record_after(bytes, 0)) {
        damage->followed = true;
        break;
      }
      continue;
    }
    if (const auto bad = first_bad_record(bytes)) {
      damage = LogDamage{.file = path,
                         .offset = *bad,
                         .size = bytes.size(),
                         .followed = sound_record_after(bytes, *bad)};
      if (damage->followed) break;
    }
  }
  return damage;
}

}  // namespace delayq::store
