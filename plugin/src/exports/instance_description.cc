// PjrtNeuron_DescribeInstance, PjrtNeuron_InstanceTypes and PjrtNeuron_CoreGenerations: the instance table, the
// per-generation figures estimates use, and who holds
// which core, as JSON, so the Python package reads the one table in the plugin instead of keeping its own.
#include <string>

#include "exports/text_out.h"
#include "common/json.h"
#include "core/core_selection.h"
#include "core/instance.h"

namespace pjrt_neuron::exports {
namespace {

const char* LinksName(core::ChipLinks links) {
  switch (links) {
    case core::ChipLinks::kTorus2D: return "2d-torus";
    case core::ChipLinks::kRing: return "ring";
    case core::ChipLinks::kNone: return "none";
  }
  return "none";
}

std::string Describe(const core::InstanceShape& shape) {
  const core::InstanceType& type = *shape.type;
  std::vector<core::CoreHolder> holders = core::CoreHolders(type.name, shape.total_cores());
  json::Writer out;
  out.BeginObject()
      .Field("instance_type", type.name)
      .Field("logical_nc_config", shape.logical_nc_config)
      .Field("core_generation", type.core_generation)
      .Field("total_cores", shape.total_cores())
      .Field("hbm_bytes_per_core", shape.hbm_bytes_per_core)
      .Field("chip_links", LinksName(type.links))
      .Field("lock_directory", core::LockDirectory(type.name));
  out.Key("chips").BeginArray();
  for (int chip = 0; chip < type.chips; ++chip) {
    std::vector<int> cores;
    for (int core = chip * shape.cores_per_chip; core < (chip + 1) * shape.cores_per_chip; ++core) {
      cores.push_back(core);
    }
    out.BeginObject()
        .Field("chip", chip)
        .Field("cores", shape.cores_per_chip)
        .Field("core_ids", cores)
        .Field("memory_bytes", type.hbm_bytes_per_chip)
        .Field("coordinates", shape.chip_coordinates(chip))
        .Field("connected_chips", shape.connected_chips(chip));
    out.Key("holders").BeginArray();
    for (int core : cores) {
      if (holders[core].pid != 0) out.BeginObject().Field("core", core).Field("pid", holders[core].pid).EndObject();
    }
    out.EndArray().EndObject();
  }
  return out.EndArray().EndObject().text();
}

std::string InstanceTypesJson() {
  json::Writer out;
  out.BeginArray();
  for (const core::InstanceType& type : core::KnownInstanceTypes()) {
    out.BeginObject()
        .Field("name", type.name)
        .Field("chips", type.chips)
        .Field("physical_cores_per_chip", type.physical_cores_per_chip)
        .Field("hbm_bytes_per_chip", type.hbm_bytes_per_chip)
        .Field("core_generation", type.core_generation)
        .Field("default_logical_nc_config", type.default_logical_nc_config)
        .Field("max_logical_nc_config", type.max_logical_nc_config)
        .Field("chip_links", LinksName(type.links))
        .Field("torus_width", type.torus_width)
        .Key("on_demand_usd_per_hour").Number(type.on_demand_usd_per_hour, 4)
        .EndObject();
  }
  return out.EndArray().text();
}

std::string CoreGenerationsJson() {
  json::Writer out;
  out.BeginArray();
  for (const core::CoreGenerationFigures& g : core::KnownCoreGenerations()) {
    out.BeginObject()
        .Field("core_generation", g.core_generation)
        .Key("matmul_tflops_bf16").Number(g.matmul_tflops_bf16, 3)
        .Key("matmul_tflops_fp8").Number(g.matmul_tflops_fp8, 3)
        .Key("matmul_tflops_fp32").Number(g.matmul_tflops_fp32, 3)
        .Key("vector_tflops_per_core").Number(g.vector_tflops_per_core, 3)
        .Key("scalar_tflops_per_core").Number(g.scalar_tflops_per_core, 3)
        .Key("hbm_bytes_per_second").Number(g.hbm_bytes_per_second, 0)
        .Key("link_bytes_per_second").Number(g.link_bytes_per_second, 0)
        .Field("sbuf_bytes_per_core", g.sbuf_bytes_per_core)
        .EndObject();
  }
  return out.EndArray().text();
}

}  // namespace
}  // namespace pjrt_neuron::exports

// Writes the description of `instance_type` (logical NeuronCore config `lnc`, 0 for the
// default) into `out`; returns the length needed, or -1 with the error message in `out`.
extern "C" __attribute__((visibility("default"))) long PjrtNeuron_DescribeInstance(const char* instance_type, int lnc,
                                                                                   char* out, size_t out_size) {
  auto shape = pjrt_neuron::core::ShapeInstance(instance_type ? instance_type : "", lnc);
  if (!shape.ok()) {
    pjrt_neuron::exports::CopyToCaller(shape.status().message(), out, out_size);
    return -1;
  }
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::exports::Describe(shape.value()), out, out_size);
}

// Writes the per-generation figures estimates use as a JSON array; returns the length needed.
extern "C" __attribute__((visibility("default"))) long PjrtNeuron_CoreGenerations(char* out, size_t out_size) {
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::exports::CoreGenerationsJson(), out, out_size);
}

// Writes the instance table as a JSON array, in its order; returns the length needed.
extern "C" __attribute__((visibility("default"))) long PjrtNeuron_InstanceTypes(char* out, size_t out_size) {
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::exports::InstanceTypesJson(), out, out_size);
}
