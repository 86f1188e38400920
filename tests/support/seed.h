// seed.h — the seed of a randomised test, in one place: DELAYQ_SEED=<n> replays a run, otherwise
// each run draws a fresh one. Every test that draws one prints it with the line that replays it,
// so a failure seen once in CI can be run again. Header-only; std only.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <string>

namespace delayq::testing {

// DELAYQ_SEED, if set to a number.
inline std::optional<std::uint64_t> seed_from_env() {
  const char* text = std::getenv("DELAYQ_SEED");
  if (text == nullptr || *text == '\0') return std::nullopt;
  return std::strtoull(text, nullptr, 10);
}

// DELAYQ_SEED if set, else a fresh random seed; printed either way.
inline std::uint64_t test_seed() {
  std::uint64_t seed = 0;
  if (const auto fixed = seed_from_env()) {
    seed = *fixed;
  } else {
    std::random_device random;
    seed = std::uint64_t{random()} << 32 | random();
  }
  std::cout << "seed " << seed << " (replay with DELAYQ_SEED=" << seed << ")" << std::endl;
  return seed;
}

}  // namespace delayq::testing
