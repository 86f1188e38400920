// inbox_test.cc — the timer thread's inbox (inbox.h) on its own: first in, first out; empty
// when drained, also after the stub has gone round; and, with several producers pushing while
// the consumer pops, every node comes out exactly once and each producer's in its order. No
// sleeps; under ThreadSanitizer (make tsan-test) it checks the queue's memory orders too.
#include "embedded/inbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace delayq::detail {
namespace {

struct Item : InboxNode {
  std::size_t producer = 0;
  std::size_t sequence = 0;
};

TEST(SchedulerInboxTest, FirstInFirstOut) {
  Inbox inbox;
  EXPECT_TRUE(inbox.empty());
  EXPECT_EQ(inbox.pop(), nullptr);
  std::vector<Item> items(5);
  for (Item& item : items) inbox.push(&item);
  EXPECT_FALSE(inbox.empty());
  for (Item& item : items) EXPECT_EQ(inbox.pop(), &item);
  EXPECT_EQ(inbox.pop(), nullptr);
  EXPECT_TRUE(inbox.empty());
}

// The last node comes out only once the stub is pushed behind it; after that the inbox must read
// empty, and take nodes (the same ones again, as the scheduler's records come back) as before.
TEST(SchedulerInboxTest, OneNodeAtATimeAndNodesPushedAgain) {
  Inbox inbox;
  Item a;
  Item b;
  for (int round = 0; round < 3; ++round) {
    inbox.push(&a);
    EXPECT_EQ(inbox.pop(), &a);
    EXPECT_TRUE(inbox.empty());
    EXPECT_EQ(inbox.pop(), nullptr);
    inbox.push(&b);
    inbox.push(&a);
    EXPECT_EQ(inbox.pop(), &b);
    EXPECT_FALSE(inbox.empty());
    EXPECT_EQ(inbox.pop(), &a);
    EXPECT_TRUE(inbox.empty());
  }
}

TEST(SchedulerInboxTest, ManyProducersOneConsumer) {
#if defined(__SANITIZE_THREAD__)
  constexpr std::size_t kPerProducer = 2'000;
#else
  constexpr std::size_t kPerProducer = 20'000;
#endif
  constexpr std::size_t kProducers = 4;
  std::vector<std::vector<Item>> items(kProducers);
  for (std::size_t p = 0; p < kProducers; ++p) {
    items[p] = std::vector<Item>(kPerProducer);
    for (std::size_t i = 0; i < kPerProducer; ++i) {
      items[p][i].producer = p;
      items[p][i].sequence = i;
    }
  }

  Inbox inbox;
  std::atomic<std::size_t> finished{0};
  std::vector<std::thread> producers;
  for (std::size_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&inbox, &items, &finished, p] {
      for (Item& item : items[p]) inbox.push(&item);
      finished.fetch_add(1);
    });
  }
  // Checked after the join: a failed ASSERT here would leave the producers running.
  std::vector<std::size_t> next(kProducers, 0);
  std::size_t popped = 0;
  std::size_t out_of_order = 0;
  while (popped < kProducers * kPerProducer) {
    const bool all_pushed = finished.load() == kProducers;  // read before the pop
    InboxNode* node = inbox.pop();
    if (node == nullptr) {
      if (all_pushed) break;  // nothing more can come: nodes were lost
      continue;               // the producers are still at it
    }
    const auto* item = static_cast<const Item*>(node);
    if (item->sequence != next[item->producer]) ++out_of_order;
    next[item->producer] = item->sequence + 1;
    ++popped;
  }
  for (auto& producer : producers) producer.join();
  EXPECT_EQ(popped, kProducers * kPerProducer);
  EXPECT_EQ(out_of_order, 0U);
  for (std::size_t p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer) << "producer " << p;
  EXPECT_EQ(inbox.pop(), nullptr);
  EXPECT_TRUE(inbox.empty());
}

}  // namespace
}  // namespace delayq::detail
