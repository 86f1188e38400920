#include "front/http/request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "base/job.h"
#include "base/names.h"
#include "webhook/rules.h"

namespace delayq::front::http {
namespace json = boost::json;

namespace {

// Whether some number of `value` that the parser read as a double (a fraction, an exponent, or
// beyond 64 bits) is one for which `which` holds.
bool any_double(const json::value& value, bool (*which)(double)) {
  switch (value.kind()) {
    case json::kind::double_:
      return which(value.get_double());
    case json::kind::array:
      return std::any_of(value.get_array().begin(), value.get_array().end(),
                         [which](const json::value& item) { return any_double(item, which); });
    case json::kind::object:
      return std::any_of(
          value.get_object().begin(), value.get_object().end(),
          [which](const json::key_value_pair& field) { return any_double(field.value(), which); });
    default:
      return false;
  }
}

// Why a number is not a whole count of `unit` from 0 to a most (`most`, as said); empty for
// what is not a number.
std::string why_not_count(const json::value& v, const std::string& most, std::string_view unit) {
  const bool negative = (v.is_int64() && v.as_int64() < 0) || (v.is_double() && v.as_double() < 0);
  if (negative) return "not negative";
  if (v.is_double() && v.as_double() != std::floor(v.as_double())) {
    return "a whole number of " + std::string(unit);
  }
  // 1e3, 0.0 and -0.0 are whole numbers in a form the field does not take; beyond 2^63 a
  // number written in digits is read as a double too, and is out of range.
  if (v.is_double() && std::fabs(v.as_double()) < 9.2e18) {
    return "a whole number of " + std::string(unit) + " in digits (no fraction or exponent)";
  }
  if (v.is_number()) return "at most " + most;
  return {};
}

// Whether some number in `text` (valid JSON) has a digit other than 0 before any exponent yet
// is too small for a double: the parser reads such a number (1e-5000) as 0, which a field such
// as a webhook's rate would take for "no limit". Read only when the document holds a double 0.
bool some_number_vanishes(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    const std::size_t start = i;
    bool nonzero = false;
    bool exponent = false;
    for (; i < text.size() &&
           std::string_view("0123456789+-.eE").find(text[i]) != std::string_view::npos;
         ++i) {
      exponent = exponent || text[i] == 'e' || text[i] == 'E';
      nonzero = nonzero || (!exponent && text[i] >= '1' && text[i] <= '9');
    }
    const std::string_view number = text.substr(start, i - start);
    if (nonzero && number.find_first_of(".eE") != std::string_view::npos) {
      // Out of range here is below it: those above are refused first (infinite).
      double value = 0;
      const auto [end, error] =
          std::from_chars(number.data(), number.data() + number.size(), value);
      if (error == std::errc::result_out_of_range || (error == std::errc() && value == 0)) {
        return true;
      }
    }
    --i;
  }
  return false;
}

// Whether `text` escapes half of a UTF-16 surrogate pair alone ("\ud800" not followed by a
// "\udc00" to "\udfff", or the second half first), which Boost.JSON calls a syntax error.
bool lone_surrogate(std::string_view text) {
  const auto unit = [&](std::size_t at) -> long {  // the \uXXXX at `at`, or -1
    if (at + 6 > text.size() || text[at] != '\\' || text[at + 1] != 'u') return -1;
    long value = -1;
    const auto [end, error] =
        std::from_chars(text.data() + at + 2, text.data() + at + 6, value, 16);
    return error == std::errc() && end == text.data() + at + 6 ? value : -1;
  };
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') in_string = !in_string;
    if (!in_string || text[i] != '\\') continue;
    const long u = unit(i);
    if (u >= 0xDC00 && u <= 0xDFFF) return true;
    if (u >= 0xD800 && u <= 0xDBFF) {
      const long low = unit(i + 6);
      if (low < 0xDC00 || low > 0xDFFF) return true;
      i += 6;
    }
    ++i;  // the escaped character: not a quote that ends the string
  }
  return false;
}

}  // namespace

Status Body::parse(std::string_view text, std::span<const std::string_view> allowed) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return Status::ok();
  boost::system::error_code error;
  document_ = json::parse(text, error, json::storage_ptr(&resource_));
  if (error) {
    // Boost.JSON calls a string that is not UTF-8 a syntax error.
    if (!valid_utf8(text)) return {Code::kInvalidArgument, "the body is not JSON: it is not UTF-8"};
    if (text.starts_with("\xEF\xBB\xBF")) {
      return {Code::kInvalidArgument, "the body is not JSON: it starts with a byte order mark"};
    }
    if (lone_surrogate(text)) {
      return {Code::kInvalidArgument,
              "the body is not JSON: a \\u escape of half a UTF-16 surrogate pair alone"};
    }
    return {Code::kInvalidArgument, "the body is not JSON: " + error.message()};
  }
  // The parser reads a number too large for a double (1e999) as infinity, which no field
  // accepts and whose serialisation is not JSON; and one too small as 0.
  if (any_double(document_, [](double d) { return !std::isfinite(d); })) {
    return {Code::kInvalidArgument, "a number in the request is out of range (beyond 1.8e308)"};
  }
  if (any_double(document_, [](double d) { return d == 0; }) && some_number_vanishes(text)) {
    return {Code::kInvalidArgument,
            "a number in the request is out of range (too small for a double: it would read as 0)"};
  }
  if (!document_.is_object()) return {Code::kInvalidArgument, "the body must be a JSON object"};
  return view(document_.as_object(), allowed);
}

Status Body::view(const json::object& fields, std::span<const std::string_view> allowed) {
  fields_ = &fields;
  for (const auto& field : *fields_) {
    bool known = false;
    for (const std::string_view name : allowed) known = known || name == field.key();
    if (known) continue;
    std::string names;
    for (const std::string_view name : allowed) {
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    return {Code::kInvalidArgument,
            "unknown field " + quoted_name(field.key()) +
                " (this endpoint takes: " + (names.empty() ? "nothing" : names) + ")"};
  }
  return Status::ok();
}

const json::value* Body::find(std::string_view name) const {
  return fields_ == nullptr ? nullptr : fields_->if_contains(name);
}

Result<std::optional<std::string>> Body::string(std::string_view name) const {
  const json::value* v = find(name);
  if (v == nullptr || v->is_null()) return std::optional<std::string>();
  if (!v->is_string()) return Status(Code::kInvalidArgument, std::string(name) + ": a string");
  return std::optional<std::string>(std::string(v->as_string()));
}

Result<std::optional<std::uint64_t>> Body::integer(std::string_view name, std::uint64_t max,
                                                   std::uint64_t min) const {
  const json::value* v = find(name);
  if (v == nullptr || v->is_null()) return std::optional<std::uint64_t>();
  std::uint64_t n = 0;
  bool ok = true;
  if (v->is_uint64()) {
    n = v->as_uint64();
  } else if (v->is_int64() && v->as_int64() >= 0) {
    n = static_cast<std::uint64_t>(v->as_int64());
  } else {
    ok = false;
  }
  if (!ok || n > max || n < min) {
    return Status(Code::kInvalidArgument, std::string(name) + ": an integer from " +
                                              std::to_string(min) + " to " + std::to_string(max));
  }
  return std::optional<std::uint64_t>(n);
}

Result<std::optional<Millis>> Body::duration(std::string_view name) const {
  const json::value* v = find(name);
  if (v == nullptr || v->is_null()) return std::optional<Millis>();
  if (v->is_string()) {
    auto parsed = parse_duration(v->as_string());
    if (!parsed.is_ok()) {
      return Status(Code::kInvalidArgument, std::string(name) + ": " + parsed.status().message());
    }
    return std::optional<Millis>(parsed.value());
  }
  constexpr std::uint64_t kMostMs = std::uint64_t{100} * 365 * 24 * 3600 * 1000;  // 100 years
  auto n = integer(name, kMostMs);
  if (!n.is_ok()) {
    const std::string why =
        why_not_count(*v, std::to_string(kMostMs) + " ms (100 years)", "milliseconds");
    return Status(Code::kInvalidArgument,
                  std::string(name) + ": " +
                      (why.empty() ? "a duration (\"48h\", \"1500ms\") or milliseconds" : why));
  }
  return std::optional<Millis>(Millis{static_cast<std::int64_t>(*n.value())});
}

Result<std::optional<std::int64_t>> Body::instant(std::string_view name) const {
  const json::value* v = find(name);
  if (v == nullptr || v->is_null()) return std::optional<std::int64_t>();
  if (v->is_string()) {
    auto parsed = parse_instant(v->as_string());
    if (!parsed.is_ok()) {
      return Status(Code::kInvalidArgument, std::string(name) + ": " + parsed.status().message());
    }
    return std::optional<std::int64_t>(parsed.value());
  }
  auto n = integer(name, static_cast<std::uint64_t>(kLastDueUnixMs));
  if (!n.is_ok()) {
    const std::string why = why_not_count(
        *v, std::to_string(kLastDueUnixMs) + " (" + format_instant(kLastDueUnixMs) + ")",
        "Unix milliseconds");
    return Status(
        Code::kInvalidArgument,
        std::string(name) + ": " + (why.empty() ? "an RFC 3339 time or Unix milliseconds" : why));
  }
  return std::optional<std::int64_t>(static_cast<std::int64_t>(*n.value()));
}

Result<bool> Body::boolean(std::string_view name) const {
  const json::value* v = find(name);
  if (v == nullptr || v->is_null()) return false;
  if (!v->is_bool()) return Status(Code::kInvalidArgument, std::string(name) + ": true or false");
  return v->as_bool();
}

Result<std::optional<std::vector<std::string>>> Body::strings(std::string_view name) const {
  using Strings = std::optional<std::vector<std::string>>;
  const json::value* v = find(name);
  if (v == nullptr || v->is_null()) return Strings();
  const Status bad(Code::kInvalidArgument, std::string(name) + ": a non-empty array of strings");
  if (!v->is_array() || v->as_array().empty()) return bad;
  std::vector<std::string> out;
  for (const json::value& item : v->as_array()) {
    if (!item.is_string()) return bad;
    out.emplace_back(item.as_string());
  }
  return Strings(std::move(out));
}

Result<JobFields> read_job_fields(const Body& body) {
  JobFields job;
  auto text = body.string("body");
  if (!text.is_ok()) return text.status();
  auto encoded = body.string("body_base64");
  if (!encoded.is_ok()) return encoded.status();
  if (text.value() && encoded.value()) {
    return Status(Code::kInvalidArgument, "give body or body_base64, not both");
  }
  if (encoded.value()) {
    auto decoded = base64_decode(*encoded.value());
    if (!decoded.is_ok()) {
      return Status(Code::kInvalidArgument, "body_base64: " + decoded.status().message());
    }
    job.body = std::move(decoded).value();
  } else if (text.value()) {
    job.body = std::move(*text.value());
  }
  auto priority = body.integer("priority", std::numeric_limits<std::uint32_t>::max());
  if (!priority.is_ok()) return priority.status();
  job.priority = static_cast<std::uint32_t>(priority.value().value_or(1024));
  auto ttr = body.duration("ttr");
  if (!ttr.is_ok()) return ttr.status();
  if (ttr.value()) {
    const std::int64_t seconds = (ttr.value()->count() + 999) / 1000;
    if (seconds > std::numeric_limits<std::uint32_t>::max()) {
      return Status(Code::kInvalidArgument, "ttr: at most 4294967295 s");
    }
    job.ttr = std::chrono::seconds{std::max<std::int64_t>(1, seconds)};
  }
  auto group = body.string("group");
  if (!group.is_ok()) return group.status();
  job.group = group.value().value_or("");
  auto url = body.string("url");
  if (!url.is_ok()) return url.status();
  if (url.value()) {
    if (auto parsed = webhook::parse_url(*url.value()); !parsed.is_ok()) {
      return Status(Code::kInvalidArgument, "url: " + parsed.status().message());
    }
    job.url = std::move(*url.value());
  }
  auto content_type = body.string("content_type");
  if (!content_type.is_ok()) return content_type.status();
  if (content_type.value()) {
    if (Status s = webhook::check_header_value("content_type", *content_type.value()); !s.is_ok()) {
      return s;
    }
    job.content_type = std::move(*content_type.value());
  }
  return job;
}

}  // namespace delayq::front::http
