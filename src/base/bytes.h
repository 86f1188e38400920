// bytes.h — little-endian integers and length-prefixed strings, for the formats delayq writes to
// disk and to Redis (each drawn beside its own encoder: store/record.cc, schedule/codec.cc).
// Writing appends to a std::string; Reader takes values off the front of a view and says false
// when the bytes run out, leaving the caller to name what was corrupt.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/check.h"

namespace delayq::bytes {

// A value's bytes, least significant first: the byte loop compiles to a single store.
template <typename T>
std::array<char, sizeof(T)> le_bytes(T value) {
  using U = std::make_unsigned_t<T>;
  auto u = static_cast<U>(value);
  std::array<char, sizeof(T)> bytes{};
  for (char& byte : bytes) {
    byte = static_cast<char>(u & 0xFFU);
    u = static_cast<U>(u >> 8U);
  }
  return bytes;
}

// One append per value.
template <typename T>
void put_le(std::string& out, T value) {
  const auto bytes = le_bytes(value);
  out.append(bytes.data(), bytes.size());
}

// Writes values into bytes already sized for them, with no check per value of room to grow: an
// encoder on a hot path sizes its string once, fills it, and checks where the writer ended.
class Writer {
 public:
  explicit Writer(std::string& out) : at_(out.data()) {}

  template <typename T>
  void le(T value) {
    const auto bytes = le_bytes(value);
    std::memcpy(at_, bytes.data(), bytes.size());
    at_ += bytes.size();
  }
  // As put_string.
  void string(std::string_view text) {
    DELAYQ_CHECK(text.size() <= std::numeric_limits<std::uint16_t>::max());
    le(static_cast<std::uint16_t>(text.size()));
    std::memcpy(at_, text.data(), text.size());
    at_ += text.size();
  }
  [[nodiscard]] const char* at() const noexcept { return at_; }

 private:
  char* at_;
};

// A string of at most 65,535 bytes, after its u16 length.
inline void put_string(std::string& out, std::string_view text) {
  DELAYQ_CHECK(text.size() <= std::numeric_limits<std::uint16_t>::max());
  put_le(out, static_cast<std::uint16_t>(text.size()));
  out.append(text);
}

// A string of any length up to 4 GiB, after its u32 length.
inline void put_long_string(std::string& out, std::string_view text) {
  DELAYQ_CHECK(text.size() <= std::numeric_limits<std::uint32_t>::max());
  put_le(out, static_cast<std::uint32_t>(text.size()));
  out.append(text);
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  bool get(T& value) {
    using U = std::make_unsigned_t<T>;
    if (bytes_.size() < sizeof(T)) return false;
    U u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      u = static_cast<U>(
          u | static_cast<U>(static_cast<U>(static_cast<unsigned char>(bytes_[i])) << (8 * i)));
    }
    value = static_cast<T>(u);
    bytes_.remove_prefix(sizeof(T));
    return true;
  }
  bool get_string(std::string& text) { return get_sized<std::uint16_t>(text); }
  bool get_long_string(std::string& text) { return get_sized<std::uint32_t>(text); }
  [[nodiscard]] bool done() const noexcept { return bytes_.empty(); }
  [[nodiscard]] std::size_t left() const noexcept { return bytes_.size(); }

 private:
  template <typename Size>
  bool get_sized(std::string& text) {
    Size size = 0;
    if (!get(size) || bytes_.size() < size) return false;
    text.assign(bytes_.substr(0, size));
    bytes_.remove_prefix(size);
    return true;
  }

  std::string_view bytes_;
};

}  // namespace delayq::bytes
