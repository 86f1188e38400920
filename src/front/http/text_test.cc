// text_test.cc — the HTTP API's text formats: durations, RFC 3339 instants (against values
// computed independently), base64 round trips and UTF-8 validation.
#include "front/http/text.h"

#include <gtest/gtest.h>

#include <random>

namespace delayq::front::http {
namespace {

TEST(Duration, UnitsAndPlainMilliseconds) {
  EXPECT_EQ(parse_duration("48h").value(), Millis{48LL * 3600 * 1000});
  EXPECT_EQ(parse_duration("10m").value(), Millis{600000});
  EXPECT_EQ(parse_duration("1h30m").value(), Millis{5400000});
  EXPECT_EQ(parse_duration("2d3h4m5s6ms").value(),
            Millis{((2LL * 24 + 3) * 60 + 4) * 60000 + 5006});
  EXPECT_EQ(parse_duration("1500ms").value(), Millis{1500});
  EXPECT_EQ(parse_duration("1.5s").value(), Millis{1500});
  EXPECT_EQ(parse_duration("0.0001s").value(), Millis{1});  // rounded up: never early
  EXPECT_EQ(parse_duration("250").value(), Millis{250});
  EXPECT_EQ(parse_duration("0").value(), Millis{0});
  EXPECT_EQ(parse_duration("0s").value(), Millis{0});
}

TEST(Duration, FormatsInWholeUnitsThatParseBack) {
  EXPECT_EQ(format_duration(Millis{0}), "0ms");
  EXPECT_EQ(format_duration(Millis{3'600'000}), "1h");
  EXPECT_EQ(format_duration(Millis{90'000}), "1m30s");
  EXPECT_EQ(format_duration(Millis{1500}), "1s500ms");
  EXPECT_EQ(format_duration(Millis{86'400'000 + 1}), "1d1ms");
  for (const std::int64_t ms : {1LL, 999LL, 1000LL, 61'001LL, 90'061'001LL, 3'153'600'000'000LL}) {
    EXPECT_EQ(parse_duration(format_duration(Millis{ms})).value(), Millis{ms}) << ms;
  }
}

TEST(Duration, RefusesWhatIsNotOne) {
  for (const char* bad :
       {"", "h", "10", "10x", "5m1h", "1h1h", "-5s", "1.5.5s", "s10", " 10s", "10s ", "1e3ms",
        ".5s", "1.s", "2h1.m", "99999999999999999999", "101000d"}) {
    if (std::string_view(bad) == "10") continue;  // digits alone are milliseconds
    const auto parsed = parse_duration(bad);
    EXPECT_FALSE(parsed.is_ok()) << "'" << bad << "'";
    if (!parsed.is_ok()) {
      EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
      EXPECT_NE(parsed.status().message().find("bad duration"), std::string::npos);
    }
  }
}

TEST(Instant, ParsesRfc3339) {
  EXPECT_EQ(parse_instant("1970-01-01T00:00:00Z").value(), 0);
  // date -u -d 2026-11-24T10:00:00Z +%s = 1795514400
  EXPECT_EQ(parse_instant("2026-11-24T10:00:00Z").value(), 1795514400000LL);
  EXPECT_EQ(parse_instant("2026-11-24T12:00:00+02:00").value(), 1795514400000LL);
  EXPECT_EQ(parse_instant("2026-11-24T09:30:00-00:30").value(), 1795514400000LL);
  EXPECT_EQ(parse_instant("2026-11-24 10:00:00.250Z").value(), 1795514400250LL);
  EXPECT_EQ(parse_instant("2026-11-24T10:00:00.2501Z").value(), 1795514400251LL);  // rounded up
  EXPECT_EQ(parse_instant("2026-11-24T10:00:00.2500000Z").value(), 1795514400250LL);
  // Leap day; date -u -d 2024-02-29T23:59:59Z +%s = 1709251199
  EXPECT_EQ(parse_instant("2024-02-29T23:59:59Z").value(), 1709251199000LL);
}

TEST(Instant, RefusesWhatIsNotOne) {
  for (const char* bad :
       {"", "2026-11-24", "2026-11-24T10:00:00", "2026-13-01T00:00:00Z", "2025-02-29T00:00:00Z",
        "2026-11-24T24:00:00Z", "2026-11-24T10:60:00Z", "1969-12-31T23:59:59Z",
        "2026-11-24T10:00:00.Z", "2026-11-24T10:00:00+2:00", "2026-11-24T10:00:00Zjunk", "tomorrow",
        "1970-01-01T00:00:00+01:00"}) {
    const auto parsed = parse_instant(bad);
    EXPECT_FALSE(parsed.is_ok()) << "'" << bad << "'";
  }
  EXPECT_NE(parse_instant("1969-12-31T23:59:59Z").status().message().find(": before 1970 ("),
            std::string::npos);
}

TEST(Instant, FormatsAndParsesBack) {
  EXPECT_EQ(format_instant(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_instant(1795514400250LL), "2026-11-24T10:00:00.250Z");
  std::mt19937_64 random(7);
  for (int i = 0; i < 10000; ++i) {
    const auto ms = static_cast<std::int64_t>(random() % 253402300799999ULL);
    EXPECT_EQ(parse_instant(format_instant(ms)).value(), ms) << ms;
  }
}

TEST(Base64, KnownVectorsAndRoundTrips) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_decode("Zm9vYg==").value(), "foob");
  std::mt19937 random(3);
  for (int size = 0; size < 300; ++size) {
    std::string bytes(static_cast<std::size_t>(size), '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    EXPECT_EQ(base64_decode(base64_encode(bytes)).value(), bytes);
  }
  for (const char* bad : {"Zg=", "Z===", "Zm9v!A==", "Zg==Zg==", "Zm 9v", "=Zg="}) {
    EXPECT_FALSE(base64_decode(bad).is_ok()) << bad;
  }
}

TEST(Utf8, ValidAndInvalid) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain ascii"));
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(valid_utf8("\xC3"));              // cut short
  EXPECT_FALSE(valid_utf8("\xE2\x82"));          // cut short
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // beyond U+10FFFF
  EXPECT_FALSE(valid_utf8("\xFF"));
  EXPECT_FALSE(valid_utf8(std::string_view("a\x80", 2)));
}

}  // namespace
}  // namespace delayq::front::http
