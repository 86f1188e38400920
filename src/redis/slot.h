// slot.h — which of Redis Cluster's 16384 hash slots a key lives in.
// slot = CRC16-XMODEM(key) mod 16384, over the key's hash tag when it has one: the bytes between
// its first '{' and the first '}' after it, if at least one byte lies between them. Keys that
// share a tag share a slot, which is what lets one script touch several keys in a cluster.
// Pure functions; the CRC is table-driven (one lookup per byte). Spec:
// https://redis.io/docs/reference/cluster-spec/#hash-tags
#pragma once

#include <cstdint>
#include <string_view>

namespace delayq::redis {

inline constexpr std::uint16_t kSlotCount = 16384;

// CRC16 with polynomial 0x1021 and initial value 0 (XMODEM), as Redis Cluster computes it.
[[nodiscard]] std::uint16_t crc16(std::string_view bytes) noexcept;

// The part of `key` that is hashed: its hash tag, or the whole key.
[[nodiscard]] std::string_view hash_tag(std::string_view key) noexcept;

// The slot of `key`, in [0, kSlotCount).
[[nodiscard]] std::uint16_t key_slot(std::string_view key) noexcept;

}  // namespace delayq::redis
