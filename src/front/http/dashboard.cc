#include "front/http/dashboard.h"

namespace delayq::front::http::dashboard {
namespace {

std::string_view content_type(std::string_view name) {
  const auto ends_with = [name](std::string_view suffix) { return name.ends_with(suffix); };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

}  // namespace

std::optional<Asset> find(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  constexpr std::string_view kPrefix = "/dashboard/";
  if (path == "/") {
    path = "index.html";
  } else if (path.starts_with(kPrefix)) {
    path.remove_prefix(kPrefix.size());
  } else {
    return std::nullopt;
  }
  for (const File& file : files()) {
    if (file.name == path) return Asset{content_type(file.name), file.bytes};
  }
  return std::nullopt;
}

}  // namespace delayq::front::http::dashboard
