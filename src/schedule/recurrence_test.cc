// recurrence_test.cc — runs as instants: cron in a zone across its DST changes (a time that does
// not exist, one that occurs twice, 30-minute and negative DST, fixed-offset zones), intervals,
// and the zone names taken and refused. Expected instants are written in UTC, worked out by hand
// from each zone's rules; tests/schedule/reference.py checks many more against Python's zoneinfo.
#include "schedule/recurrence.h"

#include <gtest/gtest.h>

namespace delayq::schedule {
namespace {

// A UTC civil time as Unix milliseconds.
std::int64_t utc(int y, int mo, int d, int h, int mi = 0, int s = 0) {
  const auto tp = cctz::convert(cctz::civil_second(y, mo, d, h, mi, s), cctz::utc_time_zone());
  return tp.time_since_epoch().count() * 1000;
}

Recurrence cron(std::string_view expression, std::string_view zone) {
  auto r = Recurrence::cron(expression, zone);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return std::move(r).value();
}

// No run comes after the last due time a job may have (the end of 9999): a preview or a
// schedule's next run never shows a year of five digits.
TEST(Recurrence, NoRunComesAfterTheEndOf9999) {
  const std::int64_t last = utc(9999, 12, 31, 23, 59, 59) + 999;
  auto every = Recurrence::every(std::chrono::seconds(1), 0);
  ASSERT_TRUE(every.is_ok());
  EXPECT_EQ(every.value().next_after(last - 1500), last - 999);
  EXPECT_EQ(every.value().next_after(last - 999), std::nullopt);
  EXPECT_EQ(every.value().next_after(last), std::nullopt);
  EXPECT_EQ(every.value().runs(last - 2500, 10).size(), 2u);
  const Recurrence daily = cron("0 0 * * *", "UTC");
  EXPECT_EQ(daily.next_after(utc(9999, 12, 30, 12)), utc(9999, 12, 31, 0));
  EXPECT_EQ(daily.next_after(utc(9999, 12, 31, 0)), std::nullopt);
}

TEST(Recurrence, ALocalTimeThatDoesNotExistRunsAtTheFirstInstantAfterTheJump) {
  // New York, 8 March 2026: 02:00 EST becomes 03:00 EDT (07:00 UTC).
  const Recurrence r = cron("30 2 * * *", "America/New_York");
  EXPECT_EQ(r.runs(utc(2026, 3, 7, 0), 3),
            (std::vector<std::int64_t>{utc(2026, 3, 7, 7, 30), utc(2026, 3, 8, 7),
                                       utc(2026, 3, 9, 6, 30)}));
}

TEST(Recurrence, LocalTimesThatBecomeOneInstantRunOnce) {
  // 02:00, 02:15, 02:30 and 02:45 of 8 March 2026 in New York are all 03:00 EDT.
  const Recurrence r = cron("*/15 2 * * *", "America/New_York");
  EXPECT_EQ(r.runs(utc(2026, 3, 8, 0), 2),
            (std::vector<std::int64_t>{utc(2026, 3, 8, 7), utc(2026, 3, 9, 6)}));
}

TEST(Recurrence, AFixedLocalTimeThatOccursTwiceRunsAtItsFirstOccurrence) {
  // New York, 1 November 2026: 02:00 EDT becomes 01:00 EST (06:00 UTC); 01:30 occurs twice.
  const Recurrence r = cron("30 1 * * *", "America/New_York");
  EXPECT_EQ(r.runs(utc(2026, 11, 1, 0), 2),
            (std::vector<std::int64_t>{utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)}));
  // Asked from inside the second 01:30, it does not run again that day.
  EXPECT_EQ(r.next_after(utc(2026, 11, 1, 6, 15)), utc(2026, 11, 2, 6, 30));
}

TEST(Recurrence, AWildcardScheduleRunsThroughTheRepeatedHour) {
  const Recurrence r = cron("0 * * * *", "America/New_York");
  EXPECT_EQ(r.runs(utc(2026, 11, 1, 3, 30), 4),
            (std::vector<std::int64_t>{utc(2026, 11, 1, 4), utc(2026, 11, 1, 5),
                                       utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)}));
  // From inside the first 01:xx the second 01:00 comes next; from inside the second, 02:00.
  EXPECT_EQ(r.next_after(utc(2026, 11, 1, 5, 30)), utc(2026, 11, 1, 6));
  EXPECT_EQ(r.next_after(utc(2026, 11, 1, 6, 30)), utc(2026, 11, 1, 7));
  const Recurrence quarters = cron("*/15 1 * * *", "America/New_York");
  EXPECT_EQ(quarters.runs(utc(2026, 11, 1, 5, 40), 5),
            (std::vector<std::int64_t>{utc(2026, 11, 1, 5, 45), utc(2026, 11, 1, 6),
                                       utc(2026, 11, 1, 6, 15), utc(2026, 11, 1, 6, 30),
                                       utc(2026, 11, 1, 6, 45)}));
}

TEST(Recurrence, ThirtyMinuteStepsOfLordHowe) {
  // Lord Howe Island: +11:00 in summer, +10:30 in winter. 5 April 2026: 02:00 +11 becomes 01:30.
  const Recurrence back = cron("45 1 * * *", "Australia/Lord_Howe");
  EXPECT_EQ(back.runs(utc(2026, 4, 4, 0), 2),
            (std::vector<std::int64_t>{utc(2026, 4, 4, 14, 45), utc(2026, 4, 5, 15, 15)}));
  // 4 October 2026: 02:00 +10:30 (15:30 UTC on the 3rd) becomes 02:30 +11.
  const Recurrence forward = cron("15 2 * * *", "Australia/Lord_Howe");
  EXPECT_EQ(forward.runs(utc(2026, 10, 2, 0), 2),
            (std::vector<std::int64_t>{utc(2026, 10, 2, 15, 45), utc(2026, 10, 3, 15, 30)}));
}

TEST(Recurrence, NegativeDaylightSavingOfDublin) {
  // Dublin's winter time is its negative DST: GMT in winter, IST (+01:00) in summer. 29 March
  // 2026: 01:00 becomes 02:00; 25 October 2026: 02:00 IST becomes 01:00 GMT.
  const Recurrence r = cron("30 1 * * *", "Europe/Dublin");
  EXPECT_EQ(r.runs(utc(2026, 3, 28, 0), 3),
            (std::vector<std::int64_t>{utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1),
                                       utc(2026, 3, 30, 0, 30)}));
  EXPECT_EQ(r.runs(utc(2026, 10, 24, 12), 2),
            (std::vector<std::int64_t>{utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)}));
}

TEST(Recurrence, EtcGmtPlusFiveIsFiveHoursBehind) {
  const Recurrence r = cron("0 12 * * *", "Etc/GMT+5");
  EXPECT_EQ(r.next_after(utc(2026, 7, 1, 0)), utc(2026, 7, 1, 17));
}

TEST(Recurrence, SecondsAndTheFirstRunStrictlyAfter) {
  const Recurrence r = cron("*/20 * * * * *", "UTC");
  EXPECT_EQ(r.next_after(utc(2026, 1, 1, 0, 0, 0)), utc(2026, 1, 1, 0, 0, 20));
  EXPECT_EQ(r.next_after(utc(2026, 1, 1, 0, 0, 0) - 1), utc(2026, 1, 1, 0, 0, 0));
  EXPECT_EQ(r.next_after(utc(2026, 1, 1, 0, 0, 19) + 999), utc(2026, 1, 1, 0, 0, 20));
}

TEST(Recurrence, IntervalsRunFromTheirStartInAbsoluteTime) {
  auto r = Recurrence::every(std::chrono::seconds(90), utc(2026, 3, 8, 6, 59));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r.value().next_after(utc(2026, 1, 1, 0)), utc(2026, 3, 8, 6, 59));
  EXPECT_EQ(r.value().runs(utc(2026, 3, 8, 6, 59), 2),
            (std::vector<std::int64_t>{utc(2026, 3, 8, 7, 0, 30), utc(2026, 3, 8, 7, 2)}));
  EXPECT_EQ(r.value().next_after(utc(2026, 3, 8, 7, 0, 30) - 1), utc(2026, 3, 8, 7, 0, 30));
  EXPECT_FALSE(Recurrence::every(std::chrono::milliseconds(0), 0).is_ok());
}

TEST(Recurrence, ARunIsFormattedWithItsZonesOffset) {
  const Recurrence r = cron("30 2 * * *", "America/New_York");
  EXPECT_EQ(r.format(utc(2026, 3, 8, 7)), "2026-03-08T03:00:00.000-04:00");
  EXPECT_EQ(r.format(utc(2026, 3, 7, 7, 30)), "2026-03-07T02:30:00.000-05:00");
}

TEST(Recurrence, OnlyNamesOfTheTzDatabaseAreZones) {
  for (const char* name : {"UTC", "Europe/Paris", "America/Argentina/Buenos_Aires", "Etc/GMT-14"}) {
    EXPECT_TRUE(Zone::load(name).is_ok()) << name;
  }
  for (const char* name : {"Mars/Olympus_Mons", "localtime", "../../etc/passwd", "/etc/localtime",
                           "Fixed/UTC+01:00", "", "Europe//Paris", "EST5EDT,M3.2.0,M11.1.0"}) {
    auto zone = Zone::load(name);
    EXPECT_FALSE(zone.is_ok()) << name;
    if (!zone.is_ok()) {
      EXPECT_NE(zone.status().message().find("tz:"), std::string::npos);
    }
  }
  auto bad = Recurrence::cron("0 9 * * *", "Europe/Pariss");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("Europe/Pariss"), std::string::npos);
}

}  // namespace
}  // namespace delayq::schedule
