// registry.h — what a server counts for `GET /metrics`, and the Prometheus text exposition it is
// written in (version 0.0.4: # HELP and # TYPE lines, then samples). Each layer registers its own
// families in the one Registry its owner gives it (delayqd: one for the process): the front-ends
// their operations and connections, a broker its fire lateness and commits, push delivery its
// deliveries. No layer knows another's families; a reader that shows one in another form (the
// HTTP API's /v1/stats) finds it by its name on the page.
//
// A family is one of
//   - a Histogram: fixed bucket bounds, thread-safe (relaxed atomics: a committer thread
//     observes fsyncs);
//   - Counters: integer series by label values (a counter or a gauge), on one thread, the
//     executor's; counting is a lookup with no allocation once the series exists;
//   - a collector: a function its owner gives, which writes the family when the page is
//     rendered, from values the owner keeps anyway (a shard's overdue time).
// Asking twice for a histogram or counters of one name gives the same family (two front-ends
// count into one); families are written in the order they were first asked for. Registering and
// rendering happen on the executor.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace delayq::metrics {

class Histogram {
 public:
  // bounds: the buckets' upper bounds, ascending (a +Inf bucket is implied).
  explicit Histogram(std::vector<double> bounds);
  void observe(double value) noexcept;
  [[nodiscard]] std::uint64_t count() const noexcept;
  [[nodiscard]] const std::vector<double>& bounds() const noexcept { return bounds_; }
  // Observations per bucket (not cumulative), the +Inf bucket last.
  [[nodiscard]] std::vector<std::uint64_t> buckets() const;
  [[nodiscard]] double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
  // The value below which a fraction q (0 to 1) of the observations fall, interpolated linearly
  // inside its bucket as Prometheus's histogram_quantile() does (the first bucket from 0); the
  // last bound when it falls in +Inf; nullopt with no observation.
  [[nodiscard]] std::optional<double> quantile(double q) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<std::uint64_t>> buckets_;  // per bucket, not cumulative; last: +Inf
  std::atomic<double> sum_{0};
};

enum class Kind { kCounter, kGauge };

// One family's integer series, by label values (as many as the family has label names; none for
// a family of one series, which shows at 0 from the start).
class Counters {
 public:
  Counters(Kind kind, std::vector<std::string> label_names);
  Counters(const Counters&) = delete;  // it keeps a pointer into its own series
  Counters& operator=(const Counters&) = delete;

  // Adds delta to the series of these label values, made at 0 if it is new.
  void add(std::initializer_list<std::string_view> labels, std::int64_t delta = 1);
  void set(std::initializer_list<std::string_view> labels, std::int64_t value);
  // A series' value; 0 if it was never counted.
  [[nodiscard]] std::int64_t value(std::initializer_list<std::string_view> labels) const;
  // Calls f(labels, value) for every series, in order of label values; the labels are views
  // valid during the call.
  void for_each(
      const std::function<void(std::span<const std::string_view>, std::int64_t)>& f) const;

  [[nodiscard]] Kind kind() const noexcept { return kind_; }
  [[nodiscard]] const std::vector<std::string>& label_names() const noexcept {
    return label_names_;
  }

 private:
  // The series' key, in key_.
  const std::string& key(std::initializer_list<std::string_view> labels) const;
  std::int64_t& series(std::initializer_list<std::string_view> labels);

  Kind kind_;
  std::vector<std::string> label_names_;
  // By label values joined with '\0' (no label value holds one), sorted for a stable page.
  std::map<std::string, std::int64_t, std::less<>> series_;
  mutable std::string key_;  // the key being looked up, kept to reuse its buffer
  // The series counted last, newest first: a server's replies alternate among a few (INSERTED,
  // RESERVED, DELETED), each found again without a key made or a search.
  std::array<std::pair<const std::string, std::int64_t>*, 4> recent_{};
};

// Writes families in the exposition format; a collector's function is given one.
class Page {
 public:
  explicit Page(std::string& out) : out_(out) {}

  struct Label {
    std::string_view name;
    std::string_view value;  // escaped when written
  };
  // A family's # HELP and # TYPE lines ("counter", "gauge", "histogram").
  void family(std::string_view name, std::string_view help, std::string_view type);
  void sample(std::string_view name, std::initializer_list<Label> labels, double value);
  void sample(std::string_view name, std::initializer_list<Label> labels, std::int64_t value);
  void sample(std::string_view name, std::int64_t value) { sample(name, {}, value); }
  // A whole family: HELP and TYPE, then the _bucket, _sum and _count samples.
  void histogram(std::string_view name, std::string_view help, const Histogram& histogram);
  void counters(std::string_view name, std::string_view help, const Counters& counters);

 private:
  void label(std::size_t index, std::string_view name, std::string_view value);
  void labels(std::initializer_list<Label> labels);
  std::string& out_;
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The histogram of this name, made with these bounds on the first ask (later asks must give the
  // same bounds). It lives as long as the registry.
  Histogram& histogram(std::string_view name, std::string_view help, std::vector<double> bounds);
  // The counters of this name, made on the first ask (later asks must give the same kind and
  // label names). They live as long as the registry.
  Counters& counters(std::string_view name, std::string_view help, Kind kind,
                     std::vector<std::string> label_names = {});
  // A registered family by its name; nullptr when none is, or it is of the other sort.
  [[nodiscard]] const Histogram* find_histogram(std::string_view name) const;
  [[nodiscard]] const Counters* find_counters(std::string_view name) const;

  // A family written by `write` at every render, HELP and TYPE lines included, until the
  // returned Collector is destroyed (its owner's destructor: the function reads the owner).
  class Collector;
  [[nodiscard]] Collector collect(std::function<void(Page&)> write);

  // Every family, in the order registered.
  void render(Page& page) const;

 private:
  struct Family;
  // The histogram or counters of this name; nullptr if none.
  [[nodiscard]] const Family* named(std::string_view name) const;
  template <typename T>
  T& add(std::string_view name, std::string_view help, std::unique_ptr<T> made);
  std::vector<std::unique_ptr<Family>> families_;
  std::uint64_t next_collector_ = 1;
};

class Registry::Collector {
 public:
  Collector() = default;
  Collector(Collector&& other) noexcept;
  Collector& operator=(Collector&& other) noexcept;
  ~Collector();

 private:
  friend class Registry;
  Collector(Registry* registry, std::uint64_t id) : registry_(registry), id_(id) {}
  Registry* registry_ = nullptr;
  std::uint64_t id_ = 0;
};

}  // namespace delayq::metrics
