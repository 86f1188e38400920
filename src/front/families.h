// families.h — the metrics families the front-ends count in (metrics/registry.h): each
// protocol's operations by kind and result and its connections, all protocols in one family of
// each; and the name push delivery's counts are read by.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "metrics/registry.h"

namespace delayq::front {

// Push deliveries by tube and outcome (front/webhook's), which GET /v1/tubes shows per tube.
inline constexpr char kWebhookDeliveries[] = "delayq_webhook_deliveries_total";

// One protocol's counts. Its connection series show from the start, at 0.
class ProtocolCounts {
 public:
  // protocol: a name of static storage ("beanstalk", "http").
  ProtocolCounts(metrics::Registry& registry, std::string_view protocol);

  void op(std::string_view op, std::string_view result) { ops_.add({protocol_, op, result}); }
  [[nodiscard]] std::int64_t ops(std::string_view op, std::string_view result) const {
    return ops_.value({protocol_, op, result});
  }
  void opened();
  void closed() { open_.add({protocol_}, -1); }

  // Connections open now, by protocol, of every front-end counting in `registry`.
  [[nodiscard]] static std::map<std::string, std::int64_t> open_connections(
      const metrics::Registry& registry);

 private:
  std::string_view protocol_;
  metrics::Counters& ops_;
  metrics::Counters& open_;
  metrics::Counters& accepted_;
};

}  // namespace delayq::front
