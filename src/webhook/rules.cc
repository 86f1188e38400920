#include "webhook/rules.h"

#include <algorithm>
#include <boost/asio/ip/address_v6.hpp>
#include <cctype>
#include <cmath>
#include <ctime>

namespace delayq::webhook {
namespace {

// A DNS name or an IPv4 address: labels of 1 to 63 letters, digits, '-' (not first or last) and
// '_', apart by dots, with an optional dot at the end; at most 253 bytes.
bool valid_host_name(std::string_view host) {
  if (host.ends_with('.')) host.remove_suffix(1);
  if (host.empty() || host.size() > 253) return false;
  std::size_t start = 0;
  while (start <= host.size()) {
    std::size_t dot = host.find('.', start);
    if (dot == std::string_view::npos) dot = host.size();
    const std::string_view label = host.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (const char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
    }
    start = dot + 1;
  }
  return true;
}

}  // namespace

std::string Url::origin() const {
  const bool v6 = host.find(':') != std::string::npos;
  return std::string(tls ? "https://" : "http://") + (v6 ? "[" + host + "]" : host) + ":" + port;
}

Result<Url> parse_url(std::string_view text) {
  const auto bad = [text](const char* why) {
    return Status(Code::kInvalidArgument,
                  "bad url \"" + std::string(text.substr(0, 200)) + "\": " + why);
  };
  constexpr std::size_t kMaxUrlBytes = 2048;
  if (text.size() > kMaxUrlBytes) return bad("longer than 2048 bytes");
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c > 0x20 && c < 0x7F; })) {
    return bad("spaces, control or non-ASCII characters");
  }
  Url url;
  std::string_view rest;
  // The scheme ignores case (RFC 3986): HTTP:// is http://.
  const auto scheme_is = [text](std::string_view scheme) {
    return text.size() >= scheme.size() &&
           std::equal(scheme.begin(), scheme.end(), text.begin(), [](char a, char b) {
             return a == std::tolower(static_cast<unsigned char>(b));
           });
  };
  if (scheme_is("http://")) {
    rest = text.substr(7);
  } else if (scheme_is("https://")) {
    url.tls = true;
    rest = text.substr(8);
  } else {
    return bad("not http:// or https://");
  }
  if (rest.find('#') != std::string_view::npos) return bad("a fragment");
  const std::size_t slash = std::min(rest.find('/'), rest.find('?'));
  std::string_view authority = rest.substr(0, slash);
  url.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (url.target.front() == '?') url.target.insert(0, "/");
  if (authority.find('@') != std::string_view::npos) return bad("user info");
  std::string_view port;
  if (authority.starts_with("[")) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("an unclosed [");
    url.host = authority.substr(1, close - 1);
    boost::system::error_code error;
    (void)boost::asio::ip::make_address_v6(url.host, error);
    if (error) return bad("not an IPv6 address between [ and ]");
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(":")) return bad("text after ]");
    if (!after.empty()) port = after.substr(1);
  } else {
    const std::size_t colon = authority.find(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (url.host.empty()) return bad("no host");
  if (!authority.starts_with("[") && !valid_host_name(url.host)) {
    return bad(
        "a host that is not a name or an IPv4 address (dot-separated labels of letters, "
        "digits, '-' and '_')");
  }
  if (port.empty() && authority.ends_with(":")) return bad("an empty port after ':'");
  if (port.empty()) {
    url.port = url.tls ? "443" : "80";
  } else {
    if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return bad("a port that is not a number");
    }
    if (port.size() > 5) return bad("a port out of 1-65535");
    const int number = std::stoi(std::string(port));
    if (number < 1 || number > 65535) return bad("a port out of 1-65535");
    url.port = std::to_string(number);
  }
  return url;
}

Status check_header_value(std::string_view field, std::string_view value) {
  const bool printable = std::all_of(value.begin(), value.end(),
                                     [](char c) { return (c >= 0x20 && c < 0x7F) || c == '\t'; });
  if (value.empty() || value.size() > 1024 || !printable) {
    return {Code::kInvalidArgument,
            std::string(field) + ": 1 to 1024 bytes of printable ASCII, no line breaks"};
  }
  return Status::ok();
}

std::string header_key(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size());
  for (const char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7F && c != '%') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

Millis backoff_delay(const Backoff& backoff, std::uint32_t attempt, std::mt19937_64& random) {
  const double exponent = std::max<std::uint32_t>(attempt, 1) - 1;
  const double full = std::min(
      static_cast<double>(backoff.max.count()),
      static_cast<double>(backoff.min.count()) * std::pow(std::max(backoff.factor, 1.0), exponent));
  std::uniform_real_distribution<double> share(0.5, 1.0);
  return Millis{static_cast<std::int64_t>(std::llround(full * share(random)))};
}

std::optional<Millis> retry_after(std::string_view value, std::int64_t now_unix_ms) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 9) return Millis{std::int64_t{999'999'999} * 1000};
    return Millis{std::stoll(std::string(value)) * 1000};
  }
  // IMF-fixdate, as HTTP sends it: "Wed, 25 Nov 2026 18:00:00 GMT".
  std::tm tm{};
  const std::string text(value);
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  const std::int64_t at_ms = static_cast<std::int64_t>(timegm(&tm)) * 1000;
  return Millis{std::max<std::int64_t>(0, at_ms - now_unix_ms)};
}

std::string rfc3339_ms(std::int64_t unix_ms) {
  const std::int64_t seconds = unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000;
  const auto ms = static_cast<int>(unix_ms - seconds * 1000);
  const auto time = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&time, &tm);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return text;
}

}  // namespace delayq::webhook
