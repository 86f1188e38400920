#include "redis/slot.h"

#include <gtest/gtest.h>

namespace delayq::redis {
namespace {

// The check value of CRC16/XMODEM, which the cluster specification's reference code gives.
TEST(SlotTest, Crc16MatchesTheSpecificationsCheckValue) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

// Values from the CLUSTER KEYSLOT documentation and the cluster specification.
TEST(SlotTest, KeysHashToTheSlotsRedisGivesThem) {
  EXPECT_EQ(key_slot("somekey"), 11058);
  EXPECT_EQ(key_slot("foo{hash_tag}"), 2515);
  EXPECT_EQ(key_slot("bar{hash_tag}"), 2515);
  EXPECT_EQ(key_slot("123456789"), 0x31C3 % kSlotCount);
}

TEST(SlotTest, OnlyTheFirstNonEmptyTagIsHashed) {
  EXPECT_EQ(hash_tag("{user1000}.following"), "user1000");
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");  // from the first '{' to the first '}'
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}");  // an empty tag: the whole key
  EXPECT_EQ(hash_tag("foo{bar"), "foo{bar");        // no closing brace
  EXPECT_EQ(hash_tag("}foo{"), "}foo{");
}

TEST(SlotTest, BinaryKeysHashEveryByte) {
  const std::string key("a\0b", 3);
  EXPECT_NE(key_slot(key), key_slot("a"));
  EXPECT_LT(key_slot("\xff\xfe"), kSlotCount);
}

}  // namespace
}  // namespace delayq::redis
