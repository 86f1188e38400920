// signature.h — how push delivery signs a request (the Delayq-Signature header): an
// HMAC-SHA256 per secret over "<t>.<body>", so that a receiver holding either of two secrets
// (while rotating) can check it. Pure; OpenSSL's HMAC. Stated in docs/webhooks.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace delayq::webhook {

// "t=<unix ms>,v1=<hex HMAC-SHA256 of "<t>.<body>">" with one v1 per secret, in their order.
[[nodiscard]] std::string signature(const std::vector<std::string>& secrets,
                                    std::int64_t now_unix_ms, std::string_view body);
[[nodiscard]] std::string hmac_sha256_hex(std::string_view key, std::string_view message);

}  // namespace delayq::webhook
