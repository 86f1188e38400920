// book_test.cc — the names and wakes a node keeps of its schedules: due in wake order and bounded,
// a wake moved or cleared, names listed in order from any point.
#include "schedule/book.h"

#include <gtest/gtest.h>

namespace delayq::schedule {
namespace {

using Names = std::vector<std::string>;

TEST(Book, DueNamesComeInWakeOrderUpToTheLimit) {
  Book book;
  book.set("c", 30);
  book.set("a", 10);
  book.set("b", 20);
  book.set("idle", std::nullopt);
  EXPECT_EQ(book.size(), 4U);
  EXPECT_EQ(book.next_wake(), 10);
  EXPECT_EQ(book.due(25, 10), (Names{"a", "b"}));
  EXPECT_EQ(book.due(100, 2), (Names{"a", "b"}));
  EXPECT_EQ(book.due(9, 10), Names{});
}

TEST(Book, AWakeMovesOrClearsAndAnErasedNameIsGone) {
  Book book;
  book.set("a", 10);
  book.set("b", 20);
  book.set("a", 40);  // moved after b
  EXPECT_EQ(book.due(100, 10), (Names{"b", "a"}));
  book.set("b", std::nullopt);  // kept, not due by time
  EXPECT_TRUE(book.contains("b"));
  EXPECT_EQ(book.due(100, 10), Names{"a"});
  EXPECT_TRUE(book.erase("a"));
  EXPECT_FALSE(book.erase("a"));
  EXPECT_FALSE(book.contains("a"));
  EXPECT_EQ(book.next_wake(), std::nullopt);
  EXPECT_EQ(book.size(), 1U);
}

TEST(Book, ListPagesThroughNamesInOrder) {
  Book book;
  for (const char* name : {"d", "b", "a", "c"}) book.set(name, 5);
  EXPECT_EQ(book.list("", 2), (Names{"a", "b"}));
  EXPECT_EQ(book.list("b", 10), (Names{"c", "d"}));
  EXPECT_EQ(book.list("bb", 1), Names{"c"});
  EXPECT_EQ(book.list("d", 10), Names{});
}

}  // namespace
}  // namespace delayq::schedule
