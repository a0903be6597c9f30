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

#include "common/sha256.h"

namespace pjrt_neuron::core {
namespace {

constexpr char kMagic[] = "pjrt-neuron-cache/1\n";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;

std::mutex metrics_mutex;

CacheMetrics& Metrics();

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

StatusOr<int64_t> ParseSize(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double scale = unit.empty() || unit == "B" ? 1
                 : unit == "K" || unit == "KB" || unit == "KiB" ? 1024.0
                 : unit == "M" || unit == "MB" || unit == "MiB" ? 1024.0 * 1024
                 : unit == "G" || unit == "GB" || unit == "GiB" ? 1024.0 * 1024 * 1024
                                                                  : -1;
  if (end == text.c_str() || scale < 0 || value < 0) {
    return InvalidArgument("PJRT_NEURON_COMPILE_CACHE_MAX_SIZE='" + text + "' is not a size like 500M or 10G");
  }
  return static_cast<int64_t>(value * scale);
}

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
  std::string temporary = path + ".tmp." + std::to_string(getpid());
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

// Returns the payload, or why the entry is unusable.
StatusOr<std::string> ParseEntry(const std::string& bytes) {
  if (bytes.compare(0, kMagicSize, kMagic) != 0) return Status(ErrorCode::kDataLoss, "not a pjrt-neuron cache entry");
  size_t header_end = bytes.find('\n', kMagicSize);
  if (header_end == std::string::npos || bytes.size() < header_end + 1 + 8 + 32) {
    return Status(ErrorCode::kDataLoss, "the entry is truncated");
  }
  size_t at = header_end + 1;
  uint64_t length = GetLength(bytes, at);
  std::string checksum = bytes.substr(at + 8, 32);
  at += 8 + 32;
  if (bytes.size() - at != length) return Status(ErrorCode::kDataLoss, "the entry is truncated or has extra bytes");
  std::string payload = bytes.substr(at);
  Sha256 sha;
  sha.Update(payload);
  if (sha.Digest() != checksum) return Status(ErrorCode::kDataLoss, "the entry's checksum does not match");
  return payload;
}

void PrintMetricsAtExit() { std::fprintf(stderr, "pjrt-neuron compile cache: %s\n", MetricsJson().c_str()); }

}  // namespace

namespace {
CacheMetrics& Metrics() {
  static CacheMetrics metrics;
  return metrics;
}
}  // namespace

void CountMetrics(const std::function<void(CacheMetrics&)>& update) {
  std::lock_guard<std::mutex> lock(metrics_mutex);
  update(Metrics());
}

std::string MetricsJson() {
  std::lock_guard<std::mutex> lock(metrics_mutex);
  const CacheMetrics& m = Metrics();
  char text[512];
  std::snprintf(text, sizeof(text),
                "{\"compiles\": %lld, \"cache_hits\": %lld, \"cache_misses\": %lld, \"failures_remembered\": %lld, "
                "\"corrupt_entries\": %lld, \"compile_seconds\": %.3f, \"bytes_written\": %lld}",
                static_cast<long long>(m.compiles), static_cast<long long>(m.hits), static_cast<long long>(m.misses),
                static_cast<long long>(m.failures_remembered), static_cast<long long>(m.corrupt_entries),
                m.compile_seconds, static_cast<long long>(m.bytes_written));
  return text;
}

StatusOr<CacheSettings> ReadCacheSettings() {
  static const bool metrics_at_exit = [] {
    if (Env("PJRT_NEURON_CACHE_METRICS") == "1") std::atexit(PrintMetricsAtExit);
    return true;
  }();
  (void)metrics_at_exit;
  CacheSettings settings;
  std::string enabled = Env("PJRT_NEURON_COMPILE_CACHE");
  if (!enabled.empty() && enabled != "0" && enabled != "1") {
    return InvalidArgument("PJRT_NEURON_COMPILE_CACHE='" + enabled + "'; use 1 (on, the default) or 0 (off)");
  }
  settings.enabled = enabled != "0";
  std::string url = Env("NEURON_COMPILE_CACHE_URL");
  if (url.rfind("file://", 0) == 0) url = url.substr(7);
  if (!url.empty() && url.find("://") == std::string::npos) {
    settings.directory = url;
  } else {
    // Remote URLs (s3://) are Trainium's; the simulator caches under the user's cache directory.
    std::string base = Env("XDG_CACHE_HOME");
    if (base.empty()) base = Env("HOME").empty() ? "/tmp" : Env("HOME") + "/.cache";
    settings.directory = base + "/pjrt-neuron/compile-cache";
  }
  if (std::string size = Env("PJRT_NEURON_COMPILE_CACHE_MAX_SIZE"); !size.empty()) {
    PN_ASSIGN_OR_RETURN(settings.max_bytes, ParseSize(size));
  }
  settings.shared = Env("PJRT_NEURON_COMPILE_CACHE_SHARED") == "1";
  settings.retry_failed = Env("PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED") == "1";
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
  const std::string path = PathOf(key, ".entry");
  if (!ReadFile(path, &bytes)) return std::nullopt;
  auto payload = ParseEntry(bytes);
  if (payload.ok()) {
    utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // the entry's mtime is its last use, for eviction
    return payload.value();
  }
  static std::mutex reported_mutex;
  static std::set<std::string> reported;
  {
    std::lock_guard<std::mutex> lock(reported_mutex);
    if (reported.insert(path).second) {
      std::fprintf(stderr, "pjrt-neuron: compile cache entry %s is unusable (%s); removing it and compiling again\n",
                   path.c_str(), payload.status().message().c_str());
    }
  }
  CountMetrics([](CacheMetrics& m) { m.corrupt_entries += 1; });
  unlink(path.c_str());
  return std::nullopt;
}

void CompileCache::Remove(const std::string& key) { unlink(PathOf(key, ".entry").c_str()); }

void CompileCache::Store(const std::string& key, const std::string& header_json, const std::string& payload) {
  if (!EnsureDirectory().ok()) return;  // a cache that cannot be written is only slower
  std::string bytes(kMagic, kMagicSize);
  bytes += header_json + "\n";
  PutLength(&bytes, payload.size());
  Sha256 sha;
  sha.Update(payload);
  bytes += sha.Digest();
  bytes += payload;
  if (WriteAtomically(PathOf(key, ".entry"), bytes, settings_.shared ? 0644 : 0600)) {
    CountMetrics([&](CacheMetrics& m) { m.bytes_written += static_cast<int64_t>(bytes.size()); });
  }
  EvictToLimit();
}

std::optional<Status> CompileCache::RememberedFailure(const std::string& key) {
  if (settings_.retry_failed) return std::nullopt;
  std::string text;
  if (!ReadFile(PathOf(key, ".failed"), &text)) return std::nullopt;
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
  WriteAtomically(PathOf(key, ".failed"),
                  std::to_string(static_cast<int>(failure.code())) + "\n" + failure.message(),
                  settings_.shared ? 0644 : 0600);
}

void CompileCache::ForgetFailure(const std::string& key) { unlink(PathOf(key, ".failed").c_str()); }

CompileCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) close(fd_);
}

StatusOr<CompileCache::KeyLock> CompileCache::Lock(const std::string& key) {
  PN_RETURN_IF_ERROR(EnsureDirectory());
  int fd = open(PathOf(key, ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, settings_.shared ? 0644 : 0600);
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
    if (name.size() < 6 || name.compare(name.size() - 6, 6, ".entry") != 0) continue;
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
