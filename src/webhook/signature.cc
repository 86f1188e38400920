#include "webhook/signature.h"

#include <openssl/hmac.h>

namespace delayq::webhook {

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &size);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kHex[digest[i] >> 4U]);
    hex.push_back(kHex[digest[i] & 15U]);
  }
  return hex;
}

std::string signature(const std::vector<std::string>& secrets, std::int64_t now_unix_ms,
                      std::string_view body) {
  const std::string t = std::to_string(now_unix_ms);
  std::string message = t + ".";
  message.append(body);
  std::string out = "t=" + t;
  for (const std::string& secret : secrets) out += ",v1=" + hmac_sha256_hex(secret, message);
  return out;
}

}  // namespace delayq::webhook
