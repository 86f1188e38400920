// check.h — always-on checks for programmers' mistakes.
// DELAYQ_CHECK(cond) aborts with file, line and the failed condition when cond is false, in every
// build type: a broken invariant in a durable job server must stop it, not corrupt it. Use it for
// bugs in the caller (double schedule, id out of range), never for bad input from the network or
// the disk; those are reported as errors.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace delayq::base {

[[noreturn]] inline void check_failed(const char* file, int line, const char* condition) noexcept {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace delayq::base

#define DELAYQ_CHECK(condition)                                     \
  do {                                                              \
    if (!(condition)) [[unlikely]]                                  \
      ::delayq::base::check_failed(__FILE__, __LINE__, #condition); \
  } while (false)
