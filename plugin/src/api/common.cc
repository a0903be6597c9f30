// The C API glue shared by every entry: errors, struct-size checks, named values, programs.
#include "api/common.h"

#include <cstring>
#include <new>

namespace pjrt_neuron::api {

PJRT_Error* MakeError(const Status& status) {
  if (status.ok()) return nullptr;
  return new (std::nothrow) PJRT_Error(status);
}

PJRT_Error* ErrorFrom(const char* function, const Status& status) {
  if (status.ok()) return nullptr;
  return new (std::nothrow) PJRT_Error(status.WithContext(function), function);
}

PJRT_Error* ErrorFromCurrentException(const char* function) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return MakeError(Status(ErrorCode::kResourceExhausted, std::string(function) + ": out of host memory"));
  } catch (const std::exception& e) {
    return MakeError(Internal(std::string(function) + ": internal error: " + e.what()));
  } catch (...) {
    return MakeError(Internal(std::string(function) + ": internal error"));
  }
}

Status ArgsError(const void* args, size_t needed_size, const char* type_name) {
  if (args == nullptr) return InvalidArgument(std::string("the ") + type_name + " pointer is null");
  size_t given = *static_cast<const size_t*>(args);
  return InvalidArgument(std::string(type_name) + ".struct_size is " + std::to_string(given) +
                         ", too small for the fields this call needs (" + std::to_string(needed_size) +
                         " bytes); set struct_size to " + type_name + "_STRUCT_SIZE");
}

Status NotLiveHandle(const void* object, uint32_t kind, const char* what) {
  if (object == nullptr) return InvalidArgument(std::string("`") + what + "` is null");
  const std::string expected = core::handles::KindName(kind);
  if (uint32_t live_kind = core::handles::LiveKind(object); live_kind != 0) {
    return InvalidArgument(std::string("`") + what + "` is a " + core::handles::KindName(live_kind) + ", not a " +
                           expected);
  }
  return InvalidArgument(std::string("`") + what + "` is not a live " + expected + " (destroyed, or never one)");
}

StatusOr<engine::Program> ReadProgram(const PJRT_Program* program, const char* options, size_t options_size,
                                      std::string* options_out) {
  if (program == nullptr) return InvalidArgument("`program` is null");
  PN_REQUIRE_ARGS(program, PJRT_Program, format_size);
  if (program->format == nullptr) return InvalidArgument("the program has no format; use 'hlo' or 'mlir'");
  if (options == nullptr && options_size > 0) {
    return InvalidArgument("`compile_options` is null but its size is " + std::to_string(options_size));
  }
  engine::Program read;
  read.format.assign(program->format, program->format_size);
  read.code = program->code;
  read.code_size = program->code_size;
  options_out->assign(options != nullptr ? options : "", options_size);
  return read;
}

StatusOr<engine::Attributes> ReadNamedValues(const PJRT_NamedValue* values, size_t count) {
  engine::Attributes out;
  if (count > 0 && values == nullptr) return InvalidArgument("named values are null but their count is " + std::to_string(count));
  for (size_t i = 0; i < count; ++i) {
    const PJRT_NamedValue& v = values[i];
    if (v.name == nullptr) return InvalidArgument("named value " + std::to_string(i) + " has no name");
    engine::Attribute a{std::string(v.name, v.name_size), int64_t{0}};
    switch (v.type) {
      case PJRT_NamedValue_kString:
        if (v.string_value == nullptr && v.value_size > 0) return InvalidArgument("option '" + a.name + "' has a null string");
        a.value = std::string(v.string_value ? v.string_value : "", v.value_size);
        break;
      case PJRT_NamedValue_kInt64: a.value = v.int64_value; break;
      case PJRT_NamedValue_kInt64List:
        if (v.int64_array_value == nullptr && v.value_size > 0) return InvalidArgument("option '" + a.name + "' has a null list");
        a.value = std::vector<int64_t>(v.int64_array_value, v.int64_array_value + v.value_size);
        break;
      case PJRT_NamedValue_kFloat: a.value = v.float_value; break;
      case PJRT_NamedValue_kBool: a.value = v.bool_value; break;
      default: return InvalidArgument("option '" + a.name + "' has unknown value type " + std::to_string(v.type));
    }
    out.push_back(std::move(a));
  }
  return out;
}

namespace {

OwnedViewCache<void, NamedValues>& AttributeCache() {
  static auto* cache = new OwnedViewCache<void, NamedValues>();  // never destroyed: entry points may run at exit
  return *cache;
}

}  // namespace

const NamedValues& AttributeViews(const core::DeviceDescription& description) {
  return AttributeCache().Get(&description, [&] { return std::make_unique<NamedValues>(description.attributes); });
}

const NamedValues& AttributeViews(const core::Topology& topology) {
  return AttributeCache().Get(&topology, [&] { return std::make_unique<NamedValues>(topology.attributes()); });
}

void ForgetAttributeViews(const core::Topology& topology) {
  for (const auto& description : topology.descriptions()) AttributeCache().Forget(description.get());
  AttributeCache().Forget(&topology);
}

}  // namespace pjrt_neuron::api
