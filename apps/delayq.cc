// delayq — the command-line tool: talks to delayqd's HTTP/JSON API (docs/http-api.md).
// `delayq --help` and `delayq <command> --help` list everything. Human output by default,
// the server's JSON with --json. The server is --server URL, else $DELAYQ_SERVER, else
// http://127.0.0.1:8080; $DELAYQ_TOKEN, if set, is sent as its bearer token. Exit status (also in
// --help): 0 done; 1 the server refused (the message says why); 2 bad usage, or the output cannot
// be written; 3 the server cannot be reached, or its answer is not delayqd's; 4 reserve found no
// job within its timeout.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <boost/asio/ssl/context.hpp>
#include <boost/json.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "front/http/client.h"
#include "front/http/text.h"
#include "whole_number.h"

namespace {

namespace json = boost::json;
using delayq::front::http::Client;
using delayq::front::http::ClientResponse;

constexpr int kExitRefused = 1;
constexpr int kExitUsage = 2;
constexpr int kExitUnreachable = 3;
constexpr int kExitNoJob = 4;

// How long an answer may take: a request's own time (a long-poll's timeout, a backup's copy)
// comes on top.
constexpr std::chrono::seconds kAnswerWait{30};

struct Options {
  std::string server;
  std::string ca_file;
  bool json_output = false;
  // put
  std::string tube = "default";
  std::string body;
  std::string in;
  std::string at;
  std::optional<std::uint32_t> priority;
  std::string ttr;
  std::string key;
  std::string group;
  bool replace = false;
  std::string debounce;  // with key: move the key's pending job instead (docs/flow-control.md)
  std::string max_wait;  // with debounce: never later than this after its first put
  // put-many
  std::string file = "-";
  // get, rm, reschedule
  std::uint64_t id = 0;
  // reserve
  std::vector<std::string> tubes;
  std::string timeout;
  // put, webhook set
  std::string url;
  std::string content_type;
  // webhook set (unset: the server's default)
  std::vector<std::string> headers;  // "Name: value"
  std::optional<std::uint32_t> max_attempts;
  std::string backoff_min;
  std::string backoff_max;
  std::optional<double> backoff_factor;
  std::optional<double> rate;
  std::optional<std::uint32_t> concurrency;
  std::vector<std::string> secrets;
  // admin backup
  std::string dir;
  // tube set (empty: unchanged; also --max-attempts)
  std::string group_concurrency;  // a whole number, or "off"
  std::string fair;               // "on" or "off"
  std::string group_rate;         // "<jobs>/<period>", or "off"
  std::optional<std::uint32_t> group_burst;
  std::vector<std::string> weights;  // "group=N"
  // schedule (--tube, --body, -p, --ttr, -g, --url, --content-type as put's)
  std::string name;
  std::string cron;
  std::string every;
  std::string tz;
  std::string start_at;
  std::string end_at;
  std::optional<std::uint32_t> limit;
  std::string jitter;
  std::string misfire;
  std::string max_lateness;
  std::string overlap;
  bool paused = false;
  std::optional<std::uint32_t> count;  // schedule next: how many; reserve: up to this many jobs
  std::string after;
};

// $DELAYQ_TOKEN, or nullptr when unset or empty (an empty one is no token).
const char* bearer_token() {
  const char* token = std::getenv("DELAYQ_TOKEN");
  return token != nullptr && *token != '\0' ? token : nullptr;
}

// Percent-encodes one path segment.
std::string segment(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// Text for a terminal: control characters (C0, DEL and C1) written as \xNN, so that a value
// cannot end the line early (printf stopped at a NUL), move the cursor or retitle the window.
// `lines` keeps line feeds and tabs (a body's lines). --json shows every byte as sent.
std::string shown(std::string_view text, bool lines = false) {
  std::string out;
  out.reserve(text.size());
  const auto escape = [&out](unsigned char u) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    out += "\\x";
    out += kHex[u >> 4];
    out += kHex[u & 15];
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0U;
    if (lines && (u == '\n' || u == '\t')) {
      out += text[i];
    } else if (u < 0x20 || u == 0x7F) {
      escape(u);
    } else if (u == 0xC2 && next >= 0x80 && next <= 0x9F) {  // U+0080 to U+009F in UTF-8
      escape(next);
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

// A field of an answer as text to print (shown()).
std::string field(const json::object& o, std::string_view name, bool lines = false) {
  const json::value* v = o.if_contains(name);
  if (v == nullptr) return "";
  if (v->is_string()) return shown(v->as_string(), lines);
  return delayq::front::http::to_text(*v);
}

void print_job(const json::object& job) {
  // Read first: an answer of another shape throws before anything is printed.
  const auto ttr_s = static_cast<long long>(job.at("ttr_ms").to_number<std::int64_t>() / 1000);
  std::printf("job %s  %s in tube %s, priority %s\n", field(job, "id").c_str(),
              field(job, "state").c_str(), field(job, "tube").c_str(),
              field(job, "priority").c_str());
  std::printf("  due       %s\n", field(job, "due").c_str());
  if (job.contains("reserved_until")) {
    std::printf("  reserved  until %s\n", field(job, "reserved_until").c_str());
  }
  if (job.contains("key")) std::printf("  key       %s\n", field(job, "key").c_str());
  if (job.contains("group")) std::printf("  group     %s\n", field(job, "group").c_str());
  if (job.contains("url")) std::printf("  url       %s\n", field(job, "url").c_str());
  if (job.contains("content_type")) {
    std::printf("  type      %s\n", field(job, "content_type").c_str());
  }
  std::printf("  ttr       %lld s\n", ttr_s);
  // What happened to it so far, where anything did: a push delivery's failures above all.
  if (const json::value* c = job.if_contains("counters"); c != nullptr && c->is_object()) {
    std::string counts;
    for (const auto& [name, count] : c->as_object()) {
      if (count.is_number() && count.to_number<std::int64_t>() != 0) {
        counts += (counts.empty() ? "" : ", ") + std::string(name) + " " +
                  delayq::front::http::to_text(count);
      }
    }
    if (!counts.empty()) std::printf("  counters  %s\n", counts.c_str());
  }
  if (job.contains("last_error")) {
    std::printf("  last try  %s (status %s) at %s\n", field(job, "last_error").c_str(),
                field(job, "last_status").c_str(), field(job, "last_attempt").c_str());
  }
  if (job.contains("body")) std::printf("  body      %s\n", field(job, "body", true).c_str());
  if (job.contains("body_base64")) {
    std::printf("  body      (base64) %s\n", field(job, "body_base64").c_str());
  }
}

// A count the API gives as a number, 0 meaning none: "off" then.
std::string or_off(const json::object& o, std::string_view name) {
  const std::string text = field(o, name);
  return text.empty() || text == "0" || text == "null" ? "off" : text;
}

// A tube's flow control settings (docs/flow-control.md), as PATCH and GET /v1/tubes/{tube}
// give them.
void print_flow(const json::object& o) {
  std::printf("  group concurrency  %s\n", or_off(o, "group_concurrency").c_str());
  std::printf("  fair               %s\n", field(o, "fair") == "true" ? "on" : "off");
  const std::string rate = or_off(o, "group_rate");
  std::printf("  group rate         %s\n",
              rate == "off" ? "off" : (rate + ", burst " + field(o, "group_burst")).c_str());
  std::string weights;
  if (const json::value* w = o.if_contains("group_weights"); w != nullptr && w->is_object()) {
    for (const auto& [group, weight] : w->as_object()) {
      weights +=
          (weights.empty() ? "" : ", ") + shown(group) + "=" + delayq::front::http::to_text(weight);
    }
  }
  std::printf("  group weights      %s\n", weights.empty() ? "none" : weights.c_str());
}

void print_tube(const json::object& t) {
  std::printf("tube %s\n", field(t, "name").c_str());
  std::printf("  jobs               %s ready (%s urgent), %s delayed, %s reserved, %s buried\n",
              field(t, "ready").c_str(), field(t, "urgent").c_str(), field(t, "delayed").c_str(),
              field(t, "reserved").c_str(), field(t, "buried").c_str());
  std::printf("  since the start    %s put, %s deleted\n", field(t, "total_jobs").c_str(),
              field(t, "deletes").c_str());
  std::printf("  workers            %s waiting, %s watching, %s using\n",
              field(t, "waiting").c_str(), field(t, "watching").c_str(), field(t, "using").c_str());
  const std::int64_t left_ms = t.at("pause_left_ms").to_number<std::int64_t>();
  std::printf("  paused             %s\n",
              left_ms > 0 ? (std::to_string((left_ms + 999) / 1000) + " s left").c_str() : "no");
  if (field(t, "ready") != "0") {
    std::printf("  oldest ready       %s ms\n", field(t, "oldest_ready_age_ms").c_str());
  }
  std::printf("  max attempts       %s\n", or_off(t, "max_attempts").c_str());
  print_flow(t);
  std::printf("  groups             %s held, %s ready\n", field(t, "groups_held").c_str(),
              field(t, "groups_ready").c_str());
}

// An instant as the API takes it: 13 digits or more are Unix milliseconds (a number: every time
// from 2001-09-09 to 2286), anything else RFC 3339 (a string; the server refuses a date written
// without its separators, "20261124", rather than take it for milliseconds of 1970).
json::value instant_of(const std::string& text) {
  std::int64_t unix_ms = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), unix_ms);
  if (error == std::errc{} && end == text.data() + text.size() && text.size() >= 13) {
    return unix_ms;
  }
  return json::value(text);
}

class Cli {
 public:
  explicit Cli(Options& options) : o_(options) {}

  // Sends one request and waits `wait` at most for its answer; prints the error and returns its
  // exit code if it failed, else nullopt with `out` holding the answer (a JSON object, or none:
  // 204).
  std::optional<int> call(std::string_view method, const std::string& target,
                          const json::object* body, ClientResponse& out,
                          std::chrono::milliseconds wait = kAnswerWait) {
    // What the server would refuse as "not JSON" (a string that is not UTF-8, a number that is
    // not finite) is bad usage, said as such.
    if (body != nullptr) {
      if (auto bad = unsendable(*body)) {
        std::fprintf(stderr, "delayq: %s\n", bad->c_str());
        return kExitUsage;
      }
    }
    if (!client_) {
      auto made = Client::connect_to(o_.server);
      if (!made.is_ok()) {
        std::fprintf(stderr, "delayq: %s\n", made.status().message().c_str());
        return kExitUsage;
      }
      client_ = std::move(made).value();
      if (const char* token = bearer_token()) {
        // Sent in a header: a control character (a line break read from a file) would end it.
        if (std::any_of(token, token + std::strlen(token),
                        [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
          std::fprintf(stderr, "delayq: $DELAYQ_TOKEN holds a control character (a line break?)\n");
          return kExitUsage;
        }
        client_->set_token(token);
      }
      if (!o_.ca_file.empty()) client_->set_ca_file(o_.ca_file);
    }
    auto response = client_->request(method, target, body ? json::serialize(*body) : "", wait);
    if (!response.is_ok()) {
      std::fprintf(stderr, "delayq: cannot reach %s: %s\n", o_.server.c_str(),
                   response.status().message().c_str());
      return kExitUnreachable;
    }
    out = std::move(response).value();
    boost::system::error_code error;
    const json::value v = out.body.empty() ? json::value() : json::parse(out.body, error);
    if (out.status >= 400) {
      const json::value* e = !error && v.is_object() ? v.as_object().if_contains("error") : nullptr;
      if (e == nullptr || !e->is_object()) {
        // Not delayqd's error (a proxy's, another server's): the address is what is wrong.
        std::fprintf(stderr,
                     "delayq: %s answered HTTP %u without delayqd's error object: is it "
                     "delayqd?\n",
                     o_.server.c_str(), out.status);
        return kExitUnreachable;
      }
      std::fprintf(stderr, "delayq: %s: %s\n", field(e->as_object(), "code").c_str(),
                   field(e->as_object(), "message").c_str());
      if (out.status == 401) {
        std::fprintf(stderr, "delayq: %s\n",
                     bearer_token() == nullptr ? "set $DELAYQ_TOKEN to one of the server's tokens"
                                               : "$DELAYQ_TOKEN is not one of the server's tokens");
      }
      return kExitRefused;
    }
    // Every answer of delayqd's API the tool asks for is a JSON object, or no body (204).
    if (out.status < 200 || out.status >= 300 || error ||
        (out.body.empty() ? out.status != 204 : !v.is_object())) {
      std::fprintf(stderr,
                   "delayq: %s answered HTTP %u without the JSON object expected: is it delayqd?\n",
                   o_.server.c_str(), out.status);
      return kExitUnreachable;
    }
    return std::nullopt;
  }

  // Why `body` cannot be sent as JSON (a string that is not UTF-8, a number that is not finite),
  // or nullopt.
  static std::optional<std::string> unsendable(const json::value& value,
                                               std::string_view name = {}) {
    const std::string where = name.empty() ? "" : std::string(name) + ": ";
    if (value.is_string() && !delayq::front::http::valid_utf8(value.as_string())) {
      return where + "a value is not UTF-8 text";
    }
    if (value.is_double() && !std::isfinite(value.as_double())) {
      return where + "a number is too large, or not a number";
    }
    if (value.is_array()) {
      for (const auto& item : value.as_array()) {
        if (auto bad = unsendable(item, name)) return bad;
      }
    }
    if (value.is_object()) {
      for (const auto& [field_name, item] : value.as_object()) {
        if (!delayq::front::http::valid_utf8(field_name)) return where + "a name is not UTF-8 text";
        if (auto bad = unsendable(item, name.empty() ? std::string_view(field_name) : name)) {
          return bad;
        }
      }
    }
    return std::nullopt;
  }

  // Runs a request whose answer is one job (or an object) and prints it.
  // A DELETE's answer is what it removed: `removed` says so first ("webhook removed:").
  int show(std::string_view method, const std::string& target, const json::object* body, bool job,
           std::chrono::milliseconds wait = kAnswerWait, std::string_view removed = {}) {
    ClientResponse response;
    if (auto failed = call(method, target, body, response, wait)) return *failed;
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
      return 0;
    }
    const json::object o = json::parse(response.body).as_object();
    if (!removed.empty()) std::printf("%s removed:\n", std::string(removed).c_str());
    if (job) {
      print_job(o);
    } else {
      for (const auto& [name, value] : o) {
        std::printf("%s: %s\n", shown(name).c_str(),
                    value.is_string() ? shown(value.as_string()).c_str()
                                      : delayq::front::http::to_text(value).c_str());
      }
    }
    return 0;
  }

  std::string job_target() const {
    if (!o_.key.empty()) return "/v1/tubes/" + segment(o_.tube) + "/keys/" + segment(o_.key);
    return "/v1/jobs/" + std::to_string(o_.id);
  }
  int need_id_or_key() const {
    if (o_.id == 0 && o_.key.empty()) {
      std::fprintf(stderr, "delayq: give a job id, or --key (and --tube)\n");
      return kExitUsage;
    }
    return 0;
  }

  // put-many [FILE]: a job per line of JSON lines (FILE, or stdin for '-'), each an object of
  // the fields of POST /v1/jobs's jobs ("tube", default --tube, "body", "delay", ...), sent in
  // batches (at most 1000 jobs and 512 KiB a request). Every line is read and checked first: one
  // that is not a JSON object sends nothing. Each job's outcome is printed on a line of its
  // own, in the order of the input; any refused makes the exit status kExitRefused.
  int put_many() {
    std::FILE* input = o_.file == "-" ? stdin : std::fopen(o_.file.c_str(), "rb");
    if (input == nullptr) {
      std::fprintf(stderr, "delayq: cannot read %s: %s\n", o_.file.c_str(), std::strerror(errno));
      return kExitUsage;
    }
    std::string text;
    char chunk[65536];
    std::size_t n = 0;
    while ((n = std::fread(chunk, 1, sizeof chunk, input)) > 0) text.append(chunk, n);
    const bool unread = std::ferror(input) != 0;
    if (input != stdin) std::fclose(input);
    if (unread) {
      std::fprintf(stderr, "delayq: cannot read %s\n", o_.file == "-" ? "stdin" : o_.file.c_str());
      return kExitUsage;
    }
    std::vector<std::pair<std::size_t, json::object>> jobs;  // line number, job
    std::size_t line_no = 0;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      const std::string_view line = std::string_view(text).substr(at, end - at);
      at = end + 1;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      boost::system::error_code error;
      json::value job = json::parse(line, error);
      if (error || !job.is_object()) {
        std::fprintf(stderr, "delayq: line %zu is not a JSON object%s%s: nothing was put\n",
                     line_no, error ? ": " : "", error ? error.message().c_str() : "");
        return kExitUsage;
      }
      if (!job.as_object().contains("tube")) job.as_object()["tube"] = o_.tube;
      jobs.emplace_back(line_no, std::move(job).as_object());
    }
    std::size_t put = 0, held = 0, refused = 0;
    for (std::size_t first = 0; first < jobs.size();) {
      json::array batch;
      std::size_t bytes = 0;
      std::size_t last = first;
      for (; last < jobs.size() && batch.size() < 1000; ++last) {
        const std::size_t size = json::serialize(jobs[last].second).size() + 1;
        if (!batch.empty() && bytes + size > (std::size_t{512} << 10)) break;
        bytes += size;
        batch.push_back(jobs[last].second);
      }
      json::object body;
      body["jobs"] = std::move(batch);
      ClientResponse response;
      if (auto failed = call("POST", "/v1/jobs", &body, response)) return *failed;
      const json::value answer = json::parse(response.body);
      const json::array& entries = answer.at("jobs").as_array();
      for (std::size_t i = 0; i < entries.size() && first + i < last; ++i) {
        const json::object& entry = entries[i].as_object();
        const std::size_t line = jobs[first + i].first;
        const auto status = entry.at("status").to_number<int>();
        if (o_.json_output) {
          json::object shown = entry;
          shown["line"] = line;
          std::printf("%s\n", json::serialize(shown).c_str());
        } else if (const json::value* job = entry.if_contains("job")) {
          const json::object& j = job->as_object();
          std::printf("line %zu: job %s %s in tube %s%s\n", line, field(j, "id").c_str(),
                      field(j, "state").c_str(), field(j, "tube").c_str(),
                      status == 200 ? " (its key was held: nothing new)" : "");
        } else {
          const json::object& e = entry.at("error").as_object();
          std::printf("line %zu: refused, %d %s: %s\n", line, status, field(e, "code").c_str(),
                      field(e, "message").c_str());
        }
        if (status == 201) {
          ++put;
        } else if (status == 200) {
          ++held;
        } else {
          ++refused;
        }
      }
      first = last;
    }
    if (!o_.json_output) {
      std::printf("%zu put, %zu held by their key already, %zu refused\n", put, held, refused);
    }
    return refused == 0 ? 0 : kExitRefused;
  }

  int put() {
    json::object body;
    if (o_.body == "-") {
      // A read that fails (stdin closed, a directory) is not an empty body.
      errno = 0;
      o_.body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      if (std::cin.bad() || std::ferror(stdin) != 0) {
        std::fprintf(stderr, "delayq: cannot read the body from stdin%s%s\n",
                     errno != 0 ? ": " : "", errno != 0 ? std::strerror(errno) : "");
        return kExitUsage;
      }
    }
    if (delayq::front::http::valid_utf8(o_.body)) {
      body["body"] = o_.body;
    } else {  // bytes that are not text travel as base64
      body["body_base64"] = delayq::front::http::base64_encode(o_.body);
    }
    if (!o_.in.empty()) body["delay"] = o_.in;
    if (!o_.at.empty()) body["at"] = instant_of(o_.at);
    if (o_.priority) body["priority"] = *o_.priority;
    if (!o_.ttr.empty()) body["ttr"] = o_.ttr;
    if (!o_.key.empty()) body["key"] = o_.key;
    if (!o_.group.empty()) body["group"] = o_.group;
    if (o_.replace) body["replace"] = true;
    if (!o_.debounce.empty()) body["debounce"] = o_.debounce;
    if (!o_.max_wait.empty()) body["max_wait"] = o_.max_wait;
    if (!o_.url.empty()) body["url"] = o_.url;
    if (!o_.content_type.empty()) body["content_type"] = o_.content_type;
    ClientResponse response;
    if (auto failed = call("POST", "/v1/tubes/" + segment(o_.tube) + "/jobs", &body, response)) {
      return *failed;
    }
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
      return 0;
    }
    const json::object job = json::parse(response.body).as_object();
    // A debounce moved the job already holding the key: no new job, and its first put stays.
    if (const json::value* d = job.if_contains("debounced");
        d != nullptr && d->is_bool() && d->as_bool()) {
      std::printf("job %s debounced (first put %s)\n", field(job, "id").c_str(),
                  field(job, "created").c_str());
    } else if (response.status == 200) {
      // 200, not 201: the job holding the key is shown, and this put changed nothing.
      std::printf(
          "job %s holds key %s already: nothing changed (--replace or --debounce to "
          "change it)\n",
          field(job, "id").c_str(), shown(o_.key).c_str());
    }
    print_job(job);
    return 0;
  }
  int get() {
    if (int bad = need_id_or_key()) return bad;
    return show("GET", job_target(), nullptr, true);
  }
  int rm() {
    if (int bad = need_id_or_key()) return bad;
    return show("DELETE", job_target(), nullptr, false);
  }
  int reschedule() {
    if (int bad = need_id_or_key()) return bad;
    json::object body;
    if (!o_.in.empty()) body["delay"] = o_.in;
    if (!o_.at.empty()) body["at"] = instant_of(o_.at);
    if (o_.priority) body["priority"] = *o_.priority;
    if (body.empty()) {
      std::fprintf(stderr, "delayq: give --in, --at or --priority\n");
      return kExitUsage;
    }
    return show("PATCH", job_target(), &body, true);
  }
  int reserve() {
    json::object body;
    json::array tubes;
    for (const std::string& tube : o_.tubes) tubes.emplace_back(tube);
    if (!tubes.empty()) body["tubes"] = std::move(tubes);
    if (!o_.timeout.empty()) body["timeout"] = o_.timeout;
    if (o_.count) body["count"] = *o_.count;
    // Say what a wait is for, where nobody reads it as output (a timeout that is not a duration
    // is the server's to refuse, with no wait).
    const auto wait = delayq::front::http::parse_duration(o_.timeout.empty() ? "0" : o_.timeout);
    // (Over an hour, the server refuses it at once: no wait to announce.)
    if (wait.is_ok() && wait.value().count() > 0 && wait.value() <= std::chrono::hours(1) &&
        !o_.json_output) {
      std::string tubes_text;
      for (const std::string& tube : o_.tubes)
        tubes_text += (tubes_text.empty() ? "" : ", ") + tube;
      if (tubes_text.empty()) tubes_text = "default";
      std::fprintf(stderr, "delayq: waiting up to %s for a ready job in tube%s %s\n",
                   o_.timeout.c_str(), o_.tubes.size() > 1 ? "s" : "", tubes_text.c_str());
    }
    ClientResponse response;
    // The server holds a long-poll for its timeout (an hour at most): a timeout it will refuse
    // is answered at once.
    const auto held = wait.is_ok() ? wait.value() : std::chrono::milliseconds{0};
    if (auto failed = call("POST", "/v1/reserve", &body, response, kAnswerWait + held)) {
      return *failed;
    }
    if (response.status == 204) {
      std::fprintf(stderr, "delayq: no job within the timeout\n");
      return kExitNoJob;
    }
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
    } else if (o_.count) {  // {"jobs": [...]}: each job, a blank line between
      const json::value answer = json::parse(response.body);
      const json::array& jobs = answer.as_object().at("jobs").as_array();
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (i > 0) std::fputs("\n", stdout);
        print_job(jobs[i].as_object());
      }
    } else {
      print_job(json::parse(response.body).as_object());
    }
    return 0;
  }
  int ls() {
    ClientResponse response;
    if (auto failed = call("GET", "/v1/tubes", nullptr, response)) return *failed;
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
      return 0;
    }
    const json::value parsed = json::parse(response.body);
    const auto& tubes = parsed.as_object().at("tubes").as_array();
    // The names' column as wide as the longest (24 at least), so that the counts line up.
    int width = 24;
    for (const auto& t : tubes) {
      width = std::max(width, static_cast<int>(field(t.as_object(), "name").size()));
    }
    std::printf("%-*s %9s %9s %9s %9s %9s\n", width, "TUBE", "READY", "DELAYED", "RESERVED",
                "BURIED", "WAITING");
    for (const auto& t : tubes) {
      const auto& o = t.as_object();
      std::printf("%-*s %9s %9s %9s %9s %9s\n", width, field(o, "name").c_str(),
                  field(o, "ready").c_str(), field(o, "delayed").c_str(),
                  field(o, "reserved").c_str(), field(o, "buried").c_str(),
                  field(o, "waiting").c_str());
    }
    return 0;
  }
  int stats() { return show("GET", "/v1/stats", nullptr, false); }
  // Delayed jobs by due time, between edges given as durations from now ("0s,1m,1h,1d,7d").
  int due() {
    ClientResponse response;
    const std::string target =
        (o_.tube.empty() ? std::string("/v1/due") : "/v1/tubes/" + segment(o_.tube) + "/due") +
        "?in=" + segment(o_.in);
    if (auto failed = call("GET", target, nullptr, response)) return *failed;
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
      return 0;
    }
    std::vector<std::string> edges;
    for (std::size_t start = 0; start <= o_.in.size();) {
      const std::size_t comma = std::min(o_.in.find(',', start), o_.in.size());
      const std::string edge = o_.in.substr(start, comma - start);
      const auto zero = delayq::front::http::parse_duration(edge);
      edges.push_back(zero.is_ok() && zero.value().count() == 0 ? "now" : edge);
      start = comma + 1;
    }
    const json::value parsed = json::parse(response.body);
    const auto& buckets = parsed.as_object().at("buckets").as_array();
    std::printf("%-22s %-26s %12s\n", "DUE", "FROM (UTC, whole minutes)", "JOBS");
    for (std::size_t i = 0; i < buckets.size() && i <= edges.size(); ++i) {
      const auto& b = buckets[i].as_object();
      const std::string when = i == 0              ? "before " + edges[0]
                               : i == edges.size() ? edges[i - 1] + " and later"
                                                   : edges[i - 1] + " to " + edges[i];
      const std::string from =
          b.at("from_unix_ms").is_null()
              ? std::string()
              : delayq::front::http::format_instant(b.at("from_unix_ms").to_number<std::int64_t>());
      std::printf("%-22s %-26s %12s\n", when.c_str(), from.c_str(), field(b, "jobs").c_str());
    }
    return 0;
  }
  int backup() {
    // The directory is the server's; a relative one is taken from here, for a server on this
    // machine.
    std::error_code error;
    const std::filesystem::path dir = std::filesystem::absolute(o_.dir, error);
    json::object body;
    body["dir"] = error ? o_.dir : dir.string();
    if (!o_.json_output) {
      std::fprintf(stderr, "delayq: waiting for the server to copy its data into %s\n",
                   body["dir"].as_string().c_str());
    }
    // A copy of a large store takes a while.
    return show("POST", "/v1/admin/backup", &body, false, std::chrono::hours(1) + kAnswerWait);
  }
  int group_ls() {
    ClientResponse response;
    const std::string target = "/v1/tubes/" + segment(o_.tube) + "/groups/" + segment(o_.group);
    if (auto failed = call("GET", target, nullptr, response)) return *failed;
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
      return 0;
    }
    const json::value parsed = json::parse(response.body);
    const auto& jobs = parsed.as_object().at("jobs").as_array();
    std::printf("%zu job%s in group %s of tube %s\n", jobs.size(), jobs.size() == 1 ? "" : "s",
                shown(o_.group).c_str(), shown(o_.tube).c_str());
    for (const auto& job : jobs) {
      const auto& o = job.as_object();
      std::printf("  job %-10s %-9s due %s\n", field(o, "id").c_str(), field(o, "state").c_str(),
                  field(o, "due").c_str());
    }
    return 0;
  }
  std::string webhook_target() const { return "/v1/tubes/" + segment(o_.tube) + "/webhook"; }
  int webhook_set() {
    json::object body;
    body["url"] = o_.url;
    json::object headers;
    for (const std::string& header : o_.headers) {
      const auto colon = header.find(':');
      if (colon == std::string::npos || colon == 0) {
        std::fprintf(stderr, "delayq: --header wants 'Name: value', not '%s'\n", header.c_str());
        return kExitUsage;
      }
      const auto value = header.find_first_not_of(' ', colon + 1);
      headers[header.substr(0, colon)] =
          value == std::string::npos ? std::string() : header.substr(value);
    }
    if (!headers.empty()) body["headers"] = std::move(headers);
    if (!o_.timeout.empty()) body["timeout"] = o_.timeout;
    if (o_.max_attempts) body["max_attempts"] = *o_.max_attempts;
    json::object backoff;
    if (!o_.backoff_min.empty()) backoff["min"] = o_.backoff_min;
    if (!o_.backoff_max.empty()) backoff["max"] = o_.backoff_max;
    if (o_.backoff_factor) backoff["factor"] = *o_.backoff_factor;
    if (!backoff.empty()) body["backoff"] = std::move(backoff);
    if (o_.rate) body["rate"] = *o_.rate;
    if (o_.concurrency) body["concurrency"] = *o_.concurrency;
    if (!o_.secrets.empty()) {
      json::array secrets;
      for (const std::string& secret : o_.secrets) secrets.emplace_back(secret);
      body["secrets"] = std::move(secrets);
    }
    return show("PUT", webhook_target(), &body, false);
  }
  int webhook_get() { return show("GET", webhook_target(), nullptr, false); }
  int webhook_rm() {
    return show("DELETE", webhook_target(), nullptr, false, kAnswerWait, "webhook");
  }

  // --- schedules (docs/schedules.md)
  std::string schedule_target(std::string_view tail = {}) const {
    return "/v1/schedules/" + segment(o_.name) + std::string(tail);
  }
  int schedule_set() {
    json::object body;
    body["tube"] = o_.tube;
    if (!o_.cron.empty()) body["cron"] = o_.cron;
    if (!o_.every.empty()) body["every"] = o_.every;
    if (!o_.tz.empty()) body["tz"] = o_.tz;
    if (delayq::front::http::valid_utf8(o_.body)) {
      body["body"] = o_.body;
    } else {
      body["body_base64"] = delayq::front::http::base64_encode(o_.body);
    }
    if (o_.priority) body["priority"] = *o_.priority;
    if (!o_.ttr.empty()) body["ttr"] = o_.ttr;
    if (!o_.group.empty()) body["group"] = o_.group;
    if (!o_.url.empty()) body["url"] = o_.url;
    if (!o_.content_type.empty()) body["content_type"] = o_.content_type;
    if (!o_.start_at.empty()) body["start_at"] = instant_of(o_.start_at);
    if (!o_.end_at.empty()) body["end_at"] = instant_of(o_.end_at);
    if (o_.limit) body["limit"] = *o_.limit;
    if (!o_.jitter.empty()) body["jitter"] = o_.jitter;
    if (!o_.misfire.empty()) body["misfire"] = o_.misfire;
    if (!o_.max_lateness.empty()) body["max_lateness"] = o_.max_lateness;
    if (!o_.overlap.empty()) body["overlap"] = o_.overlap;
    if (o_.paused) body["paused"] = true;
    return show("PUT", schedule_target(), &body, false);
  }
  int schedule_ls() {
    ClientResponse response;
    if (auto failed = call("GET", "/v1/schedules?limit=1000", nullptr, response)) return *failed;
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
      return 0;
    }
    const json::value parsed = json::parse(response.body);
    // Each text column as wide as its longest value (at least its usual width), so that a long
    // name or cron does not push the rest of its row out of line.
    std::vector<std::array<std::string, 6>> rows;
    std::array<int, 4> width = {24, 16, 22, 30};
    for (const auto& s : parsed.as_object().at("schedules").as_array()) {
      const auto& o = s.as_object();
      const std::string when = o.contains("cron") ? field(o, "cron") + " " + field(o, "tz")
                                                  : "every " + field(o, "every");
      const std::string next = o.at("next").is_null() ? (o.at("paused").as_bool() ? "paused" : "-")
                                                      : field(o.at("next").as_object(), "at");
      rows.push_back(
          {field(o, "name"), field(o, "tube"), when, next, field(o, "runs"), field(o, "misfires")});
      for (std::size_t i = 0; i < width.size(); ++i) {
        width[i] = std::max(width[i], static_cast<int>(rows.back()[i].size()));
      }
    }
    std::printf("%-*s %-*s %-*s %-*s %7s %8s\n", width[0], "SCHEDULE", width[1], "TUBE", width[2],
                "WHEN", width[3], "NEXT", "RUNS", "MISSED");
    for (const auto& row : rows) {
      std::printf("%-*s %-*s %-*s %-*s %7s %8s\n", width[0], row[0].c_str(), width[1],
                  row[1].c_str(), width[2], row[2].c_str(), width[3], row[3].c_str(),
                  row[4].c_str(), row[5].c_str());
    }
    if (parsed.as_object().at("more").as_bool()) std::printf("(the first 1000 only)\n");
    return 0;
  }
  int schedule_next() {
    std::string target = schedule_target("/next?count=" + std::to_string(o_.count.value_or(10)));
    if (!o_.after.empty()) target += "&after=" + segment(o_.after);
    ClientResponse response;
    if (auto failed = call("GET", target, nullptr, response)) return *failed;
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
      return 0;
    }
    const json::value parsed = json::parse(response.body);
    for (const auto& run : parsed.as_object().at("runs").as_array()) {
      std::printf("%s\n", field(run.as_object(), "at").c_str());
    }
    return 0;
  }
  int schedule_show(std::string_view method, std::string_view tail = {}) {
    return show(method, schedule_target(tail), nullptr, false, kAnswerWait,
                method == "DELETE" ? "schedule" : "");
  }
  int schedule_trigger() { return show("POST", schedule_target("/trigger"), nullptr, true); }

  // --- a tube's settings (docs/flow-control.md)
  // The PATCH body of `tube set`'s options; an exit code when one is malformed. The values'
  // ranges are the server's to check.
  std::optional<int> tube_change(json::object& body) const {
    if (!o_.group_concurrency.empty()) {
      if (o_.group_concurrency == "off") {
        body["group_concurrency"] = nullptr;
      } else if (auto n = whole(o_.group_concurrency)) {
        body["group_concurrency"] = *n;
      } else {
        return usage("--group-concurrency wants a number or off, not '" + o_.group_concurrency +
                     "'");
      }
    }
    if (!o_.fair.empty()) body["fair"] = o_.fair == "on";
    if (!o_.group_rate.empty()) {
      if (o_.group_rate == "off") {
        body["group_rate"] = nullptr;
      } else {
        body["group_rate"] = o_.group_rate;
      }
    }
    if (o_.group_burst) body["group_burst"] = *o_.group_burst;
    json::object weights;
    for (const std::string& weight : o_.weights) {
      // The last '=': a group's name may hold one, a weight never does.
      const auto equals = weight.rfind('=');
      const auto n = equals == std::string::npos ? std::nullopt : whole(weight.substr(equals + 1));
      if (equals == 0 || !n) return usage("--weight wants group=N, not '" + weight + "'");
      weights[weight.substr(0, equals)] = *n;
    }
    if (!weights.empty()) body["group_weights"] = std::move(weights);
    if (o_.max_attempts) body["max_attempts"] = *o_.max_attempts;
    if (body.empty()) {
      return usage(
          "give one or more of --group-concurrency, --fair, --group-rate, --group-burst, "
          "--weight, --max-attempts");
    }
    return std::nullopt;
  }
  int tube_set() {
    json::object body;
    if (auto bad = tube_change(body)) return *bad;
    ClientResponse response;
    if (auto failed = call("PATCH", "/v1/tubes/" + segment(o_.tube), &body, response)) {
      return *failed;
    }
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
      return 0;
    }
    // The answer has the flow settings only if some were given, max_attempts only if given.
    const json::object o = json::parse(response.body).as_object();
    std::printf("tube %s\n", field(o, "tube").c_str());
    if (o.contains("group_concurrency")) print_flow(o);
    if (o.contains("max_attempts")) {
      std::printf("  max attempts       %s\n", or_off(o, "max_attempts").c_str());
    }
    return 0;
  }
  int tube_show() {
    ClientResponse response;
    if (auto failed = call("GET", "/v1/tubes/" + segment(o_.tube), nullptr, response)) {
      // A tube with settings and no jobs: the settings are kept, the tube is not there to show.
      if (*failed == kExitRefused && response.status == 404) {
        std::fprintf(stderr,
                     "delayq: a tube exists while it holds jobs or a client uses or watches it; "
                     "settings given by tube set are kept meanwhile\n");
      }
      return *failed;
    }
    if (o_.json_output) {
      std::fputs(response.body.c_str(), stdout);
    } else {
      print_tube(json::parse(response.body).as_object());
    }
    return 0;
  }

  int group_rm() {
    return show("DELETE", "/v1/tubes/" + segment(o_.tube) + "/groups/" + segment(o_.group), nullptr,
                false);
  }

 private:
  static std::optional<std::uint64_t> whole(std::string_view text) {
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc{} || end != text.data() + text.size()) {
      return std::nullopt;
    }
    return value;
  }
  static int usage(const std::string& message) {
    std::fprintf(stderr, "delayq: %s\n", message.c_str());
    return kExitUsage;
  }

  Options& o_;
  std::unique_ptr<Client> client_;
};

// Whether `text` is digits alone (and not empty).
bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace

int main(int argc, char** argv) {
  // A tube or a group is named by 1 byte at least (an empty one made a path of no route).
  const CLI::Validator kName(
      [](std::string& name) { return name.empty() ? std::string("an empty name") : std::string(); },
      "NAME");
  // A duration says its unit: the API reads a bare number as milliseconds, which "--in 30" is
  // seldom meant to be. A bare 0 is the same in every unit. Lists ("0s,1m") are checked each.
  // Every duration option takes this check.
  const CLI::Validator kDuration(
      [](std::string& text) {
        for (std::size_t start = 0; start <= text.size();) {
          const std::size_t end = std::min(text.find(',', start), text.size());
          const std::string_view item = std::string_view(text).substr(start, end - start);
          if (item.empty()) return std::string("an empty duration");
          if (all_digits(item) && item.find_first_not_of('0') != std::string_view::npos) {
            return "a duration needs its unit: " + std::string(item) + "s, " + std::string(item) +
                   "m or " + std::string(item) + "ms";
          }
          start = end + 1;
        }
        return std::string();
      },
      "DURATION");
  // An instant is RFC 3339, or Unix milliseconds of 13 digits or more (instant_of()): fewer
  // digits are a date written without its separators more often than a time in 1970-2001.
  const CLI::Validator kInstant(
      [](std::string& text) {
        if (all_digits(text) && text.size() < 13) {
          return "a time: RFC 3339 (2026-11-24T10:00:00Z), or Unix milliseconds (13 digits or "
                 "more); " +
                 text + " is neither";
        }
        return std::string();
      },
      "TIME");
  Options o;
  const char* env = std::getenv("DELAYQ_SERVER");
  o.server = env != nullptr && *env != '\0' ? env : "http://127.0.0.1:8080";

  CLI::App app{"delayq: schedule, inspect and run delayed jobs on a delayqd server"};
  // At most one command: a word that names none is then refused as such ("not expected"),
  // where requiring one said only that a command was required.
  app.require_subcommand(0, 1);
  app.fallthrough();  // --server, --json, --ca-file also after the command
  app.footer(
      "$DELAYQ_TOKEN, if set, is sent as the bearer token (--http-token-file on the server).\n"
      "Exit status: 0 done; 1 the server refused (the message says why); 2 bad usage, or the "
      "output\ncannot be written; 3 the server cannot be reached, or its answer is not delayqd's; "
      "4 reserve\nfound no job within its timeout.");
  app.set_version_flag("--version", "delayq " DELAYQ_VERSION);
  app.add_option("-s,--server", o.server,
                 "delayqd's HTTP address, http:// or https:// (or $DELAYQ_SERVER)")
      ->capture_default_str();
  if (const char* ca = std::getenv("DELAYQ_CA_FILE"); ca != nullptr) o.ca_file = ca;
  app.add_option("--ca-file", o.ca_file,
                 "https: trust the certificate authorities in this PEM file instead of the "
                 "system's (or $DELAYQ_CA_FILE)")
      ->check(CLI::ExistingFile);
  app.add_flag("--json", o.json_output, "print the server's JSON instead of text");

  auto* put = app.add_subcommand("put", "put a job (body '-' reads it from stdin)");
  put->add_option("body", o.body, "the job's body")->required();
  put->add_option("-t,--tube", o.tube, "tube")->capture_default_str()->check(kName);
  auto* in = put->add_option("--in", o.in, "delay: 48h, 10m, 1h30m, 1500ms")->check(kDuration);
  auto* at = put->add_option("--at", o.at,
                             "due time: RFC 3339, e.g. 2026-11-24T10:00:00Z, or Unix milliseconds")
                 ->excludes(in)
                 ->check(kInstant);
  // Priorities in digits, as the protocol writes them ("0x10" and "-1" are refused).
  const auto kPriority = delayq::apps::whole_number(0, UINT32_MAX).description("");
  put->add_option("-p,--priority", o.priority, "priority, 0 most urgent (default 1024)")
      ->check(kPriority)
      ->type_name("UINT");
  put->add_option("--ttr", o.ttr, "time to run once reserved, e.g. 60s (default 60s)")
      ->check(kDuration);
  auto* key =
      put->add_option("-k,--key", o.key, "business key, unique in the tube (idempotent put)");
  auto* replace =
      put->add_flag("--replace", o.replace, "with --key: replace the job holding the key")
          ->needs(key);
  put->add_option("-g,--group", o.group,
                  "group, to list or cancel jobs together, and for a tube's flow control")
      ->check(kName);
  auto* debounce = put->add_option(
      "--debounce", o.debounce,
      "with --key: move the key's pending job to this from now (new body), e.g. 10s");
  debounce->needs(key)->excludes(in)->excludes(at)->excludes(replace)->check(kDuration);
  put->add_option("--max-wait", o.max_wait,
                  "with --debounce: never later than this after the job's first put, e.g. 1m")
      ->needs(debounce)
      ->check(kDuration);
  put->add_option("--url", o.url, "push delivery: POST the job here, not to its tube's webhook");
  put->add_option("--content-type", o.content_type,
                  "push delivery: the body's Content-Type (default application/octet-stream)");

  auto* put_many = app.add_subcommand(
      "put-many", "put jobs from JSON lines, one job object per line (as POST /v1/jobs takes)");
  put_many->add_option("file", o.file, "the file, or '-' for stdin")->capture_default_str();
  put_many->add_option("-t,--tube", o.tube, "the tube of the lines that name none")
      ->capture_default_str()
      ->check(kName);

  auto add_job_ref = [&o, &kName](CLI::App* command) {
    // Ids are below 2^53 whatever the broker (JavaScript clients read them as doubles).
    auto* id = command->add_option("id", o.id, "job id")
                   ->check(delayq::apps::whole_number(1, (std::uint64_t{1} << 53) - 1));
    command->add_option("-k,--key", o.key, "find the job by key instead of id")->excludes(id);
    command->add_option("-t,--tube", o.tube, "the key's tube")->capture_default_str()->check(kName);
  };
  auto* get = app.add_subcommand("get", "show a job with its body");
  add_job_ref(get);
  auto* rm = app.add_subcommand("rm", "delete a job (or finish one reserved over HTTP)");
  add_job_ref(rm);
  auto* reschedule = app.add_subcommand("reschedule", "move a delayed or ready job");
  add_job_ref(reschedule);
  auto* rin =
      reschedule->add_option("--in", o.in, "new delay from now: 48h, 10m, 0")->check(kDuration);
  reschedule->add_option("--at", o.at, "new due time, RFC 3339 or Unix milliseconds")
      ->excludes(rin)
      ->check(kInstant);
  reschedule->add_option("-p,--priority", o.priority, "new priority")
      ->check(kPriority)
      ->type_name("UINT");

  auto* reserve = app.add_subcommand("reserve", "take the next ready job (long-poll)");
  reserve->add_option("-t,--tube", o.tubes, "tube to take from (repeat for several)")->check(kName);
  reserve->add_option("--timeout", o.timeout, "wait at most this long, e.g. 30s (default 0)")
      ->check(kDuration);
  reserve
      ->add_option("--count", o.count,
                   "take up to N jobs (1 to 100): the first as the wait ends, then those ready")
      ->check(CLI::Range(1, 100));

  auto* ls = app.add_subcommand("ls", "list tubes with their job counts");
  auto* stats = app.add_subcommand("stats", "server statistics");
  auto* due = app.add_subcommand("due", "delayed jobs by due time (one tube, or every tube)");
  due->add_option("tube", o.tube, "tube (default: every tube)")->check(kName);
  due->add_option("--in", o.in, "edges from now, comma-separated (default 0s,1m,1h,1d,7d)")
      ->check(kDuration);

  auto* group = app.add_subcommand("group", "jobs of a group");
  group->require_subcommand(1);
  auto* group_ls = group->add_subcommand("ls", "list a group's jobs");
  auto* group_rm = group->add_subcommand("rm", "cancel (delete) a group's jobs");
  for (CLI::App* command : {group_ls, group_rm}) {
    command->add_option("group", o.group, "group")->required()->check(kName);
    command->add_option("-t,--tube", o.tube, "tube")->capture_default_str()->check(kName);
  }

  auto* tube = app.add_subcommand("tube", "a tube's settings and counts (docs/flow-control.md)");
  tube->require_subcommand(1);
  auto* tube_set = tube->add_subcommand(
      "set",
      "set a tube's flow control and max attempts; prints the flow control in force if a flow "
      "option was given, and max attempts if it was");
  tube_set->add_option("tube", o.tube, "tube")->required()->check(kName);
  tube_set
      ->add_option("--group-concurrency", o.group_concurrency,
                   "at most N jobs of one group reserved at once; off for no limit")
      ->type_name("N|off");
  tube_set->add_option("--fair", o.fair, "groups take turns: on or off")
      ->check(CLI::IsMember({"on", "off"}));
  tube_set
      ->add_option("--group-rate", o.group_rate,
                   "reserves per group and period, e.g. 10/s, 600/1m; off for no limit")
      ->type_name("RATE|off");
  // Digits only (CLI11 reads "-1" as 2^32 - 1); the server checks the range.
  tube_set
      ->add_option("--group-burst", o.group_burst, "reserves a group may take at once (default 1)")
      ->check(delayq::apps::whole_number(0, UINT32_MAX).description(""))
      ->type_name("N");
  tube_set
      ->add_option("--weight", o.weights,
                   "GROUP gets N turns to an unweighted group's one (default 1); "
                   "repeat for several")
      ->type_name("GROUP=N");
  tube_set->add_option("--max-attempts", o.max_attempts,
                       "reservations before a job is buried; 0 for no limit");
  auto* tube_show =
      tube->add_subcommand("show", "a tube's counts, flow control and groups held back");
  tube_show->add_option("tube", o.tube, "tube")->required()->check(kName);

  auto* webhook = app.add_subcommand("webhook", "a tube's push delivery (docs/webhooks.md)");
  webhook->require_subcommand(1);
  auto* webhook_set = webhook->add_subcommand(
      "set",
      "POST the tube's due jobs to a URL (replaces the whole webhook: an option left out "
      "takes its default, --secret included)");
  webhook_set->add_option("tube", o.tube, "tube")->required()->check(kName);
  webhook_set->add_option("url", o.url, "http:// or https:// URL")->required();
  webhook_set->add_option("-H,--header", o.headers, "'Name: value' sent with every request");
  webhook_set->add_option("--timeout", o.timeout, "per attempt (default 10s)")->check(kDuration);
  webhook_set->add_option("--max-attempts", o.max_attempts, "then the job is buried (default 20)");
  webhook_set->add_option("--backoff-min", o.backoff_min, "first retry wait (default 1s)")
      ->check(kDuration);
  webhook_set->add_option("--backoff-max", o.backoff_max, "longest retry wait (default 1h)")
      ->check(kDuration);
  webhook_set->add_option("--backoff-factor", o.backoff_factor, "growth per attempt (default 2)");
  webhook_set->add_option("--rate", o.rate, "requests started per second (default: no limit)");
  webhook_set->add_option("--concurrency", o.concurrency, "requests in flight (default 8)");
  webhook_set->add_option("--secret", o.secrets, "signing key; give two while rotating");
  auto* webhook_get = webhook->add_subcommand("get", "show a tube's webhook");
  auto* webhook_rm = webhook->add_subcommand("rm", "remove a tube's webhook");
  for (CLI::App* command : {webhook_get, webhook_rm}) {
    command->add_option("tube", o.tube, "tube")->required()->check(kName);
  }

  auto* schedule = app.add_subcommand("schedule", "recurring schedules (docs/schedules.md)");
  schedule->require_subcommand(1);
  auto* schedule_set =
      schedule->add_subcommand("set", "create or replace a schedule: each run puts a job");
  schedule_set->add_option("name", o.name, "the schedule's name")->required()->check(kName);
  schedule_set->add_option("-t,--tube", o.tube, "the tube its runs go to")
      ->capture_default_str()
      ->check(kName);
  auto* cron = schedule_set->add_option("--cron", o.cron, "cron expression, e.g. '0 9 * * MON'");
  schedule_set->add_option("--every", o.every, "interval, e.g. 90s, 5m")
      ->excludes(cron)
      ->check(kDuration);
  schedule_set->add_option("--tz", o.tz, "IANA time zone for --cron (default UTC)");
  schedule_set->add_option("-b,--body", o.body, "each run's body");
  schedule_set->add_option("-p,--priority", o.priority, "each run's priority (default 1024)")
      ->check(kPriority)
      ->type_name("UINT");
  schedule_set->add_option("--ttr", o.ttr, "each run's time to run (default 60s)")
      ->check(kDuration);
  schedule_set->add_option("-g,--group", o.group, "each run's group")->check(kName);
  schedule_set->add_option("--url", o.url, "push delivery: POST each run here");
  schedule_set->add_option("--content-type", o.content_type, "push delivery: the body's type");
  schedule_set
      ->add_option("--start-at", o.start_at, "no run before (RFC 3339, or Unix milliseconds)")
      ->check(kInstant);
  schedule_set->add_option("--end-at", o.end_at, "no run after (RFC 3339, or Unix milliseconds)")
      ->check(kInstant);
  schedule_set->add_option("--limit", o.limit, "at most this many runs");
  schedule_set->add_option("--jitter", o.jitter, "each run later by a random [0, jitter]")
      ->check(kDuration);
  schedule_set->add_option("--misfire", o.misfire, "missed runs: skip, once (default), all");
  schedule_set->add_option("--max-lateness", o.max_lateness, "catch up within this (default 1h)")
      ->check(kDuration);
  schedule_set->add_option("--overlap", o.overlap, "allow (default), skip, buffer_one");
  schedule_set->add_flag("--paused", o.paused, "create it paused");
  auto* schedule_ls = schedule->add_subcommand("ls", "list schedules with their next runs");
  auto* schedule_get = schedule->add_subcommand("get", "show a schedule and its counts");
  auto* schedule_rm = schedule->add_subcommand("rm", "delete a schedule (and its next run)");
  auto* schedule_pause = schedule->add_subcommand("pause", "put no run until resumed");
  auto* schedule_resume = schedule->add_subcommand("resume", "run again (missed runs: misfire)");
  auto* schedule_trigger = schedule->add_subcommand("trigger", "one run now");
  auto* schedule_next = schedule->add_subcommand("next", "the next run times, in its zone");
  for (CLI::App* command : {schedule_get, schedule_rm, schedule_pause, schedule_resume,
                            schedule_trigger, schedule_next}) {
    command->add_option("name", o.name, "the schedule's name")->required()->check(kName);
  }
  schedule_next->add_option("-n,--count", o.count, "how many (default 10, at most 1000)");
  schedule_next
      ->add_option("--after", o.after,
                   "from this instant (RFC 3339, or Unix milliseconds; default now)")
      ->check(kInstant);

  auto* admin = app.add_subcommand("admin", "the server's administration");
  admin->require_subcommand(1);
  auto* backup = admin->add_subcommand(
      "backup", "copy the running server's data into a new directory (a restorable data dir)");
  backup->add_option("dir", o.dir, "new directory on the server's machine (relative: from here)")
      ->required();

  // An option or argument given an empty value ("--in ''": an unset shell variable) is refused,
  // not taken for the option left out: a put would otherwise be due at once, or go without its
  // key; a backup would name no directory. A body may be empty.
  const CLI::Validator kGiven(
      [](std::string& text) {
        return text.empty() ? std::string("an empty value") : std::string();
      },
      "");
  const std::function<void(CLI::App*)> refuse_empty = [&](CLI::App* command) {
    for (CLI::Option* option : command->get_options()) {
      if (option->get_items_expected_min() > 0 && !option->check_lname("body") &&
          option->get_name() != "body") {
        option->check(kGiven);
      }
    }
    for (CLI::App* sub : command->get_subcommands([](CLI::App*) { return true; })) {
      refuse_empty(sub);
    }
  };
  refuse_empty(&app);

  // Output that cannot be written (a full disk, a closed descriptor) is not a success.
  const auto written = [](int code) {
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    const int why = errno;
    if ((!flushed || std::ferror(stdout) != 0) && code == 0) {
      std::fprintf(stderr, "delayq: cannot write the output%s%s\n", why != 0 ? ": " : "",
                   why != 0 ? std::strerror(why) : "");
      return kExitUsage;
    }
    return code;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // "delayq group bogus": CLI11 says only "A subcommand is required"; say which are.
    CLI::App* leaf = &app;
    while (!leaf->get_subcommands().empty()) leaf = leaf->get_subcommands().front();
    if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr && leaf != &app &&
        leaf->get_require_subcommand_min() > 0 && leaf->get_subcommands().empty()) {
      std::string names;
      for (const CLI::App* sub : leaf->get_subcommands([](CLI::App*) { return true; })) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      std::string path = leaf->get_name();
      for (const CLI::App* up = leaf->get_parent(); up != &app; up = up->get_parent()) {
        path = up->get_name() + " " + path;
      }
      const std::vector<std::string> extra = app.remaining();
      const std::string what =
          extra.empty() ? "a command is needed" : "no command " + extra.front();
      std::fprintf(stderr, "delayq %s: %s; its commands: %s\n", path.c_str(), what.c_str(),
                   names.c_str());
      return kExitUsage;
    }
    const int code = app.exit(error);  // --help and --version print and are 0
    return code == 0 ? written(0) : kExitUsage;
  }

  // A CA file that cannot be read is the command line's (or the environment's) to fix.
  if (!o.ca_file.empty() && o.server.starts_with("https://")) {
    boost::asio::ssl::context context(boost::asio::ssl::context::tls_client);
    boost::system::error_code error;
    context.load_verify_file(o.ca_file, error);
    if (error) {
      std::fprintf(stderr, "delayq: --ca-file or $DELAYQ_CA_FILE: cannot read %s: %s\n",
                   o.ca_file.c_str(), error.message().c_str());
      return kExitUsage;
    }
  }
  if (app.get_subcommands().empty()) {
    std::fprintf(stderr, "delayq: a command is needed (delayq --help lists them)\n");
    return kExitUsage;
  }
  Cli cli(o);
  const auto run = [&]() -> int {
    if (put->parsed()) return cli.put();
    if (put_many->parsed()) return cli.put_many();
    if (get->parsed()) return cli.get();
    if (rm->parsed()) return cli.rm();
    if (reschedule->parsed()) return cli.reschedule();
    if (reserve->parsed()) return cli.reserve();
    if (ls->parsed()) return cli.ls();
    if (stats->parsed()) return cli.stats();
    if (due->parsed()) {
      if (o.tube == "default" && due->count("tube") == 0) o.tube.clear();
      if (o.in.empty()) o.in = "0s,1m,1h,1d,7d";
      return cli.due();
    }
    if (group_ls->parsed()) return cli.group_ls();
    if (group_rm->parsed()) return cli.group_rm();
    if (tube_set->parsed()) return cli.tube_set();
    if (tube_show->parsed()) return cli.tube_show();
    if (webhook_set->parsed()) return cli.webhook_set();
    if (webhook_get->parsed()) return cli.webhook_get();
    if (webhook_rm->parsed()) return cli.webhook_rm();
    if (backup->parsed()) return cli.backup();
    if (schedule_set->parsed()) return cli.schedule_set();
    if (schedule_ls->parsed()) return cli.schedule_ls();
    if (schedule_get->parsed()) return cli.schedule_show("GET");
    if (schedule_rm->parsed()) return cli.schedule_show("DELETE");
    if (schedule_pause->parsed()) return cli.schedule_show("POST", "/pause");
    if (schedule_resume->parsed()) return cli.schedule_show("POST", "/resume");
    if (schedule_trigger->parsed()) return cli.schedule_trigger();
    if (schedule_next->parsed()) return cli.schedule_next();
    return kExitUsage;
  };
  try {
    return written(run());
  } catch (const std::exception& error) {
    // An answer in JSON, but not of the shape expected (another server, another version).
    std::fprintf(stderr, "delayq: %s's answer is not what this delayq expects: %s\n",
                 o.server.c_str(), error.what());
    return kExitUnreachable;
  }
}
