// The settings table and its strict parsers (settings.h): where pjrt-neuron calls getenv
// (engine/, daemon/ and api/serve_instance.cc still read theirs, to move here).
#include "common/settings.h"

#include <cstdlib>
#include <sstream>

#include "common/json.h"

namespace pjrt_neuron::settings {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// "NAME='text'" or, for a value without a variable, "'text'".
std::string Subject(const std::string& name, const std::string& text) {
  return (name.empty() ? "" : name + "=") + "'" + text + "'";
}

bool AllDigits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// Digits with an optional fraction, as people write sizes and seconds: no sign, exponent,
// hex, "inf" or surrounding space, which strtod would take.
std::optional<double> PlainDecimal(const std::string& text) {
  const size_t dot = text.find('.');
  const std::string whole = text.substr(0, dot);
  if (!AllDigits(whole)) return std::nullopt;
  if (dot != std::string::npos && !AllDigits(text.substr(dot + 1))) return std::nullopt;
  return std::strtod(text.c_str(), nullptr);
}

std::vector<Setting> BuildTable() {
  using K = Kind;
  using R = Reader;
  const std::vector<Choice> off_by_default = {{"1", "on"}, {"0", "off, the default"}};
  std::vector<Setting> table = {
      {Id::kInstanceType, "PJRT_NEURON_INSTANCE_TYPE", K::kInstanceType, "trn1.2xlarge", "trn1.2xlarge",
       "the simulated Trainium instance (create option instance_type)", {}, R::kPlugin},
      {Id::kLogicalNcConfig, "NEURON_LOGICAL_NC_CONFIG", K::kPositiveInt, nullptr, "the instance's",
       "logical NeuronCore config, 1 or 2 (2 on trn2 only; create option logical_nc_config)", {}, R::kPlugin},
      {Id::kVisibleCores, "NEURON_RT_VISIBLE_CORES", K::kCoreList, nullptr, "all",
       "which cores this process takes (create option visible_cores)", {}, R::kPlugin},
      {Id::kNumCores, "NEURON_RT_NUM_CORES", K::kPositiveInt, nullptr, "all",
       "how many cores this process takes, the first free ones (create option num_cores)", {}, R::kPlugin},
      {Id::kLockDir, "PJRT_NEURON_LOCK_DIR", K::kPath, "/tmp/pjrt-neuron-locks", "/tmp/pjrt-neuron-locks",
       "where processes claim cores; processes that share it share an instance (and its daemon)", {}, R::kPlugin},
      {Id::kProcessIndex, "NEURON_PJRT_PROCESS_INDEX", K::kProcessIndex, "0", "0",
       "this process's index in a multi-process job (set by torch-xla's launchers; create option node_id)", {},
       R::kPlugin},
      {Id::kWorldSize, "NEURON_PJRT_WORLD_SIZE", K::kPositiveInt, "1", "1",
       "how many processes the job has, one core each (create option num_nodes)", {}, R::kPlugin},
      {Id::kProcessesNumDevices, "NEURON_PJRT_PROCESSES_NUM_DEVICES", K::kPositiveIntList, nullptr, "one process",
       "cores of each process of the job, as a comma list", {}, R::kPlugin},
      {Id::kCollectiveTimeout, "PJRT_NEURON_COLLECTIVE_TIMEOUT", K::kPositiveSeconds, "300", "300",
       "seconds a process waits for its peers, at start-up and in each collective program, and a core launched alone for the other cores of its collective program", {}, R::kPlugin},
      {Id::kDaemonIdleSeconds, "PJRT_NEURON_DAEMON_IDLE_SECONDS", K::kNonNegativeSeconds, "10", "10",
       "how long the instance daemon stays after its last process leaves (at least a second)", {}, R::kDaemon},
      {Id::kDaemonTrace, "PJRT_NEURON_DAEMON_TRACE", K::kPresence, nullptr, "unset",
       "the instance daemon logs every execution (program, cores, whether gang-scheduled) to its daemon.log", {},
       R::kDaemon},
      {Id::kInstanceDaemon, "PJRT_NEURON_INSTANCE_DAEMON", K::kPath, nullptr,
       "pjrt-neuron-instanced beside the plugin library", "the instance daemon program to start", {}, R::kPlugin},
      {Id::kEngineLibrary, "PJRT_NEURON_ENGINE_LIBRARY", K::kPath, nullptr, "from the xla-cpu-pjrt wheel",
       "simulator engine, xla_cpu_pjrt.so (create option engine_library_path)", {}, R::kPlugin},
      // The Neuron engine's (engine/neuron/), on Trainium hosts.
      {Id::kEngine, "PJRT_NEURON_ENGINE", K::kChoice, "auto", "auto", "which engine runs programs",
       {{"auto", "neuron where the Neuron SDK is, else sim; the default"},
        {"sim", "simulated NeuronCores"},
        {"neuron", "the Neuron runtime"}},
       R::kPlugin},
      {Id::kNrtLibrary, "PJRT_NEURON_NRT_LIBRARY", K::kPath, nullptr, "libnrt.so.1",
       "the Neuron runtime library to load", {}, R::kPlugin},
      {Id::kNeuronxCc, "PJRT_NEURON_NEURONX_CC", K::kPath, "neuronx-cc", "neuronx-cc (from PATH)",
       "the Neuron compiler to run", {}, R::kPlugin},
      {Id::kCompileProgressSeconds, "PJRT_NEURON_COMPILE_PROGRESS_SECONDS", K::kNonNegativeSeconds, "5", "5",
       "seconds of a neuronx-cc compilation before the plugin says it is still compiling (0: never)", {},
       R::kPlugin},
      {Id::kMlirConverter, "PJRT_NEURON_MLIR_CONVERTER", K::kText, nullptr,
       "python -m pjrt_neuron._neuron_mlir_to_hlo", "the command that turns JAX's StableHLO into HLO for neuronx-cc",
       {}, R::kPlugin},
      {Id::kRootCommId, "NEURON_RT_ROOT_COMM_ID", K::kText, nullptr,
       "one process: a free local port; a job: process 0's hostname and a free port, through the framework's "
       "key-value store, else MASTER_ADDR:62182",
       "host:port where the Neuron runtime's collectives meet (set by torch-xla's launchers)", {}, R::kPlugin},
      {Id::kMasterAddr, "MASTER_ADDR", K::kText, nullptr, "not set",
       "the launcher's rendezvous host (torchrun); a job on the Neuron runtime with no root address and no "
       "key-value store meets at MASTER_ADDR:62182", {}, R::kPlugin},
      {Id::kCompat, "PJRT_NEURON_COMPAT", K::kChoice, "warn", "warn", "Trainium compatibility analysis",
       {{"warn", "the default"}, {"strict", ""}, {"off", ""}}, R::kPlugin},
      {Id::kCompatStrictNumerics, "PJRT_NEURON_COMPAT_STRICT_NUMERICS", K::kFlag, "0", "0",
       "every int64 narrowing counts, not only values beyond int32: logged in warn mode, fatal in strict", off_by_default,
       R::kPlugin},
      {Id::kCompatReport, "PJRT_NEURON_COMPAT_REPORT", K::kPath, nullptr, "unset",
       "append every compatibility finding as a JSON line to this file", {}, R::kPlugin},
      {Id::kEstimateReport, "PJRT_NEURON_ESTIMATE_REPORT", K::kPath, nullptr, "unset",
       "append each compiled program's work counts and each execution as JSON lines to this file "
       "(what `pjrt-neuron estimate` reads)", {}, R::kPlugin},
      {Id::kEstimate, "PJRT_NEURON_ESTIMATE", K::kFlag, "0", "0",
       "print the Trainium estimate of everything the process ran, once at exit", off_by_default, R::kPython},
      {Id::kCompileCacheUrl, "NEURON_COMPILE_CACHE_URL", K::kCacheUrl, nullptr, "~/.cache/pjrt-neuron/compile-cache",
       "compile cache directory (a local path; other URLs, such as s3://, leave the default)", {}, R::kPlugin},
      {Id::kCompileCache, "PJRT_NEURON_COMPILE_CACHE", K::kFlag, "1", "1", "the compile cache on or off",
       {{"1", "on, the default"}, {"0", "off"}}, R::kPlugin},
      {Id::kCompileCacheMaxSize, "PJRT_NEURON_COMPILE_CACHE_MAX_SIZE", K::kSize, "10G", "10G",
       "size limit of the compile cache; least recently used entries go first", {}, R::kPlugin},
      {Id::kCompileCacheShared, "PJRT_NEURON_COMPILE_CACHE_SHARED", K::kFlag, "0", "0",
       "compile cache entries readable by all users, not only their owner", off_by_default, R::kPlugin},
      {Id::kCompileCacheRetryFailed, "PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED", K::kFlag, "0", "0",
       "compile again programs whose compilation failed before, instead of failing from memory", off_by_default,
       R::kPlugin},
      {Id::kCacheMetrics, "PJRT_NEURON_CACHE_METRICS", K::kFlag, "0", "0",
       "print this process's compile and cache counters at exit", off_by_default, R::kPlugin},
      {Id::kGraphCollection, "PJRT_NEURON_GRAPH_COLLECTION", K::kPath, nullptr, "unset",
       "record programs to this directory instead of running them (set by `pjrt-neuron precompile`)", {},
       R::kPlugin},
      {Id::kNeuronCcFlags, "NEURON_CC_FLAGS", K::kText, nullptr, "unset",
       "neuronx-cc flags; part of every compile cache key", {}, R::kPlugin},
      {Id::kLibraryPath, "PJRT_NEURON_LIBRARY_PATH", K::kPath, nullptr, "the packaged libpjrt_neuron.so",
       "plugin library to load instead of the installed one (e.g. a Bazel build)", {}, R::kPython},
      {Id::kTorchPlugin, "PJRT_NEURON_TORCH_PLUGIN", K::kChoice, "pjrt-neuron", "pjrt-neuron",
       "which plugin PJRT_DEVICE=NEURON selects in torch-xla",
       {{"pjrt-neuron", "this plugin, the default"}, {"aws", "AWS's libneuronxla"}}, R::kPython},
      {Id::kTorchDevice, "PJRT_NEURON_TORCH_DEVICE", K::kChoice, "auto", "auto",
       "who owns PyTorch's device `neuron` (current PyTorch, without torch-xla)",
       {{"auto", "pjrt-neuron, unless AWS's torch-neuronx is installed, which then keeps the name"},
        {"pjrt-neuron", "pjrt-neuron, even where torch-neuronx is installed"},
        {"off", "pjrt-neuron does not register the device"}}, R::kPython},
      {Id::kTorchFallback, "PJRT_NEURON_TORCH_FALLBACK", K::kChoice, "none", "none",
       "what the native `neuron` device does with an ATen op it cannot lower",
       {{"none", "raise NotImplementedError naming the op, the default"},
        {"cpu", "run the op on the CPU, with one warning per op"}}, R::kPython},
      {Id::kXdist, "PJRT_NEURON_XDIST", K::kChoice, "1", "1",
       "the pytest plugin gives each pytest-xdist worker its own NeuronCores",
       {{"1", "on, the default: a share of the instance's cores, or an instance of its own when workers "
              "outnumber cores"},
        {"instance", "each worker simulates a whole instance of its own (tests written for the whole instance)"},
        {"0", "off"}, {"off", ""}, {"false", ""}, {"no", ""}}, R::kPython},
      {Id::kCompileIsolation, "PJRT_NEURON_COMPILE_ISOLATION", K::kFlag, "1", "1",
       "the simulator compiles in a helper process, so a compiler that stops its process (an internal check "
       "of XLA failing) fails that compilation with its message instead of ending the program",
       {{"1", "on, the default"}, {"0", "off: in this process, a little faster"}}, R::kPlugin},
      // Python resolves the wheel and hands its path to the client (create option engine_library_path).
      {Id::kSimEngine, "PJRT_NEURON_SIM_ENGINE", K::kChoice, "auto", "auto",
       "which build of XLA's CPU engine the simulator runs (PJRT_NEURON_ENGINE_LIBRARY, when set, wins)",
       {{"auto", "xla-cpu-pjrt for every client for now (README, Engine builds, says why); the default"},
        {"xla-cpu-pjrt", "xla-cpu-pjrt 0.0.1 (XLA of November 2025) for every client"},
        {"lammps-jax-pjrt-cpu", "lammps-jax-pjrt-cpu 0.11.2 (the XLA of jaxlib 0.11.2) for every client"}},
       R::kPython},
  };
  for (size_t i = 0; i < table.size(); ++i) {
    if (static_cast<size_t>(table[i].id) != i) std::abort();  // a row out of Id order: a build mistake
  }
  return table;
}

std::string ChoiceList(const std::vector<Choice>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += choices[i].value;
    if (*choices[i].note != '\0') out += std::string(" (") + choices[i].note + ")";
  }
  return out;
}

Status NotAllowed(const Setting& setting, const std::string& text) {
  return InvalidArgument(Subject(setting.name, text) + "; use " + ChoiceList(setting.choices));
}

}  // namespace

const std::vector<Setting>& Table() {
  static const std::vector<Setting>* table = new std::vector<Setting>(BuildTable());
  return *table;
}

const Setting& Get(Id id) { return Table()[static_cast<size_t>(id)]; }

const Setting* Find(const std::string& name) {
  for (const Setting& s : Table()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kChoice: return "choice";
    case Kind::kFlag: return "flag";
    case Kind::kPositiveInt: return "positive integer";
    case Kind::kProcessIndex: return "process index";
    case Kind::kPositiveIntList: return "positive integer list";
    case Kind::kSize: return "size";
    case Kind::kPositiveSeconds: return "seconds";
    case Kind::kNonNegativeSeconds: return "seconds or 0";
    case Kind::kPath: return "path";
    case Kind::kCacheUrl: return "path or URL";
    case Kind::kCoreList: return "core list";
    case Kind::kInstanceType: return "instance type";
    case Kind::kText: return "text";
    case Kind::kPresence: return "presence";
  }
  return "?";
}

const char* ReaderName(Reader reader) {
  switch (reader) {
    case Reader::kPlugin: return "plugin";
    case Reader::kDaemon: return "instance daemon";
    case Reader::kPython: return "python package";
  }
  return "?";
}

std::string AllowedText(const Setting& setting) {
  switch (setting.kind) {
    case Kind::kChoice:
    case Kind::kFlag: return ChoiceList(setting.choices);
    case Kind::kPositiveInt: return "a positive integer";
    case Kind::kProcessIndex: return "0 or a positive integer";
    case Kind::kPositiveIntList: return "positive integers separated by commas, e.g. 2,2";
    case Kind::kSize: return "a size like 500M or 10G (units B, K, M, G)";
    case Kind::kPositiveSeconds: return "a positive number of seconds";
    case Kind::kNonNegativeSeconds: return "a non-negative number of seconds";
    case Kind::kPath: return "a path";
    case Kind::kCacheUrl: return "a local path or file:// URL";
    case Kind::kCoreList: return "a core, a range or a list, e.g. 3, 0-3 or 0,1 (contiguous)";
    case Kind::kInstanceType: return "an instance type (see `pjrt-neuron ls --instance-type`)";
    case Kind::kText: return "any text";
    case Kind::kPresence: return "set to anything to turn it on";
  }
  return "";
}

std::string TableJson() {
  json::Writer out;
  out.BeginArray();
  for (const Setting& s : Table()) {
    out.BeginObject().Field("name", s.name).Field("kind", KindName(s.kind));
    out.Key("default");
    if (s.default_value != nullptr) {
      out.String(s.default_value);
    } else {
      out.Null();
    }
    out.Field("default_text", s.default_text).Field("meaning", s.meaning).Field("allowed", AllowedText(s));
    out.Key("choices").BeginArray();
    for (const Choice& c : s.choices) out.BeginObject().Field("value", c.value).Field("note", c.note).EndObject();
    out.EndArray().Field("read_by", ReaderName(s.reader)).EndObject();
  }
  return out.EndArray().text();
}

StatusOr<std::string> ParseChoice(const Setting& setting, const std::string& text) {
  for (const Choice& c : setting.choices) {
    if (text == c.value) return text;
  }
  return NotAllowed(setting, text);
}

StatusOr<bool> ParseFlag(const Setting& setting, const std::string& text) {
  if (text == "1") return true;
  if (text == "0") return false;
  return NotAllowed(setting, text);
}

StatusOr<int> ParsePositiveInt(const std::string& name, const std::string& text) {
  if (!AllDigits(text) || text.size() > 4 || std::atoi(text.c_str()) < 1 || std::atoi(text.c_str()) > 4096) {
    return InvalidArgument(Subject(name, text) + " is not a positive integer");
  }
  return std::atoi(text.c_str());
}

StatusOr<int> ParseProcessIndex(const std::string& name, const std::string& text) {
  if (!AllDigits(text) || text.size() > 6) return InvalidArgument(Subject(name, text) + " is not a process index");
  return std::atoi(text.c_str());
}

StatusOr<std::vector<int>> ParsePositiveIntList(const std::string& name, const std::string& text) {
  std::vector<int> values;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    PN_ASSIGN_OR_RETURN(int value, ParsePositiveInt(name + " entry", part));
    values.push_back(value);
  }
  return values;
}

StatusOr<int64_t> ParseSize(const std::string& name, const std::string& text) {
  static const struct {
    const char* unit;
    double scale;
  } kUnits[] = {{"", 1},         {"B", 1},          {"K", 1024.0},        {"KB", 1024.0},
                {"KiB", 1024.0}, {"M", 1048576.0},  {"MB", 1048576.0},    {"MiB", 1048576.0},
                {"G", 1073741824.0}, {"GB", 1073741824.0}, {"GiB", 1073741824.0}};
  const size_t number_end = text.find_first_not_of("0123456789.");
  const std::string number = text.substr(0, number_end);
  const std::string unit = number_end == std::string::npos ? "" : text.substr(number_end);
  const std::optional<double> value = PlainDecimal(number);
  for (const auto& u : kUnits) {
    if (value.has_value() && unit == u.unit && *value * u.scale < 9.2e18) {
      return static_cast<int64_t>(*value * u.scale);
    }
  }
  return InvalidArgument(Subject(name, text) + " is not a size like 500M or 10G (units B, K, M, G)");
}

StatusOr<double> ParseSeconds(const std::string& name, const std::string& text, bool zero_allowed) {
  const std::optional<double> seconds = PlainDecimal(text);
  if (!seconds.has_value() || (!zero_allowed && *seconds <= 0)) {
    return InvalidArgument(Subject(name, text) + " is not a " + (zero_allowed ? "non-negative" : "positive") +
                           " number of seconds");
  }
  return *seconds;
}

Status Check(const Setting& setting, const std::string& text) {
  switch (setting.kind) {
    case Kind::kChoice: return ParseChoice(setting, text).status();
    case Kind::kFlag: return ParseFlag(setting, text).status();
    case Kind::kPositiveInt: return ParsePositiveInt(setting.name, text).status();
    case Kind::kProcessIndex: return ParseProcessIndex(setting.name, text).status();
    case Kind::kPositiveIntList: return ParsePositiveIntList(setting.name, text).status();
    case Kind::kSize: return ParseSize(setting.name, text).status();
    case Kind::kPositiveSeconds: return ParseSeconds(setting.name, text, false).status();
    case Kind::kNonNegativeSeconds: return ParseSeconds(setting.name, text, true).status();
    case Kind::kCoreList:
      if (text.find_first_not_of("0123456789,-") != std::string::npos) {
        return InvalidArgument(Subject(setting.name, text) + ": use " + AllowedText(setting));
      }
      return Status::Ok();
    case Kind::kPath:
    case Kind::kCacheUrl:
    case Kind::kInstanceType:
    case Kind::kText:
    case Kind::kPresence: return Status::Ok();
  }
  return Status::Ok();
}

std::optional<std::string> Raw(Id id) {
  std::string value = Env(Get(id).name);
  if (value.empty()) return std::nullopt;
  return value;
}

bool IsSet(Id id) { return Raw(id).has_value(); }

std::string Text(Id id) {
  if (std::optional<std::string> value = Raw(id)) return *value;
  const char* fallback = Get(id).default_value;
  return fallback != nullptr ? fallback : "";
}

StatusOr<std::string> ChoiceValue(Id id) { return ParseChoice(Get(id), Text(id)); }

StatusOr<bool> Flag(Id id) { return ParseFlag(Get(id), Text(id)); }

StatusOr<int> PositiveInt(Id id) {
  const std::string text = Text(id);
  if (text.empty()) return 0;
  return ParsePositiveInt(Get(id).name, text);
}

StatusOr<int> ProcessIndex(Id id) { return ParseProcessIndex(Get(id).name, Text(id)); }

StatusOr<std::vector<int>> PositiveIntList(Id id) {
  const std::string text = Text(id);
  if (text.empty()) return std::vector<int>();
  return ParsePositiveIntList(Get(id).name, text);
}

StatusOr<int64_t> Size(Id id) { return ParseSize(Get(id).name, Text(id)); }

StatusOr<double> Seconds(Id id) {
  return ParseSeconds(Get(id).name, Text(id), Get(id).kind == Kind::kNonNegativeSeconds);
}

std::string CompileCacheDirectory() {
  std::string url = Text(Id::kCompileCacheUrl);
  if (url.rfind("file://", 0) == 0) url = url.substr(7);
  if (!url.empty() && url.find("://") == std::string::npos) return url;
  std::string base = Env("XDG_CACHE_HOME");
  if (base.empty()) base = Env("HOME").empty() ? "/tmp" : Env("HOME") + "/.cache";
  return base + "/pjrt-neuron/compile-cache";
}

}  // namespace pjrt_neuron::settings
