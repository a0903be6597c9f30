// Every environment variable pjrt-neuron reads: the one table (name, meaning, default, kind,
// what is allowed) and the strict readers the rest of the plugin uses instead of getenv.
//
// Values are read where they are used (a client's creation, each compilation), not cached
// for the process: tests and the Python package change the environment between clients of
// one process (the cache directory, PJRT_NEURON_ENGINE_LIBRARY set by prepare_environment).
// A bad value is an INVALID_ARGUMENT that names the variable and what is allowed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::settings {

enum class Kind {
  kChoice,             // one of `choices`
  kFlag,               // "0" or "1"
  kPositiveInt,        // 1 to 4096
  kProcessIndex,       // 0 to 999999
  kPositiveIntList,    // comma-separated positive integers
  kSize,               // bytes: 4096, 500M, 10G, 1.5GiB
  kPositiveSeconds,    // a decimal number above 0
  kNonNegativeSeconds, // a decimal number, 0 or more
  kPath,               // a file or directory
  kCacheUrl,           // a local path or file:// URL; other URLs leave the default
  kCoreList,           // 3, 0-3, 0,1,2: contiguous, checked against the instance by the core
  kInstanceType,       // a name from the instance table, which lives in core/instance.h
  kText,               // taken as it is
  kPresence,           // set to anything turns it on
};

enum class Reader { kPlugin, kDaemon, kPython };

struct Choice {
  const char* value;
  const char* note;  // "" or a few words, e.g. "the default"
};

// Indexes the table: Get(Id::kCompat) is PJRT_NEURON_COMPAT's row.
enum class Id {
  kInstanceType,
  kLogicalNcConfig,
  kVisibleCores,
  kNumCores,
  kLockDir,
  kProcessIndex,
  kWorldSize,
  kProcessesNumDevices,
  kCollectiveTimeout,
  kDaemonIdleSeconds,
  kDaemonTrace,
  kInstanceDaemon,
  kEngineLibrary,
  kEngine,
  kNrtLibrary,
  kNeuronxCc,
  kCompileProgressSeconds,
  kMlirConverter,
  kRootCommId,
  kMasterAddr,
  kCompat,
  kCompatStrictNumerics,
  kCompatReport,
  kEstimateReport,
  kEstimate,
  kCompileCacheUrl,
  kCompileCache,
  kCompileCacheMaxSize,
  kCompileCacheShared,
  kCompileCacheRetryFailed,
  kCacheMetrics,
  kGraphCollection,
  kNeuronCcFlags,
  kLibraryPath,
  kTorchPlugin,
  kTorchDevice,
  kTorchFallback,
  kXdist,
  kCompileIsolation,
  kSimEngine,
};

struct Setting {
  Id id;
  const char* name;
  Kind kind;
  const char* default_value;  // what unset means, as a value; nullptr when it is not one
  const char* default_text;   // what unset means, for people
  const char* meaning;
  std::vector<Choice> choices;  // kChoice and kFlag
  Reader reader;
};

const std::vector<Setting>& Table();
const Setting& Get(Id id);
const Setting* Find(const std::string& name);
const char* KindName(Kind kind);
const char* ReaderName(Reader reader);
std::string AllowedText(const Setting& setting);  // "warn (the default), strict or off", "a positive integer"

// The table as a JSON array, for Python and documentation.
std::string TableJson();

// Strict checks and parsers of one value. `name` names it in messages; "" for a value that
// came from elsewhere (a command-line argument).
Status Check(const Setting& setting, const std::string& text);  // instance types and core lists: syntax only
StatusOr<std::string> ParseChoice(const Setting& setting, const std::string& text);
StatusOr<bool> ParseFlag(const Setting& setting, const std::string& text);
StatusOr<int> ParsePositiveInt(const std::string& name, const std::string& text);
StatusOr<int> ParseProcessIndex(const std::string& name, const std::string& text);
StatusOr<std::vector<int>> ParsePositiveIntList(const std::string& name, const std::string& text);
StatusOr<int64_t> ParseSize(const std::string& name, const std::string& text);
StatusOr<double> ParseSeconds(const std::string& name, const std::string& text, bool zero_allowed);

// The environment's value; nullopt when unset or empty, which both mean the default.
std::optional<std::string> Raw(Id id);
bool IsSet(Id id);

// Readers: the environment's value, parsed, or else the setting's default value.
std::string Text(Id id);  // "" when unset without a default value
StatusOr<std::string> ChoiceValue(Id id);
StatusOr<bool> Flag(Id id);
StatusOr<int> PositiveInt(Id id);  // 0 when unset without a default value
StatusOr<int> ProcessIndex(Id id);
StatusOr<std::vector<int>> PositiveIntList(Id id);  // empty when unset
StatusOr<int64_t> Size(Id id);
StatusOr<double> Seconds(Id id);

// NEURON_COMPILE_CACHE_URL when it is a local path (or file:// URL), else
// $XDG_CACHE_HOME/pjrt-neuron/compile-cache, ~/.cache/... or /tmp/...: remote URLs (s3://)
// are Trainium's, and the simulator caches under the user's cache directory.
std::string CompileCacheDirectory();

}  // namespace pjrt_neuron::settings
