// The persistent compile cache: compiled programs on disk, keyed by everything that
// decides the result, safe to share between processes compiling at the same time.
//
// An entry is "<key>.entry": a magic line, a JSON header line, the payload's length and
// SHA-256, then the payload (the engine's serialized executable; the NEFF on Trainium).
// "<key>.failed" remembers a failed compilation; "<key>.lock" serialises compiling a key.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::core {

// The entry format and file names, here once; Python reads them through PjrtNeuron_CompileCacheFormat.
inline constexpr char kCacheEntryMagic[] = "pjrt-neuron-cache/1\n";
inline constexpr char kCacheEntrySuffix[] = ".entry";
inline constexpr char kCacheFailedSuffix[] = ".failed";
inline constexpr char kCacheLockSuffix[] = ".lock";
inline constexpr char kCacheTemporaryMarker[] = ".tmp.";  // "<file>.tmp.<pid>" while being written

// What an entry's bytes hold; the payload is valid only when `valid`.
struct CacheEntry {
  bool valid = false;
  std::string problem;                     // why not valid
  std::optional<std::string> header_json;  // the header line, when the entry has one
  uint64_t payload_size = 0;               // the bytes after the checksum
  size_t payload_offset = 0;
};
CacheEntry ParseCacheEntry(const std::string& bytes);
StatusOr<CacheEntry> ReadCacheEntry(const std::string& path);  // NOT_FOUND when it cannot be read

struct CacheSettings {
  bool enabled = true;
  std::string directory;
  int64_t max_bytes = int64_t{10} << 30;
  bool shared = false;        // entries readable by everyone, not only their owner
  bool retry_failed = false;  // compile again programs that failed before
};

// NEURON_COMPILE_CACHE_URL (a local path), PJRT_NEURON_COMPILE_CACHE (0 turns it off),
// PJRT_NEURON_COMPILE_CACHE_MAX_SIZE, PJRT_NEURON_COMPILE_CACHE_SHARED,
// PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED (common/settings.h), read at each call.
StatusOr<CacheSettings> ReadCacheSettings();

struct CacheMetrics {
  int64_t compiles = 0;  // programs compiled by this process
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t failures_remembered = 0;  // compilations refused from a remembered failure
  int64_t corrupt_entries = 0;
  double compile_seconds = 0;
  int64_t bytes_written = 0;
};

class CompileCache {
 public:
  explicit CompileCache(CacheSettings settings) : settings_(std::move(settings)) {}

  // A hex SHA-256 over length-prefixed parts, so no two part lists collide by concatenation.
  static std::string Key(const std::vector<std::string>& parts);

  // The payload of a valid entry. A corrupt or truncated one is reported once and removed.
  std::optional<std::string> Load(const std::string& key);
  void Store(const std::string& key, const std::string& header_json, const std::string& payload);
  void Remove(const std::string& key);  // for entries the engine could not load

  std::optional<Status> RememberedFailure(const std::string& key);
  void RememberFailure(const std::string& key, const Status& failure);
  void ForgetFailure(const std::string& key);  // after a retry succeeded

  // Held while compiling `key`: others wait, then load what this process stored. The kernel
  // drops the lock if this process dies, so nobody waits for a dead compiler.
  class KeyLock {
   public:
    explicit KeyLock(int fd) : fd_(fd) {}
    KeyLock(KeyLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    KeyLock(const KeyLock&) = delete;
    ~KeyLock();

   private:
    int fd_;
  };
  StatusOr<KeyLock> Lock(const std::string& key);

  const CacheSettings& settings() const { return settings_; }

 private:
  std::string PathOf(const std::string& key, const char* suffix) const;
  Status EnsureDirectory() const;
  void EvictToLimit();

  CacheSettings settings_;
};

// Process-wide counters, updated under one lock; PJRT_NEURON_CACHE_METRICS=1 prints them at exit.
void CountMetrics(const std::function<void(CacheMetrics&)>& update);
std::string MetricsJson();

}  // namespace pjrt_neuron::core
