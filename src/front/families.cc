#include "front/families.h"

namespace delayq::front {
namespace {

constexpr char kConnections[] = "delayq_connections";

}  // namespace

ProtocolCounts::ProtocolCounts(metrics::Registry& registry, std::string_view protocol)
    : protocol_(protocol),
      ops_(registry.counters("delayq_operations_total", "Operations by protocol, kind and result.",
                             metrics::Kind::kCounter, {"protocol", "op", "result"})),
      open_(registry.counters(kConnections, "Open connections by protocol.", metrics::Kind::kGauge,
                              {"protocol"})),
      accepted_(registry.counters("delayq_connections_total",
                                  "Connections accepted since the start, by protocol.",
                                  metrics::Kind::kCounter, {"protocol"})) {
  open_.add({protocol_}, 0);
  accepted_.add({protocol_}, 0);
}

void ProtocolCounts::opened() {
  open_.add({protocol_});
  accepted_.add({protocol_});
}

std::map<std::string, std::int64_t> ProtocolCounts::open_connections(
    const metrics::Registry& registry) {
  std::map<std::string, std::int64_t> open;
  if (const metrics::Counters* counters = registry.find_counters(kConnections)) {
    counters->for_each([&open](std::span<const std::string_view> labels, std::int64_t value) {
      open.emplace(labels[0], value);
    });
  }
  return open;
}

}  // namespace delayq::front
