#include "store/far_reader.h"

#include <utility>

#include "base/bytes.h"

namespace delayq::store {

Result<std::optional<JobRecord>> FarFamily::far_job(JobId id) {
  auto bytes = far_get(job_key(kFarJobPrefix, id));
  if (!bytes.is_ok()) return bytes.status();
  if (!bytes.value()) return std::optional<JobRecord>();
  auto record = decode_record(id, *bytes.value());
  if (!record.is_ok()) return record.status();
  return std::optional<JobRecord>(std::move(record).value());
}

Result<std::optional<JobId>> FarFamily::far_key(std::string_view tube, std::string_view key) {
  auto bytes = far_get(far_key_key(tube, key));
  if (!bytes.is_ok()) return bytes.status();
  if (!bytes.value()) return std::optional<JobId>();
  if (bytes.value()->size() != 8) {
    return Status(Code::kCorruption, "far key " + std::string(key) + ": not an id");
  }
  return std::optional<JobId>(read_be64(*bytes.value()));
}

namespace {

// Scans the keys under `prefix`, each followed by `size` bytes, which visit reads; a key of
// another size is kCorruption (names are printable ASCII, so none is a prefix of another's key).
Status scan_fixed(FarFamily& family, const std::string& prefix, const std::string& start,
                  std::size_t size, const std::function<bool(std::string_view)>& visit) {
  bool corrupt = false;
  Status scanned = family.far_scan(prefix, start, [&](std::string_view key, std::string_view) {
    corrupt = key.size() != prefix.size() + size;
    return !corrupt && visit(key.substr(prefix.size()));
  });
  if (corrupt) return {Code::kCorruption, "a far tier key of the wrong size"};
  return scanned;
}

}  // namespace

Status FarFamily::far_group(std::string_view tube, std::string_view group,
                            const std::function<bool(JobId)>& visit) {
  const std::string prefix = far_group_prefix(tube, group);
  return scan_fixed(*this, prefix, prefix, 8,
                    [&](std::string_view id) { return visit(read_be64(id)); });
}

Status FarFamily::far_by_due(std::string_view tube, std::int64_t from,
                             const std::function<bool(std::int64_t, JobId)>& visit) {
  // The first key at or after `from`: its due and the least id (far_due_key() clamps as here).
  const std::string start = far_due_key(tube, from, 0);
  return scan_fixed(*this, far_prefix(kFarDuePrefix, tube), start, 16, [&](std::string_view rest) {
    return visit(static_cast<std::int64_t>(read_be64(rest)), read_be64(rest.substr(8)));
  });
}

Status FarFamily::far_counts(
    const std::function<Status(std::string, std::int64_t, std::uint64_t)>& visit) {
  Status failed;
  const std::string prefix(1, kFarCountPrefix);
  Status scanned = far_scan(prefix, prefix, [&](std::string_view key, std::string_view value) {
    const std::size_t end = key.find('\0');
    bytes::Reader in(value);
    std::uint64_t count = 0;
    if (end == std::string_view::npos || key.size() != end + 9 || !in.get(count) || !in.done()) {
      failed = Status(Code::kCorruption, "a far count that does not read");
      return false;
    }
    failed = visit(std::string(key.substr(1, end - 1)),
                   static_cast<std::int64_t>(read_be64(key.substr(end + 1))), count);
    return failed.is_ok();
  });
  return scanned.is_ok() ? failed : scanned;
}

}  // namespace delayq::store
