#include "metrics/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <utility>
#include <variant>

#include "base/check.h"

namespace delayq::metrics {
namespace {

template <typename... Args>
void append(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

// A label value as the exposition format quotes it: backslash, double quote and newline escaped.
void append_escaped(std::string& out, std::string_view value) {
  for (const char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1) {
  DELAYQ_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()));
}

void Histogram::observe(double value) noexcept {
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::uint64_t Histogram::count() const noexcept {
  std::uint64_t total = 0;
  for (const auto& bucket : buckets_) total += bucket.load(std::memory_order_relaxed);
  return total;
}

std::vector<std::uint64_t> Histogram::buckets() const {
  std::vector<std::uint64_t> out;
  out.reserve(buckets_.size());
  for (const auto& bucket : buckets_) out.push_back(bucket.load(std::memory_order_relaxed));
  return out;
}

std::optional<double> Histogram::quantile(double q) const {
  const std::vector<std::uint64_t> counts = buckets();
  std::uint64_t total = 0;
  for (const std::uint64_t n : counts) total += n;
  if (total == 0) return std::nullopt;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double below = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    const auto here = static_cast<double>(counts[i]);
    if (counts[i] > 0 && below + here >= rank) {
      const double low = i == 0 ? 0.0 : bounds_[i - 1];
      return low + (bounds_[i] - low) * (rank - below) / here;
    }
    below += here;
  }
  return bounds_.empty() ? std::nullopt : std::optional<double>(bounds_.back());
}

// --- counters ------------------------------------------------------------------------------

Counters::Counters(Kind kind, std::vector<std::string> label_names)
    : kind_(kind), label_names_(std::move(label_names)) {
  if (label_names_.empty()) series_.emplace("", 0);  // the one series shows from the start
}

const std::string& Counters::key(std::initializer_list<std::string_view> labels) const {
  DELAYQ_CHECK(labels.size() == label_names_.size());
  key_.clear();
  for (const std::string_view& label : labels) {
    DELAYQ_CHECK(label.find('\0') == std::string_view::npos);
    if (&label != labels.begin()) key_ += '\0';
    key_ += label;
  }
  return key_;
}

namespace {

// Whether `key` is `labels` joined with '\0'. (Labels holding a '\0' never match: the key of as
// many labels has fewer.)
bool is_key_of(std::string_view key, std::initializer_list<std::string_view> labels) {
  for (const std::string_view& label : labels) {
    if (&label != labels.begin()) {
      if (key.empty() || key.front() != '\0') return false;
      key.remove_prefix(1);
    }
    if (!key.starts_with(label)) return false;
    key.remove_prefix(label.size());
  }
  return key.empty();
}

}  // namespace

std::int64_t& Counters::series(std::initializer_list<std::string_view> labels) {
  // One of the few counted last: neither a key made nor a search. (A map's entries stay where
  // they are.)
  DELAYQ_CHECK(labels.size() == label_names_.size());
  for (auto* entry : recent_) {
    if (entry != nullptr && is_key_of(entry->first, labels)) return entry->second;
  }
  const std::string& wanted = key(labels);
  auto it = series_.find(wanted);
  if (it == series_.end()) it = series_.emplace(wanted, 0).first;
  std::copy_backward(recent_.begin(), recent_.end() - 1, recent_.end());
  recent_.front() = &*it;
  return it->second;
}

void Counters::add(std::initializer_list<std::string_view> labels, std::int64_t delta) {
  series(labels) += delta;
}

void Counters::set(std::initializer_list<std::string_view> labels, std::int64_t value) {
  series(labels) = value;
}

std::int64_t Counters::value(std::initializer_list<std::string_view> labels) const {
  const auto it = series_.find(key(labels));
  return it == series_.end() ? 0 : it->second;
}

void Counters::for_each(
    const std::function<void(std::span<const std::string_view>, std::int64_t)>& f) const {
  std::vector<std::string_view> labels;
  for (const auto& [key, value] : series_) {
    labels.clear();
    if (!label_names_.empty()) {
      std::string_view rest = key;
      for (std::size_t at = rest.find('\0'); at != std::string_view::npos; at = rest.find('\0')) {
        labels.push_back(rest.substr(0, at));
        rest.remove_prefix(at + 1);
      }
      labels.push_back(rest);
    }
    f(labels, value);
  }
}

// --- the page --------------------------------------------------------------------------------

void Page::family(std::string_view name, std::string_view help, std::string_view type) {
  append(out_, "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void Page::label(std::size_t index, std::string_view name, std::string_view value) {
  out_ += index == 0 ? '{' : ',';
  out_ += name;
  out_ += "=\"";
  append_escaped(out_, value);
  out_ += '"';
}

void Page::labels(std::initializer_list<Label> labels) {
  std::size_t i = 0;
  for (const Label& l : labels) label(i++, l.name, l.value);
  if (i > 0) out_ += '}';
}

void Page::sample(std::string_view name, std::initializer_list<Label> labels, double value) {
  out_ += name;
  this->labels(labels);
  append(out_, " {}\n", value);
}

void Page::sample(std::string_view name, std::initializer_list<Label> labels, std::int64_t value) {
  out_ += name;
  this->labels(labels);
  append(out_, " {}\n", value);
}

void Page::histogram(std::string_view name, std::string_view help, const Histogram& histogram) {
  family(name, help, "histogram");
  const std::string bucket = fmt::format("{}_bucket", name);
  const std::vector<double>& bounds = histogram.bounds();
  const std::vector<std::uint64_t> counts = histogram.buckets();
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    const std::string le = i < bounds.size() ? fmt::format("{}", bounds[i]) : "+Inf";
    sample(bucket, {{"le", le}}, static_cast<std::int64_t>(cumulative));
  }
  append(out_, "{}_sum {}\n{}_count {}\n", name, histogram.sum(), name, cumulative);
}

void Page::counters(std::string_view name, std::string_view help, const Counters& counters) {
  family(name, help, counters.kind() == Kind::kCounter ? "counter" : "gauge");
  const std::vector<std::string>& names = counters.label_names();
  counters.for_each([&](std::span<const std::string_view> values, std::int64_t value) {
    out_ += name;
    for (std::size_t i = 0; i < values.size(); ++i) label(i, names[i], values[i]);
    if (!values.empty()) out_ += '}';
    append(out_, " {}\n", value);
  });
}

// --- the registry ----------------------------------------------------------------------------

struct Registry::Family {
  std::string name;  // empty for a collector
  std::string help;
  std::variant<std::unique_ptr<Histogram>, std::unique_ptr<Counters>, std::function<void(Page&)>>
      family;
  std::uint64_t collector = 0;  // a collector's id

  // The family as a T; nullptr if it is of another sort.
  template <typename T>
  [[nodiscard]] T* as() const {
    const auto* held = std::get_if<std::unique_ptr<T>>(&family);
    return held == nullptr ? nullptr : held->get();
  }
};

Registry::Registry() = default;
Registry::~Registry() = default;

const Registry::Family* Registry::named(std::string_view name) const {
  for (const auto& f : families_) {
    if (f->collector == 0 && f->name == name) return f.get();
  }
  return nullptr;
}

template <typename T>
T& Registry::add(std::string_view name, std::string_view help, std::unique_ptr<T> made) {
  T& family = *made;
  families_.push_back(
      std::make_unique<Family>(Family{std::string(name), std::string(help), std::move(made), 0}));
  return family;
}

Histogram& Registry::histogram(std::string_view name, std::string_view help,
                               std::vector<double> bounds) {
  if (const Family* f = named(name)) {
    Histogram* h = f->as<Histogram>();
    DELAYQ_CHECK(h != nullptr && h->bounds() == bounds);
    return *h;
  }
  return add(name, help, std::make_unique<Histogram>(std::move(bounds)));
}

Counters& Registry::counters(std::string_view name, std::string_view help, Kind kind,
                             std::vector<std::string> label_names) {
  if (const Family* f = named(name)) {
    Counters* c = f->as<Counters>();
    DELAYQ_CHECK(c != nullptr && c->kind() == kind && c->label_names() == label_names);
    return *c;
  }
  return add(name, help, std::make_unique<Counters>(kind, std::move(label_names)));
}

const Histogram* Registry::find_histogram(std::string_view name) const {
  const Family* f = named(name);
  return f == nullptr ? nullptr : f->as<Histogram>();
}

const Counters* Registry::find_counters(std::string_view name) const {
  const Family* f = named(name);
  return f == nullptr ? nullptr : f->as<Counters>();
}

Registry::Collector Registry::collect(std::function<void(Page&)> write) {
  const std::uint64_t id = next_collector_++;
  families_.push_back(std::make_unique<Family>(Family{{}, {}, std::move(write), id}));
  return Collector(this, id);
}

void Registry::render(Page& page) const {
  for (const auto& f : families_) {
    if (const auto* h = std::get_if<std::unique_ptr<Histogram>>(&f->family)) {
      page.histogram(f->name, f->help, **h);
    } else if (const auto* c = std::get_if<std::unique_ptr<Counters>>(&f->family)) {
      page.counters(f->name, f->help, **c);
    } else {
      std::get<std::function<void(Page&)>>(f->family)(page);
    }
  }
}

Registry::Collector::Collector(Collector&& other) noexcept
    : registry_(std::exchange(other.registry_, nullptr)), id_(std::exchange(other.id_, 0)) {}

Registry::Collector& Registry::Collector::operator=(Collector&& other) noexcept {
  if (this != &other) {
    Collector gone(std::move(*this));
    registry_ = std::exchange(other.registry_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

Registry::Collector::~Collector() {
  if (registry_ == nullptr) return;
  std::erase_if(registry_->families_, [this](const auto& f) { return f->collector == id_; });
}

}  // namespace delayq::metrics
