// The tables, formats and rules the Python package reads from the library instead of keeping
// copies: the version, the settings table and its checks, the compile cache's directory,
// entry format and sizes. Each writes text into the caller's buffer (exports/text_out.h).
#include <cstdint>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "exports/text_out.h"
#include "common/json.h"
#include "common/settings.h"
#include "common/version.h"
#include "core/compile_cache.h"
#include "core/plugin_attributes.h"
#include "core/settings_check.h"

namespace pjrt_neuron::exports {
namespace {

std::vector<std::string> CommaList(const char* text) {
  std::vector<std::string> items;
  std::stringstream parts(text != nullptr ? text : "");
  std::string item;
  while (std::getline(parts, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

std::string CacheFormatJson() {
  json::Writer out;
  return out.BeginObject()
      .Field("magic", core::kCacheEntryMagic)
      .Field("entry_suffix", core::kCacheEntrySuffix)
      .Field("failed_suffix", core::kCacheFailedSuffix)
      .Field("lock_suffix", core::kCacheLockSuffix)
      .Field("temporary_marker", core::kCacheTemporaryMarker)
      .EndObject()
      .text();
}

std::string EntryJson(const core::CacheEntry& entry) {
  json::Writer out;
  out.BeginObject().Field("valid", entry.valid).Field("problem", entry.problem);
  out.Key("header");  // the header line as text: a damaged one need not be JSON
  if (entry.header_json.has_value()) {
    out.String(*entry.header_json);
  } else {
    out.Null();
  }
  return out.Field("payload_bytes", entry.payload_size).EndObject().text();
}

std::string AttributesJson(const engine::Attributes& attributes) {
  json::Writer out;
  out.BeginObject();
  for (const engine::Attribute& a : attributes) {
    out.Key(a.name);
    if (const auto* text = std::get_if<std::string>(&a.value)) {
      out.String(*text);
    } else if (const auto* number = std::get_if<int64_t>(&a.value)) {
      out.Int(*number);
    } else if (const auto* list = std::get_if<std::vector<int64_t>>(&a.value)) {
      out.BeginArray();
      for (int64_t v : *list) out.Int(v);
      out.EndArray();
    } else if (const auto* flag = std::get_if<bool>(&a.value)) {
      out.Bool(*flag);
    } else {
      out.Number(std::get<float>(a.value), 6);
    }
  }
  return out.EndObject().text();
}

}  // namespace
}  // namespace pjrt_neuron::exports

#define PN_PYTHON_EXPORT extern "C" __attribute__((visibility("default")))

// The plugin's version (pyproject.toml's); returns the length needed.
PN_PYTHON_EXPORT long PjrtNeuron_Version(char* out, size_t out_size) {
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::PluginVersion(), out, out_size);
}

// Every setting as a JSON array of {name, kind, default, default_text, meaning, allowed,
// choices, read_by}; returns the length needed.
PN_PYTHON_EXPORT long PjrtNeuron_Settings(char* out, size_t out_size) {
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::settings::TableJson(), out, out_size);
}

// Checks the environment's values of the comma-separated setting `names` (all when null or
// empty). Returns 0 when they are valid, else the length of the error message written to `out`.
PN_PYTHON_EXPORT long PjrtNeuron_CheckSettings(const char* names, char* out, size_t out_size) {
  const pjrt_neuron::Status status = pjrt_neuron::core::CheckSettings(pjrt_neuron::exports::CommaList(names));
  if (status.ok()) {
    pjrt_neuron::exports::CopyToCaller("", out, out_size);
    return 0;
  }
  return pjrt_neuron::exports::CopyToCaller(status.message(), out, out_size);
}

// The compile cache directory the environment selects; returns the length needed.
PN_PYTHON_EXPORT long PjrtNeuron_CompileCacheDirectory(char* out, size_t out_size) {
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::settings::CompileCacheDirectory(), out, out_size);
}

// The entry format's constants as JSON {magic, entry_suffix, failed_suffix, lock_suffix,
// temporary_marker}; returns the length needed.
PN_PYTHON_EXPORT long PjrtNeuron_CompileCacheFormat(char* out, size_t out_size) {
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::exports::CacheFormatJson(), out, out_size);
}

// Reads the entry at `path` as JSON {valid, problem, header (the header line, or null),
// payload_bytes}; returns the length needed, or -1 with the error message in `out`.
PN_PYTHON_EXPORT long PjrtNeuron_InspectCacheEntry(const char* path, char* out, size_t out_size) {
  auto entry = pjrt_neuron::core::ReadCacheEntry(path != nullptr ? path : "");
  if (!entry.ok()) {
    pjrt_neuron::exports::CopyToCaller(entry.status().message(), out, out_size);
    return -1;
  }
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::exports::EntryJson(entry.value()), out, out_size);
}

// Parses a size as PJRT_NEURON_COMPILE_CACHE_MAX_SIZE is parsed (500M, 10G, 1.5GiB, 4096) into
// `bytes`. Returns 0, else the length of the error message written to `message`.
PN_PYTHON_EXPORT long PjrtNeuron_ParseSize(const char* text, int64_t* bytes, char* message, size_t message_size) {
  auto size = pjrt_neuron::settings::ParseSize("", text != nullptr ? text : "");
  if (!size.ok()) return pjrt_neuron::exports::CopyToCaller(size.status().message(), message, message_size);
  if (bytes != nullptr) *bytes = size.value();
  pjrt_neuron::exports::CopyToCaller("", message, message_size);
  return 0;
}

// Which engine a client would run on and, on the Neuron engine, what the runtime and compiler
// report, as a JSON object (core::EngineReport). `with_memory` != 0 opens a runtime session to
// read each core's HBM (claiming the cores for the moment). Returns the length needed.
PN_PYTHON_EXPORT long PjrtNeuron_EngineReport(int with_memory, char* out, size_t out_size) {
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::exports::AttributesJson(pjrt_neuron::core::EngineReport(with_memory != 0)),
                                        out, out_size);
}
