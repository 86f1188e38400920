#include "webhook/rules.h"

#include <gtest/gtest.h>

#include "support/seed.h"
#include "webhook/signature.h"

namespace delayq::webhook {
namespace {

TEST(ParseUrl, TakesSchemeHostPortAndTarget) {
  auto url = parse_url("https://hooks.example.com/orders/rate?x=1");
  ASSERT_TRUE(url.is_ok()) << url.status().message();
  EXPECT_TRUE(url.value().tls);
  EXPECT_EQ(url.value().host, "hooks.example.com");
  EXPECT_EQ(url.value().port, "443");
  EXPECT_EQ(url.value().target, "/orders/rate?x=1");
  EXPECT_EQ(url.value().origin(), "https://hooks.example.com:443");

  url = parse_url("http://127.0.0.1:8081");
  ASSERT_TRUE(url.is_ok());
  EXPECT_FALSE(url.value().tls);
  EXPECT_EQ(url.value().port, "8081");
  EXPECT_EQ(url.value().target, "/");

  url = parse_url("HTTPS://Hooks.example.com");  // the scheme ignores case
  ASSERT_TRUE(url.is_ok()) << url.status().to_string();
  EXPECT_TRUE(url.value().tls);
  url = parse_url("http://[::1]:9000?q");
  ASSERT_TRUE(url.is_ok());
  EXPECT_EQ(url.value().host, "::1");
  EXPECT_EQ(url.value().target, "/?q");
  EXPECT_EQ(url.value().origin(), "http://[::1]:9000");
  // Names with '_' and a final dot, and numeric labels (a name to resolve, or an IPv4 address).
  for (const char* good : {"http://my_host.internal./x", "http://a-b.c:1/", "http://1.2.3.4.5/"}) {
    EXPECT_TRUE(parse_url(good).is_ok()) << good;
  }
}

TEST(ParseUrl, RefusesWhatItCannotSend) {
  for (const char* bad :
       {"ftp://a/b",      "http://",        "http://:80/",         "http://a:0/", "http://a:65536/",
        "http://a:8x/",   "http://user@a/", "http://a/#frag",      "http://a/ b", "http://[::1/",
        "localhost:8080", "http://[zz]/",   "http://[127.0.0.1]/", "http://h:/",  "http://[::1]:/",
        "http://h\\x/",   "http://.../",    "http://-h/",          "http://h-/",  "http://a..b/",
        "http://h%41/"}) {
    const auto url = parse_url(bad);
    EXPECT_EQ(url.status().code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_EQ(parse_url("http://a/" + std::string(2048, 'x')).status().code(),
            Code::kInvalidArgument);
  // A port of many digits is out of range, not "not a number".
  EXPECT_NE(parse_url("http://a:99999999999999999999/").status().message().find("out of 1-65535"),
            std::string::npos);
}

TEST(Backoff, DrawsBetweenHalfAndAllOfTheCappedExponential) {
  std::mt19937_64 random(testing::test_seed());
  const Backoff backoff{Millis{1000}, Millis{60'000}, 2};
  for (std::uint32_t attempt = 1; attempt <= 12; ++attempt) {
    const double full = std::min(60'000.0, 1000.0 * std::pow(2.0, attempt - 1));
    for (int draw = 0; draw < 200; ++draw) {
      const Millis wait = backoff_delay(backoff, attempt, random);
      EXPECT_GE(static_cast<double>(wait.count()), full / 2 - 1) << "attempt " << attempt;
      EXPECT_LE(static_cast<double>(wait.count()), full + 1) << "attempt " << attempt;
    }
  }
}

TEST(RetryAfter, SecondsOrAnHttpDate) {
  EXPECT_EQ(retry_after("120", 0), Millis{120'000});
  EXPECT_EQ(retry_after(" 0 ", 0), Millis{0});
  // Wed, 25 Nov 2026 18:00:00 GMT is 1795629600 s.
  EXPECT_EQ(retry_after("Wed, 25 Nov 2026 18:00:00 GMT", 1'795'629'590'000), Millis{10'000});
  EXPECT_EQ(retry_after("Wed, 25 Nov 2026 18:00:00 GMT", 1'795'629'700'000), Millis{0});
  EXPECT_EQ(retry_after("soon", 0), std::nullopt);
  EXPECT_EQ(retry_after("", 0), std::nullopt);
  EXPECT_EQ(retry_after("-5", 0), std::nullopt);
}

TEST(Signature, IsHmacSha256OfTimeDotBodyPerSecret) {
  // RFC 4231, test case 2.
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::string one = hmac_sha256_hex("k1", "1700000000000.hello");
  const std::string two = hmac_sha256_hex("k2", "1700000000000.hello");
  EXPECT_NE(one, two);
  EXPECT_EQ(signature({"k1", "k2"}, 1'700'000'000'000, "hello"),
            "t=1700000000000,v1=" + one + ",v1=" + two);
  EXPECT_EQ(signature({}, 5, "x"), "t=5");
}

TEST(Rfc3339, UtcWithMilliseconds) {
  EXPECT_EQ(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339_ms(1'795'629'600'123), "2026-11-25T18:00:00.123Z");
  EXPECT_EQ(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
}

}  // namespace
}  // namespace delayq::webhook
