// record_test.cc — the job record codec, the job keys and WriteSet.
// Every damaged record must come back as a Status (never a crash, never a wrong record):
// each truncation of a valid record, a trailing byte, an unknown state and a foreign version.
#include "store/record.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace delayq::store {
namespace {

using namespace std::string_literals;

constexpr std::uint32_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();
constexpr std::int64_t kMinI64 = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();

// A string of `size` bytes that uses every byte value, NUL and 0xFF included.
std::string binary_bytes(std::size_t size, unsigned seed) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 37U + seed) & 0xFFU);
  return out;
}

JobRecord full_record() {
  JobRecord record;
  record.id = 42;
  record.tube = std::string(300, 't');
  record.priority = kMaxU32;
  record.state = JobState::kBuried;
  record.due_unix_ms = -1'234'567'890'123;
  record.created_unix_ms = kMaxI64;
  record.delay_ms = kMinI64;
  record.ttr_seconds = kMaxU32;
  record.counters = {kMaxU32, kMaxU32 - 1, kMaxU32 - 2, kMaxU32 - 3, kMaxU32 - 4};
  record.key = binary_bytes(400, 1);
  record.group = std::string(250, 'g') + std::string(1, '\0') + "x";
  return record;
}

JobRecord small_record() {
  JobRecord record;
  record.id = 7;
  record.tube = "default";
  record.priority = 1024;
  record.state = JobState::kDelayed;
  record.due_unix_ms = 1'700'000'000'000;
  record.created_unix_ms = 1'699'999'990'000;
  record.delay_ms = 10'000;
  record.ttr_seconds = 60;
  record.key = "k";
  record.group = "g";
  return record;
}

void expect_round_trip(const JobRecord& record) {
  const std::string bytes = encode_record(record);
  auto decoded = decode_record(record.id, bytes);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded.value(), record);
}

TEST(RecordTest, RoundTripsTheFlagsAndReadsRecordsWithoutThem) {
  JobRecord record = full_record();
  const std::string plain = encode_record(record);
  record.attached = true;
  const std::string flagged = encode_record(record);
  EXPECT_EQ(flagged.size(), plain.size() + 1);
  expect_round_trip(record);
  record.due_inside = true;
  EXPECT_EQ(encode_record(record).size(), plain.size() + 1) << "one byte holds both flags";
  expect_round_trip(record);
  record.attached = false;
  expect_round_trip(record);
  const JobRecord read = decode_record(record.id, plain).value();
  EXPECT_FALSE(read.attached);
  EXPECT_FALSE(read.due_inside);
  for (const char unknown : {'\x00', '\x04', '\x80'}) {
    std::string damaged = flagged;
    damaged.back() = unknown;
    EXPECT_EQ(decode_record(record.id, damaged).status().code(), Code::kCorruption)
        << static_cast<int>(unknown);
  }
}

TEST(RecordTest, DeliveryAndWebhookRoundTripAndRefuseDamage) {
  Delivery delivery{.url = "https://a.example/x?y=1",
                    .content_type = "text/plain",
                    .last_status = 503,
                    .last_error = "HTTP 503",
                    .last_attempt_unix_ms = 1'795'629'600'123};
  const std::string untraced = encode_delivery(delivery);
  EXPECT_EQ(untraced[0], static_cast<char>(kFormatVersion)) << "no trace context: version 1";
  EXPECT_EQ(decode_delivery(7, untraced).value(), delivery);
  delivery.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  delivery.tracestate = "a=b";
  const std::string bytes = encode_delivery(delivery);
  EXPECT_EQ(bytes[0], static_cast<char>(kTracedAttachmentVersion));
  EXPECT_EQ(decode_delivery(7, bytes).value(), delivery);
  std::string as_version_one = bytes;
  as_version_one[0] = static_cast<char>(kFormatVersion);
  EXPECT_EQ(decode_delivery(7, as_version_one).status().code(), Code::kCorruption)
      << "version 1 has no trace fields: trailing bytes";
  std::string newer = bytes;
  newer[0] = static_cast<char>(kTracedAttachmentVersion + 1);
  EXPECT_EQ(decode_delivery(7, newer).status().code(), Code::kUnknownFormat);
  EXPECT_EQ(decode_delivery(7, bytes.substr(0, bytes.size() - 1)).status().code(),
            Code::kCorruption);
  EXPECT_EQ(decode_delivery(7, bytes + "x").status().code(), Code::kCorruption);
  Webhook hook;
  hook.url = "http://127.0.0.1:8081/in";
  hook.headers = {{"Authorization", "Bearer t"}, {"X-Env", "prod"}};
  hook.timeout = std::chrono::milliseconds(2500);
  hook.max_attempts = 7;
  hook.backoff = {std::chrono::milliseconds(100), std::chrono::milliseconds(60'000), 1.5};
  hook.rate = 12.5;
  hook.concurrency = 3;
  hook.secrets = {"old", "new"};
  const std::string encoded = encode_webhook(hook);
  EXPECT_EQ(decode_webhook("t", encoded).value(), hook);
  EXPECT_EQ(decode_webhook("t", encoded.substr(0, encoded.size() - 2)).status().code(),
            Code::kCorruption);
  std::string newer_hook = encoded;
  newer_hook[0] = static_cast<char>(kFormatVersion + 1);
  EXPECT_EQ(decode_webhook("t", newer_hook).status().code(), Code::kUnknownFormat);
}

TEST(RecordTest, FlowSettingsRoundTripAndBadBytesAreRefused) {
  const FlowSettings flow{.group_concurrency = 3,
                          .fair = true,
                          .rate_jobs = 10,
                          .rate_period = std::chrono::milliseconds(1500),
                          .rate_burst = 4,
                          .group_weights = {{"vip", 5}, {"gold", 2}}};
  const std::string bytes = encode_flow(flow);
  EXPECT_EQ(bytes.size(), 20U + (2 + 3 + 4) + (2 + 4 + 4));
  EXPECT_EQ(decode_flow("t", bytes).value(), flow);
  EXPECT_EQ(decode_flow("t", bytes.substr(0, bytes.size() - 1)).status().code(), Code::kCorruption);
  EXPECT_EQ(decode_flow("t", bytes + "x").status().code(), Code::kCorruption);
  std::string unfair = bytes;
  unfair[5] = 2;
  EXPECT_EQ(decode_flow("t", unfair).status().code(), Code::kCorruption);
  std::string newer = bytes;
  newer[0] = static_cast<char>(kFormatVersion + 1);
  EXPECT_EQ(decode_flow("t", newer).status().code(), Code::kUnknownFormat);
  EXPECT_EQ(decode_flow("t", "").status().code(), Code::kCorruption);
}

TEST(RecordTest, RoundTripsEveryField) {
  expect_round_trip(full_record());
}

TEST(RecordTest, RoundTripsZeroesAndEmptyKeyAndGroup) {
  JobRecord record;
  record.id = 1;
  record.tube = "t";
  expect_round_trip(record);
}

TEST(RecordTest, RoundTripsEveryState) {
  for (std::uint8_t state = 0; state < kJobStateCount; ++state) {
    JobRecord record = small_record();
    record.state = static_cast<JobState>(state);
    expect_round_trip(record);
  }
}

TEST(RecordTest, RoundTripsLongestStrings) {
  JobRecord record = small_record();
  record.tube = binary_bytes(65535, 3);
  record.key = binary_bytes(65535, 5);
  record.group = binary_bytes(65535, 9);
  expect_round_trip(record);
}

TEST(RecordTest, IdComesFromTheCallerNotTheBytes) {
  const JobRecord record = full_record();
  auto decoded = decode_record(999, encode_record(record));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  EXPECT_EQ(decoded->id, 999U);
}

TEST(RecordTest, LayoutMatchesTheDrawing) {
  const JobRecord record = small_record();
  const std::string bytes = encode_record(record);
  // 54 fixed bytes, then three u16-prefixed strings.
  ASSERT_EQ(bytes.size(), 54U + 2 + 7 + 2 + 1 + 2 + 1);
  EXPECT_EQ(bytes[0], '\x01');                         // version
  EXPECT_EQ(bytes[1], '\x00');                         // state: delayed
  EXPECT_EQ(bytes.substr(2, 4), "\x00\x04\x00\x00"s);  // priority 1024, little-endian
  EXPECT_EQ(bytes.substr(54, 2), "\x07\x00"s);         // tube length
  EXPECT_EQ(bytes.substr(56, 7), "default");
}

TEST(RecordTest, EveryTruncationIsCorruption) {
  for (const JobRecord& record : {full_record(), small_record()}) {
    const std::string bytes = encode_record(record);
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      auto decoded = decode_record(record.id, std::string_view(bytes).substr(0, size));
      ASSERT_FALSE(decoded.is_ok()) << "prefix of " << size << " of " << bytes.size() << " bytes";
      EXPECT_EQ(decoded.code(), Code::kCorruption) << decoded.status().to_string();
    }
  }
}

TEST(RecordTest, CorruptionNamesTheJob) {
  auto decoded = decode_record(31337, "");
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.code(), Code::kCorruption);
  EXPECT_NE(decoded.status().message().find("31337"), std::string::npos)
      << decoded.status().to_string();
}

TEST(RecordTest, TrailingBytesAreCorruption) {
  for (const char extra : {'\0', 'x', '\xFF'}) {
    std::string bytes = encode_record(small_record());
    bytes.push_back(extra);
    auto decoded = decode_record(7, bytes);
    ASSERT_FALSE(decoded.is_ok());
    EXPECT_EQ(decoded.code(), Code::kCorruption) << decoded.status().to_string();
  }
}

TEST(RecordTest, UnknownStateIsCorruption) {
  for (const int state : {int{kJobStateCount}, 5, 0x7F, 0xFF}) {
    std::string bytes = encode_record(small_record());
    bytes[1] = static_cast<char>(state);
    auto decoded = decode_record(7, bytes);
    ASSERT_FALSE(decoded.is_ok()) << "state " << state;
    EXPECT_EQ(decoded.code(), Code::kCorruption) << decoded.status().to_string();
  }
}

TEST(RecordTest, OtherVersionIsUnsupportedAndNamesBothVersions) {
  std::string bytes = encode_record(small_record());
  bytes[0] = '\x02';
  auto decoded = decode_record(7, bytes);
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.code(), Code::kUnknownFormat) << decoded.status().to_string();
  const std::string& message = decoded.status().message();
  EXPECT_NE(message.find("version 2"), std::string::npos) << message;
  EXPECT_NE(message.find("reads 1"), std::string::npos) << message;

  // The version is checked first: a version-0 record of one byte is unsupported, not truncated.
  auto zero = decode_record(7, std::string(1, '\0'));
  ASSERT_FALSE(zero.is_ok());
  EXPECT_EQ(zero.code(), Code::kUnknownFormat) << zero.status().to_string();
}

TEST(RecordTest, EmptyTubeIsCorruption) {
  JobRecord record = small_record();
  record.tube.clear();
  auto decoded = decode_record(7, encode_record(record));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.code(), Code::kCorruption) << decoded.status().to_string();
}

TEST(RecordTest, StringLengthPastTheEndIsCorruption) {
  std::string bytes = encode_record(small_record());
  // The group's length (last 3 bytes: u16 length 1, 'g') claims more bytes than there are.
  bytes[bytes.size() - 3] = '\x02';
  auto decoded = decode_record(7, bytes);
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.code(), Code::kCorruption) << decoded.status().to_string();
}

TEST(RecordTest, RandomBytesNeverCrash) {
  std::mt19937 rng(11);
  const std::string valid = encode_record(full_record());
  for (int round = 0; round < 20'000; ++round) {
    std::string bytes = valid;
    // Flip a few bytes of a valid record; anything may come back, but it must come back.
    const int flips = 1 + round % 4;
    for (int i = 0; i < flips; ++i) {
      bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xFFU);
    }
    bytes.resize(rng() % (bytes.size() + 1));
    auto decoded = decode_record(1, bytes);
    if (decoded.is_ok()) {
      EXPECT_EQ(encode_record(decoded.value()), bytes) << "a decoded record must re-encode as-is";
    } else {
      EXPECT_TRUE(decoded.code() == Code::kCorruption || decoded.code() == Code::kUnknownFormat)
          << decoded.status().to_string();
    }
  }
}

TEST(JobKeyTest, RoundTrips) {
  for (const JobId id : {JobId{0}, JobId{1}, JobId{255}, JobId{256}, JobId{0x0102030405060708},
                         std::numeric_limits<JobId>::max()}) {
    for (const char prefix : {kJobPrefix, kBodyPrefix}) {
      const std::string key = job_key(prefix, id);
      ASSERT_EQ(key.size(), 9U);
      EXPECT_EQ(key[0], prefix);
      EXPECT_EQ(parse_job_key(prefix, key), id);
    }
  }
}

TEST(JobKeyTest, IsBigEndian) {
  EXPECT_EQ(job_key(kJobPrefix, 0x0102030405060708), "j\x01\x02\x03\x04\x05\x06\x07\x08");
  EXPECT_EQ(job_key(kBodyPrefix, 1), std::string("b\0\0\0\0\0\0\0\x01", 9));
}

TEST(JobKeyTest, RejectsOtherPrefixesAndLengths) {
  const std::string key = job_key(kJobPrefix, 5);
  EXPECT_EQ(parse_job_key(kBodyPrefix, key), std::nullopt);
  EXPECT_EQ(parse_job_key(kJobPrefix, key.substr(0, 8)), std::nullopt);
  EXPECT_EQ(parse_job_key(kJobPrefix, key + "x"), std::nullopt);
  EXPECT_EQ(parse_job_key(kJobPrefix, ""), std::nullopt);
  EXPECT_EQ(parse_job_key(kJobPrefix, kNextIdKey), std::nullopt);
  EXPECT_EQ(parse_job_key(kJobPrefix, kFormatKey), std::nullopt);
}

TEST(JobKeyTest, BytewiseOrderIsNumericOrder) {
  std::mt19937_64 rng(5);
  constexpr JobId kMaxId = std::numeric_limits<JobId>::max();
  std::vector<JobId> ids = {0, 1, 2, 127, 128, 255, 256, 257, 65535, 65536};
  ids.insert(ids.end(), {(1ULL << 32) - 1, 1ULL << 32, 1ULL << 63, kMaxId});
  // Random ids of every magnitude: the byte order of each shift matters.
  for (int i = 0; i < 2000; ++i) ids.push_back(rng() >> (rng() % 64));
  std::vector<std::string> keys;
  for (const JobId id : ids) keys.push_back(job_key(kJobPrefix, id));
  std::sort(ids.begin(), ids.end());
  // std::string compares like memcmp, as RocksDB's default comparator does.
  std::sort(keys.begin(), keys.end());
  ASSERT_EQ(keys.size(), ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(parse_job_key(kJobPrefix, keys[i]), ids[i]) << "position " << i;
  }
  // Every job key sorts after every body key and before the meta keys: scan() relies on it.
  EXPECT_LT(job_key(kBodyPrefix, std::numeric_limits<JobId>::max()), job_key(kJobPrefix, 0));
  EXPECT_LT(job_key(kJobPrefix, std::numeric_limits<JobId>::max()), std::string(kFormatKey));
  EXPECT_LT(job_key(kJobPrefix, std::numeric_limits<JobId>::max()), std::string(kNextIdKey));
}

TEST(WriteSetTest, RecordsOpsInOrder) {
  WriteSet set;
  EXPECT_TRUE(set.empty());
  const JobRecord record = small_record();
  set.put_record(record);
  set.put_body(7, std::string("body\0with nul", 13));
  set.erase(3);
  ASSERT_EQ(set.ops().size(), 3U);
  EXPECT_EQ(set.ops()[0].kind, WriteSet::Kind::kRecord);
  EXPECT_EQ(set.ops()[0].id, 7U);
  EXPECT_EQ(set.ops()[0].value, encode_record(record));
  EXPECT_EQ(set.ops()[1].kind, WriteSet::Kind::kBody);
  EXPECT_EQ(set.ops()[1].value, std::string("body\0with nul", 13));
  EXPECT_EQ(set.ops()[2].kind, WriteSet::Kind::kErase);
  EXPECT_EQ(set.ops()[2].id, 3U);
  EXPECT_TRUE(set.ops()[2].value.empty());
  EXPECT_EQ(set.next_id(), std::nullopt);

  WriteSet only_next_id;
  only_next_id.set_next_id(9);
  EXPECT_FALSE(only_next_id.empty());
  only_next_id.clear();
  EXPECT_TRUE(only_next_id.empty());
  EXPECT_EQ(only_next_id.next_id(), std::nullopt);
}

TEST(WriteSetTest, AppendKeepsOrderAndTheLastNextId) {
  WriteSet a;
  a.erase(1);
  a.erase(2);
  a.set_next_id(10);
  WriteSet b;
  b.erase(3);
  b.set_next_id(20);
  WriteSet c;  // no next_id: must not reset the one before
  c.erase(4);

  WriteSet all;
  all.append(std::move(a));
  all.append(std::move(b));
  all.append(std::move(c));
  std::vector<JobId> ids;
  for (const auto& op : all.ops()) ids.push_back(op.id);
  EXPECT_EQ(ids, (std::vector<JobId>{1, 2, 3, 4}));
  EXPECT_EQ(all.next_id(), 20U);
  // The sources are left empty, ready for reuse.
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): append() documents the reset
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(c.empty());  // NOLINT(bugprone-use-after-move)

  WriteSet d;
  d.set_next_id(30);
  all.append(std::move(d));
  EXPECT_EQ(all.ops().size(), 4U);
  EXPECT_EQ(all.next_id(), 30U);
}

}  // namespace
}  // namespace delayq::store
