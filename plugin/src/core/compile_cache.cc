// The compile cache on disk (compile_cache.h): entries, remembered failures, key locks,
// eviction, and the process's counters.
#include "core/compile_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>

#include "common/json.h"
#include "common/settings.h"
#include "common/sha256.h"

namespace pjrt_neuron::core {
namespace {

constexpr size_t kMagicSize = sizeof(kCacheEntryMagic) - 1;

std::mutex metrics_mutex;

bool ReadFile(const std::string& path, std::string* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  out->clear();
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) out->append(buffer, n);
  std::fclose(f);
  return true;
}

// Writes through a temporary file and a rename, so readers see a whole entry or none.
bool WriteAtomically(const std::string& path, const std::string& bytes, mode_t mode) {
  std::string temporary = path + kCacheTemporaryMarker + std::to_string(getpid());
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  fchmod(fd, mode);  // whatever the umask
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  bool ok = written == bytes.size() && fsync(fd) == 0;
  close(fd);
  if (ok && rename(temporary.c_str(), path.c_str()) == 0) return true;
  unlink(temporary.c_str());
  return false;
}

void PutLength(std::string* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

uint64_t GetLength(const std::string& in, size_t at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

}  // namespace

CacheEntry ParseCacheEntry(const std::string& bytes) {
  CacheEntry entry;
  if (bytes.compare(0, kMagicSize, kCacheEntryMagic) != 0) {
    entry.problem = "not a pjrt-neuron cache entry";
    return entry;
  }
  size_t header_end = bytes.find('\n', kMagicSize);
  if (header_end != std::string::npos) entry.header_json = bytes.substr(kMagicSize, header_end - kMagicSize);
  if (header_end == std::string::npos || bytes.size() < header_end + 1 + 8 + 32) {
    entry.problem = "the entry is truncated";
    return entry;
  }
  size_t at = header_end + 1;
  uint64_t length = GetLength(bytes, at);
  std::string checksum = bytes.substr(at + 8, 32);
  at += 8 + 32;
  entry.payload_size = bytes.size() - at;
  if (bytes.size() - at != length) {
    entry.problem = "the entry is truncated or has extra bytes";
    return entry;
  }
  Sha256 sha;
  sha.Update(bytes.data() + at, bytes.size() - at);
  if (sha.Digest() != checksum) {
    entry.problem = "the entry's checksum does not match";
    return entry;
  }
  entry.payload_offset = at;
  entry.valid = true;
  return entry;
}

StatusOr<CacheEntry> ReadCacheEntry(const std::string& path) {
  std::string bytes;
  if (!ReadFile(path, &bytes)) return NotFound("cannot read " + path + ": " + std::strerror(errno));
  return ParseCacheEntry(bytes);
}

namespace {

CacheMetrics& Metrics() {
  static CacheMetrics metrics;
  return metrics;
}

void PrintMetricsAtExit() { std::fprintf(stderr, "pjrt-neuron compile cache: %s\n", MetricsJson().c_str()); }

}  // namespace

void CountMetrics(const std::function<void(CacheMetrics&)>& update) {
  std::lock_guard<std::mutex> lock(metrics_mutex);
  update(Metrics());
}

std::string MetricsJson() {
  std::lock_guard<std::mutex> lock(metrics_mutex);
  const CacheMetrics& m = Metrics();
  json::Writer out(json::Writer::Spacing::kSpaced);  // printed for people at exit, too
  out.BeginObject()
      .Field("compiles", m.compiles)
      .Field("cache_hits", m.hits)
      .Field("cache_misses", m.misses)
      .Field("failures_remembered", m.failures_remembered)
      .Field("corrupt_entries", m.corrupt_entries);
  out.Key("compile_seconds").Number(m.compile_seconds, 3);
  return out.Field("bytes_written", m.bytes_written).EndObject().text();
}

StatusOr<CacheSettings> ReadCacheSettings() {
  using settings::Id;
  // Read once: the counters are printed at exit, or not, as the first compilation found it.
  static const StatusOr<bool> metrics_at_exit = [] {
    StatusOr<bool> on = settings::Flag(Id::kCacheMetrics);
    if (on.ok() && *on) std::atexit(PrintMetricsAtExit);
    return on;
  }();
  PN_RETURN_IF_ERROR(metrics_at_exit.status());
  CacheSettings settings;
  PN_ASSIGN_OR_RETURN(settings.enabled, settings::Flag(Id::kCompileCache));
  settings.directory = settings::CompileCacheDirectory();
  PN_ASSIGN_OR_RETURN(settings.max_bytes, settings::Size(Id::kCompileCacheMaxSize));
  PN_ASSIGN_OR_RETURN(settings.shared, settings::Flag(Id::kCompileCacheShared));
  PN_ASSIGN_OR_RETURN(settings.retry_failed, settings::Flag(Id::kCompileCacheRetryFailed));
  return settings;
}

std::string CompileCache::Key(const std::vector<std::string>& parts) {
  Sha256 sha;
  for (const std::string& part : parts) {
    std::string length;
    PutLength(&length, part.size());
    sha.Update(length);
    sha.Update(part);
  }
  return Sha256::Hex(sha.Digest());
}

std::string CompileCache::PathOf(const std::string& key, const char* suffix) const {
  return settings_.directory + "/" + key + suffix;
}

Status CompileCache::EnsureDirectory() const {
  std::string partial;
  size_t start = 0;
  const std::string& path = settings_.directory;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    partial = path.substr(0, slash);
    start = slash + 1;
    if (partial.empty()) continue;
    const mode_t mode = settings_.shared ? 0755 : 0700;
    if (mkdir(partial.c_str(), mode) == 0) {
      chmod(partial.c_str(), mode);  // whatever the umask: a shared cache must be reachable
    } else if (errno != EEXIST) {
      return Unavailable("cannot create the compile cache directory " + partial + ": " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

std::optional<std::string> CompileCache::Load(const std::string& key) {
  std::string bytes;
  const std::string path = PathOf(key, kCacheEntrySuffix);
  if (!ReadFile(path, &bytes)) return std::nullopt;
  CacheEntry entry = ParseCacheEntry(bytes);
  if (entry.valid) {
    utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // the entry's mtime is its last use, for eviction
    return bytes.substr(entry.payload_offset);
  }
  static std::mutex reported_mutex;
  static std::set<std::string> reported;
  {
    std::lock_guard<std::mutex> lock(reported_mutex);
    if (reported.insert(path).second) {
      std::fprintf(stderr, "pjrt-neuron: compile cache entry %s is unusable (%s); removing it and compiling again\n",
                   path.c_str(), entry.problem.c_str());
    }
  }
  CountMetrics([](CacheMetrics& m) { m.corrupt_entries += 1; });
  unlink(path.c_str());
  return std::nullopt;
}

void CompileCache::Remove(const std::string& key) { unlink(PathOf(key, kCacheEntrySuffix).c_str()); }

void CompileCache::Store(const std::string& key, const std::string& header_json, const std::string& payload) {
  if (!EnsureDirectory().ok()) return;  // a cache that cannot be written is only slower
  std::string bytes(kCacheEntryMagic, kMagicSize);
  bytes += header_json + "\n";
  PutLength(&bytes, payload.size());
  Sha256 sha;
  sha.Update(payload);
  bytes += sha.Digest();
  bytes += payload;
  if (WriteAtomically(PathOf(key, kCacheEntrySuffix), bytes, settings_.shared ? 0644 : 0600)) {
    CountMetrics([&](CacheMetrics& m) { m.bytes_written += static_cast<int64_t>(bytes.size()); });
  }
  EvictToLimit();
}

std::optional<Status> CompileCache::RememberedFailure(const std::string& key) {
  if (settings_.retry_failed) return std::nullopt;
  std::string text;
  if (!ReadFile(PathOf(key, kCacheFailedSuffix), &text)) return std::nullopt;
  size_t newline = text.find('\n');
  if (newline == std::string::npos) return std::nullopt;
  int code = std::atoi(text.substr(0, newline).c_str());
  return Status(static_cast<ErrorCode>(code), text.substr(newline + 1) +
                                                  " [remembered from an earlier compilation of this program; set "
                                                  "PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED=1 or run `pjrt-neuron cache "
                                                  "clear --failed` to compile it again]");
}

void CompileCache::RememberFailure(const std::string& key, const Status& failure) {
  if (!EnsureDirectory().ok()) return;
  WriteAtomically(PathOf(key, kCacheFailedSuffix),
                  std::to_string(static_cast<int>(failure.code())) + "\n" + failure.message(),
                  settings_.shared ? 0644 : 0600);
}

void CompileCache::ForgetFailure(const std::string& key) { unlink(PathOf(key, kCacheFailedSuffix).c_str()); }

CompileCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) close(fd_);
}

StatusOr<CompileCache::KeyLock> CompileCache::Lock(const std::string& key) {
  PN_RETURN_IF_ERROR(EnsureDirectory());
  int fd = open(PathOf(key, kCacheLockSuffix).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, settings_.shared ? 0644 : 0600);
  if (fd < 0) return Unavailable("cannot open the compile cache lock: " + std::string(std::strerror(errno)));
  struct flock request;
  std::memset(&request, 0, sizeof(request));
  request.l_type = F_WRLCK;
  request.l_whence = SEEK_SET;
  while (fcntl(fd, F_OFD_SETLKW, &request) != 0) {
    if (errno != EINTR) {
      close(fd);
      return Unavailable("cannot lock the compile cache entry: " + std::string(std::strerror(errno)));
    }
  }
  return KeyLock(fd);
}

void CompileCache::EvictToLimit() {
  struct Entry {
    std::string path;
    int64_t size;
    int64_t used;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  DIR* dir = opendir(settings_.directory.c_str());
  if (dir == nullptr) return;
  while (dirent* d = readdir(dir)) {
    std::string name = d->d_name;
    const std::string suffix = kCacheEntrySuffix;
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::string path = settings_.directory + "/" + name;
    struct stat info;
    if (stat(path.c_str(), &info) != 0) continue;
    entries.push_back({path, info.st_size, static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec});
    total += info.st_size;
  }
  closedir(dir);
  if (total <= settings_.max_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= settings_.max_bytes) break;
    if (unlink(e.path.c_str()) == 0) total -= e.size;
  }
}

}  // namespace pjrt_neuron::core
