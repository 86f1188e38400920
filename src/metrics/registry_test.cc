// The registry's families and the page they are written in: histograms' cumulative buckets and
// quantiles, counters by label values (escaped), one family per name, collectors that leave with
// their owner, and the order of the page.
#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace delayq::metrics {
namespace {

std::string render(const Registry& registry) {
  std::string out;
  Page page(out);
  registry.render(page);
  return out;
}

TEST(HistogramTest, QuantilesInterpolateInsideTheirBucket) {
  Histogram h({1, 2, 4});
  EXPECT_EQ(h.quantile(0.5), std::nullopt);
  for (int i = 0; i < 3; ++i) h.observe(0.5);  // (0, 1]
  h.observe(3);                                // (2, 4]
  EXPECT_EQ(h.count(), 4U);
  EXPECT_EQ(h.buckets(), (std::vector<std::uint64_t>{3, 0, 1, 0}));
  EXPECT_DOUBLE_EQ(*h.quantile(0.5), 2.0 / 3);  // rank 2 of 3 in the first bucket
  EXPECT_DOUBLE_EQ(*h.quantile(1), 4);
  h.observe(100);  // +Inf: the last bound
  EXPECT_DOUBLE_EQ(*h.quantile(1), 4);
}

TEST(RegistryTest, AHistogramIsWrittenWithCumulativeBuckets) {
  Registry registry;
  Histogram& h = registry.histogram("x_seconds", "How long x took.", {0.5, 1});
  h.observe(0.25);
  h.observe(0.75);
  h.observe(3);
  EXPECT_EQ(render(registry),
            "# HELP x_seconds How long x took.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.5\"} 1\n"
            "x_seconds_bucket{le=\"1\"} 2\n"
            "x_seconds_bucket{le=\"+Inf\"} 3\n"
            "x_seconds_sum 4\n"
            "x_seconds_count 3\n");
}

TEST(RegistryTest, CountersAreWrittenByLabelValuesInOrderAndEscaped) {
  Registry registry;
  Counters& ops = registry.counters("ops_total", "Operations.", Kind::kCounter, {"op", "tube"});
  ops.add({"put", "b"});
  ops.add({"put", "a\"\\\n"}, 2);
  ops.add({"delete", "b"});
  EXPECT_EQ(ops.value({"put", "b"}), 1);
  EXPECT_EQ(ops.value({"put", "never"}), 0);
  Counters& open = registry.counters("open", "Open now.", Kind::kGauge);
  EXPECT_EQ(render(registry).substr(render(registry).find("# HELP open")),
            "# HELP open Open now.\n# TYPE open gauge\nopen 0\n")
      << "a family of one series shows it from the start";
  open.set({}, 5);
  open.add({}, -2);
  EXPECT_EQ(render(registry),
            "# HELP ops_total Operations.\n"
            "# TYPE ops_total counter\n"
            "ops_total{op=\"delete\",tube=\"b\"} 1\n"
            "ops_total{op=\"put\",tube=\"a\\\"\\\\\\n\"} 2\n"
            "ops_total{op=\"put\",tube=\"b\"} 1\n"
            "# HELP open Open now.\n"
            "# TYPE open gauge\n"
            "open 3\n");
}

TEST(RegistryTest, ForEachGivesEveryLabelOfEverySeries) {
  Registry registry;
  Counters& c = registry.counters("c", "C.", Kind::kCounter, {"a", "b"});
  c.add({"x", ""}, 3);
  c.add({"", "y"}, 4);
  std::vector<std::pair<std::vector<std::string>, std::int64_t>> seen;
  c.for_each([&](std::span<const std::string_view> labels, std::int64_t value) {
    seen.emplace_back(std::vector<std::string>(labels.begin(), labels.end()), value);
  });
  const decltype(seen) expected = {{{"", "y"}, 4}, {{"x", ""}, 3}};
  EXPECT_EQ(seen, expected);
}

// Series counted in turn, more of them than are kept at hand, and with labels that share a
// prefix, each keep their own count.
TEST(RegistryTest, SeriesCountedInTurnKeepTheirOwnCounts) {
  Registry registry;
  Counters& c = registry.counters("c", "C.", Kind::kCounter, {"verb", "reply"});
  const std::vector<std::pair<std::string, std::string>> turns = {
      {"put", "INSERTED"},  {"reserve", "RESERVED"}, {"delete", "DELETED"},  {"put", "INSERT"},
      {"puts", "INSERTED"}, {"touch", "TOUCHED"},    {"release", "RELEASED"}};
  for (int round = 0; round < 5; ++round) {
    for (std::size_t i = 0; i < turns.size(); ++i) {
      c.add({turns[i].first, turns[i].second}, static_cast<std::int64_t>(i + 1));
    }
  }
  for (std::size_t i = 0; i < turns.size(); ++i) {
    EXPECT_EQ(c.value({turns[i].first, turns[i].second}), static_cast<std::int64_t>(5 * (i + 1)))
        << turns[i].first << " " << turns[i].second;
  }
}

TEST(RegistryTest, TwoAsksForOneNameShareTheFamily) {
  Registry registry;
  Counters& first = registry.counters("ops_total", "Operations.", Kind::kCounter, {"protocol"});
  Counters& second = registry.counters("ops_total", "Operations.", Kind::kCounter, {"protocol"});
  EXPECT_EQ(&first, &second);
  first.add({"http"});
  second.add({"http"});
  EXPECT_EQ(registry.find_counters("ops_total")->value({"http"}), 2);
  EXPECT_EQ(registry.find_histogram("ops_total"), nullptr) << "a family of the other sort";
  EXPECT_EQ(registry.find_counters("missing"), nullptr);
  Histogram& h = registry.histogram("h", "H.", {1});
  EXPECT_EQ(&registry.histogram("h", "H.", {1}), &h);
  EXPECT_EQ(registry.find_histogram("h"), &h);
}

TEST(RegistryTest, ACollectorWritesAtEveryRenderUntilItIsGone) {
  Registry registry;
  registry.counters("first", "First.", Kind::kGauge).set({}, 1);
  int value = 7;
  std::optional<Registry::Collector> collector = registry.collect([&value](Page& page) {
    page.family("computed", "Computed.", "gauge");
    page.sample("computed", {{"shard", "0"}}, static_cast<double>(value) / 2);
  });
  registry.counters("last", "Last.", Kind::kGauge).set({}, 2);
  EXPECT_EQ(render(registry),
            "# HELP first First.\n# TYPE first gauge\nfirst 1\n"
            "# HELP computed Computed.\n# TYPE computed gauge\ncomputed{shard=\"0\"} 3.5\n"
            "# HELP last Last.\n# TYPE last gauge\nlast 2\n");
  value = 9;
  EXPECT_NE(render(registry).find("computed{shard=\"0\"} 4.5\n"), std::string::npos);

  Registry::Collector moved = std::move(*collector);
  collector.reset();
  EXPECT_NE(render(registry).find("computed"), std::string::npos) << "moved, not gone";
  moved = Registry::Collector();
  EXPECT_EQ(render(registry),
            "# HELP first First.\n# TYPE first gauge\nfirst 1\n"
            "# HELP last Last.\n# TYPE last gauge\nlast 2\n");
}

}  // namespace
}  // namespace delayq::metrics
