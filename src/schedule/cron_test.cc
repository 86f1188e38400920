// cron_test.cc — reading cron expressions (fields, lists, ranges, steps, names, macros, the
// errors and where they point) and the civil times they match.
#include "schedule/cron.h"

#include <gtest/gtest.h>

namespace delayq::schedule {
namespace {

cctz::civil_second at(int y, int mo, int d, int h = 0, int mi = 0, int s = 0) {
  return cctz::civil_second(y, mo, d, h, mi, s);
}

Cron parsed(std::string_view text) {
  auto cron = Cron::parse(text);
  EXPECT_TRUE(cron.is_ok()) << text << ": " << cron.status().message();
  return cron.is_ok() ? std::move(cron).value() : Cron::parse("* * * * *").value();
}

std::string error_of(std::string_view text) {
  auto cron = Cron::parse(text);
  EXPECT_FALSE(cron.is_ok()) << text;
  if (cron.is_ok()) return "";
  EXPECT_EQ(cron.status().code(), Code::kInvalidArgument);
  return cron.status().message();
}

TEST(Cron, FiveFieldsMatchOnTheMinuteAndSixTheSecond) {
  const Cron five = parsed("30 9 * * *");
  EXPECT_TRUE(five.matches(at(2026, 5, 4, 9, 30, 0)));
  EXPECT_FALSE(five.matches(at(2026, 5, 4, 9, 30, 1)));
  EXPECT_FALSE(five.matches(at(2026, 5, 4, 9, 31, 0)));
  const Cron six = parsed("15 30 9 * * *");
  EXPECT_TRUE(six.matches(at(2026, 5, 4, 9, 30, 15)));
  EXPECT_FALSE(six.matches(at(2026, 5, 4, 9, 30, 0)));
}

TEST(Cron, ListsRangesAndStepsSetTheirValues) {
  const Cron cron = parsed("0,20-22,*/15 5-11/3 * * *");
  for (const int minute : {0, 15, 20, 21, 22, 30, 45}) {
    EXPECT_TRUE(cron.matches(at(2026, 1, 1, 5, minute))) << minute;
  }
  for (const int minute : {1, 19, 23, 44, 59}) {
    EXPECT_FALSE(cron.matches(at(2026, 1, 1, 5, minute))) << minute;
  }
  for (const int hour : {5, 8, 11}) EXPECT_TRUE(cron.matches(at(2026, 1, 1, hour, 0))) << hour;
  for (const int hour : {4, 6, 7, 9, 12}) {
    EXPECT_FALSE(cron.matches(at(2026, 1, 1, hour, 0))) << hour;
  }
}

TEST(Cron, AValueWithAStepRunsToTheFieldsEnd) {
  const Cron cron = parsed("5/20 * * * *");
  EXPECT_TRUE(cron.matches(at(2026, 1, 1, 0, 5)));
  EXPECT_TRUE(cron.matches(at(2026, 1, 1, 0, 25)));
  EXPECT_TRUE(cron.matches(at(2026, 1, 1, 0, 45)));
  EXPECT_FALSE(cron.matches(at(2026, 1, 1, 0, 0)));
}

TEST(Cron, MonthsAndDaysGoByNameInAnyCaseAndSevenIsSunday) {
  const Cron cron = parsed("0 0 * jan,Mar-MAY sun");
  EXPECT_TRUE(cron.matches(at(2026, 1, 4)));   // a Sunday in January
  EXPECT_TRUE(cron.matches(at(2026, 4, 5)));   // a Sunday in April
  EXPECT_FALSE(cron.matches(at(2026, 2, 1)));  // a Sunday in February
  EXPECT_FALSE(cron.matches(at(2026, 1, 5)));  // a Monday
  const Cron seven = parsed("0 0 * * 7");
  EXPECT_TRUE(seven.matches(at(2026, 1, 4)));
  const Cron weekend = parsed("0 0 * * 6-7");
  EXPECT_TRUE(weekend.matches(at(2026, 1, 3)));
  EXPECT_TRUE(weekend.matches(at(2026, 1, 4)));
  EXPECT_FALSE(weekend.matches(at(2026, 1, 5)));
}

TEST(Cron, DayOfMonthAndDayOfWeekMatchEitherWhenBothAreRestricted) {
  // Vixie cron: the 1st to the 7th, and every Monday.
  const Cron either = parsed("0 9 1-7 * MON");
  EXPECT_TRUE(either.matches(at(2026, 6, 3, 9)));   // a Wednesday, the 3rd
  EXPECT_TRUE(either.matches(at(2026, 6, 15, 9)));  // a Monday, the 15th
  EXPECT_FALSE(either.matches(at(2026, 6, 16, 9)));
  // A field starting with '*' (even */2) makes them combine: both must match.
  const Cron both = parsed("0 9 */2 * MON");
  EXPECT_TRUE(both.matches(at(2026, 6, 15, 9)));   // a Monday, odd day
  EXPECT_FALSE(both.matches(at(2026, 6, 22, 9)));  // a Monday, even day
  EXPECT_FALSE(both.matches(at(2026, 6, 17, 9)));  // odd, a Wednesday
}

TEST(Cron, MacrosAreTheirExpressions) {
  EXPECT_TRUE(parsed("@yearly").matches(at(2027, 1, 1)));
  EXPECT_FALSE(parsed("@annually").matches(at(2027, 2, 1)));
  EXPECT_TRUE(parsed("@monthly").matches(at(2027, 2, 1)));
  EXPECT_TRUE(parsed("@weekly").matches(at(2026, 1, 4)));  // Sunday midnight
  EXPECT_FALSE(parsed("@weekly").matches(at(2026, 1, 5)));
  EXPECT_TRUE(parsed("@daily").matches(at(2026, 1, 5)));
  EXPECT_TRUE(parsed("@midnight").matches(at(2026, 1, 5)));
  EXPECT_TRUE(parsed("@hourly").matches(at(2026, 1, 5, 13)));
  EXPECT_FALSE(parsed("@hourly").matches(at(2026, 1, 5, 13, 1)));
  EXPECT_TRUE(parsed("@hourly").wildcard_time());
  EXPECT_FALSE(parsed("@daily").wildcard_time());
}

TEST(Cron, ErrorsNameTheFieldAndThePosition) {
  EXPECT_EQ(error_of("0 9 32 * *"), "cron: day of month at 5: 32 is outside 1-31");
  EXPECT_EQ(error_of("0 25 * * *"), "cron: hour at 3: 25 is outside 0-23");
  EXPECT_EQ(error_of("0 9 * foo *"), "cron: month at 7: 'foo' is not a month");
  EXPECT_EQ(error_of("0 9 * * 1-8"), "cron: day of week at 11: 8 is outside 0-7");
  EXPECT_EQ(error_of("*/0 * * * *"), "cron: minute at 3: step '0' is not 1-60");
  EXPECT_EQ(error_of("0 9 5-1 * *"), "cron: day of month at 5: range 5-1 runs backwards");
  EXPECT_EQ(error_of("0,,5 * * * *"), "cron: minute at 3: an empty list item");
  EXPECT_EQ(error_of("61 * * * * *"), "cron: second at 1: 61 is outside 0-59");
  EXPECT_NE(error_of("* * * *").find("5 fields"), std::string::npos);
  EXPECT_NE(error_of("@often").find("@yearly"), std::string::npos);
  EXPECT_NE(error_of("").find("not 0"), std::string::npos);
}

TEST(Cron, NextFindsTheFirstMatchAtOrAfterAndJumpsMonthsAndYears) {
  const Cron cron = parsed("30 9 * * *");
  EXPECT_EQ(cron.next(at(2026, 5, 4, 9, 30)), at(2026, 5, 4, 9, 30));
  EXPECT_EQ(cron.next(at(2026, 5, 4, 9, 30, 1)), at(2026, 5, 5, 9, 30));
  EXPECT_EQ(cron.next(at(2026, 12, 31, 23, 59)), at(2027, 1, 1, 9, 30));
  // The next 29 February after 2026.
  EXPECT_EQ(parsed("0 0 29 2 *").next(at(2026, 1, 1)), at(2028, 2, 29));
  // The next 31st after April.
  EXPECT_EQ(parsed("0 12 31 * *").next(at(2026, 4, 1)), at(2026, 5, 31, 12));
}

// 29 February on a Sunday ("*/7" leaves the day of week unrestricted for the rule of both
// fields, and its values are 0 and 7: Sunday): 28 years apart, and found all the same.
TEST(Cron, AMatchDecadesAwayIsFound) {
  const Cron cron = parsed("0 0 29 2 */7");
  EXPECT_EQ(cron.next(at(2026, 1, 1)), at(2032, 2, 29));
  EXPECT_EQ(cron.next(at(2032, 3, 1)), at(2060, 2, 29));
  // Across 2100, which has no 29 February: 40 years.
  EXPECT_EQ(cron.next(at(2089, 1, 1)), at(2128, 2, 29));
}

TEST(Cron, AnExpressionThatNeverMatchesHasNoNext) {
  EXPECT_FALSE(parsed("0 0 30 2 *").next(at(2026, 1, 1)).has_value());
  EXPECT_FALSE(parsed("0 0 31 4,6,9,11 *").next(at(2026, 1, 1)).has_value());
}

}  // namespace
}  // namespace delayq::schedule
