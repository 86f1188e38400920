// dashboard.h — the web dashboard's files, built into the binary (cmake/embed_files.cmake makes
// files() from src/front/http/dashboard/ and Debian's Chart.js), served by the HTTP API at GET /
// and GET /dashboard/<file>. The files hold no data: the page reads the API (GET /v1/stats,
// /v1/tubes, /v1/due, ...) from the browser, with the API's bearer token when there is one, so a
// server nobody looks at does no work for it. Pages and what each shows: docs/dashboard.md
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace delayq::front::http::dashboard {

struct File {
  std::string_view name;  // e.g. "app.js"
  std::string_view bytes;
};
// Every file, generated at build time.
std::span<const File> files();

struct Asset {
  std::string_view content_type;
  std::string_view bytes;
};
// The file a path names: "/" the page itself, "/dashboard/<name>" any other; nullopt if none.
// The query string is ignored.
[[nodiscard]] std::optional<Asset> find(std::string_view target);

}  // namespace delayq::front::http::dashboard
