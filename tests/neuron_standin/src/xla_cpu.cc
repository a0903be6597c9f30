// The arithmetic of the simulated cores: XLA's CPU engine (xla_cpu_pjrt.so) through the PJRT C
// API, so results are real. Its own small PJRT client, shared with nothing in plugin/.
#include "xla_cpu.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

namespace standin {
namespace {

template <typename Args>
Args Zeroed(size_t struct_size) {
  Args args;
  std::memset(&args, 0, sizeof args);
  args.struct_size = struct_size;
  return args;
}

void AppendVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// CompileOptionsProto{executable_build_options(3): {device_ordinal(1): -1,
// num_replicas(4), num_partitions(5): 1}}: the least the CPU compiler needs.
std::string CompileOptions(int replicas) {
  std::string build;
  build.push_back(0x08);
  AppendVarint(&build, static_cast<uint64_t>(int64_t{-1}));
  build.push_back(0x20);
  AppendVarint(&build, static_cast<uint64_t>(replicas));
  build.push_back(0x28);
  AppendVarint(&build, 1);
  std::string options;
  options.push_back(0x1a);
  AppendVarint(&options, build.size());
  return options + build;
}

// The plugin is loaded once a process and never unloaded: XLA does not survive dlclose.
const PJRT_Api* LoadPlugin(const std::string& path, std::string* error) {
  static std::mutex mutex;
  static const PJRT_Api* api = nullptr;
  static std::string loaded_path;
  std::lock_guard<std::mutex> lock(mutex);
  if (api) {
    if (path != loaded_path) {
      *error = "this process already runs XLA's CPU engine from " + loaded_path;
      return nullptr;
    }
    return api;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    *error = std::string("cannot load XLA's CPU engine: ") + dlerror();
    return nullptr;
  }
  using GetPjrtApi = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApi>(dlsym(handle, "GetPjrtApi"));
  const PJRT_Api* candidate = get_api ? get_api() : nullptr;
  if (!candidate) {
    *error = path + " exports no GetPjrtApi";
    return nullptr;
  }
  if (candidate->pjrt_api_version.major_version != PJRT_API_MAJOR) {
    *error = path + " speaks PJRT major version " +
             std::to_string(candidate->pjrt_api_version.major_version);
    return nullptr;
  }
  auto init = Zeroed<PJRT_Plugin_Initialize_Args>(PJRT_Plugin_Initialize_Args_STRUCT_SIZE);
  if (PJRT_Error* failure = candidate->PJRT_Plugin_Initialize(&init)) {
    auto message = Zeroed<PJRT_Error_Message_Args>(PJRT_Error_Message_Args_STRUCT_SIZE);
    message.error = failure;
    candidate->PJRT_Error_Message(&message);
    *error = "XLA's CPU engine did not initialise: " +
             std::string(message.message, message.message_size);
    return nullptr;
  }
  api = candidate;
  loaded_path = path;
  return api;
}

}  // namespace

XlaProgram::~XlaProgram() {
  if (!executable_) return;
  auto args = Zeroed<PJRT_LoadedExecutable_Destroy_Args>(
      PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE);
  args.executable = executable_;
  engine_->TakeError(engine_->api_->PJRT_LoadedExecutable_Destroy(&args));
}

std::shared_ptr<XlaCpuEngine> XlaCpuEngine::Create(const std::string& plugin_path, int devices,
                                                   std::string* error) {
  const PJRT_Api* api = LoadPlugin(plugin_path, error);
  if (!api) return nullptr;
  std::shared_ptr<XlaCpuEngine> engine(new XlaCpuEngine);
  engine->api_ = api;
  PJRT_NamedValue device_count;
  std::memset(&device_count, 0, sizeof device_count);
  device_count.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  device_count.name = "cpu_device_count";
  device_count.name_size = std::strlen(device_count.name);
  device_count.type = PJRT_NamedValue_kInt64;
  device_count.int64_value = devices;
  device_count.value_size = 1;
  auto args = Zeroed<PJRT_Client_Create_Args>(PJRT_Client_Create_Args_STRUCT_SIZE);
  args.create_options = &device_count;
  args.num_options = 1;
  if (PJRT_Error* failure = api->PJRT_Client_Create(&args)) {
    *error = "XLA's CPU engine made no client: " + engine->TakeError(failure);
    return nullptr;
  }
  engine->client_ = args.client;
  return engine;
}

XlaCpuEngine::~XlaCpuEngine() {
  if (!client_) return;
  auto args = Zeroed<PJRT_Client_Destroy_Args>(PJRT_Client_Destroy_Args_STRUCT_SIZE);
  args.client = client_;
  TakeError(api_->PJRT_Client_Destroy(&args));
}

std::string XlaCpuEngine::TakeError(PJRT_Error* error) const {
  if (!error) return "";
  auto message = Zeroed<PJRT_Error_Message_Args>(PJRT_Error_Message_Args_STRUCT_SIZE);
  message.error = error;
  api_->PJRT_Error_Message(&message);
  std::string text(message.message, message.message_size);
  auto destroy = Zeroed<PJRT_Error_Destroy_Args>(PJRT_Error_Destroy_Args_STRUCT_SIZE);
  destroy.error = error;
  api_->PJRT_Error_Destroy(&destroy);
  return text;
}

bool XlaCpuEngine::Await(PJRT_Event* event, std::string* error) const {
  if (!event) return true;
  auto await = Zeroed<PJRT_Event_Await_Args>(PJRT_Event_Await_Args_STRUCT_SIZE);
  await.event = event;
  std::string failure = TakeError(api_->PJRT_Event_Await(&await));
  auto destroy = Zeroed<PJRT_Event_Destroy_Args>(PJRT_Event_Destroy_Args_STRUCT_SIZE);
  destroy.event = event;
  TakeError(api_->PJRT_Event_Destroy(&destroy));
  if (failure.empty()) return true;
  if (error->empty()) *error = failure;
  return false;
}

void XlaCpuEngine::DestroyBuffer(PJRT_Buffer* buffer) const {
  if (!buffer) return;
  auto args = Zeroed<PJRT_Buffer_Destroy_Args>(PJRT_Buffer_Destroy_Args_STRUCT_SIZE);
  args.buffer = buffer;
  TakeError(api_->PJRT_Buffer_Destroy(&args));
}

std::unique_ptr<XlaProgram> XlaCpuEngine::Compile(const std::string& hlo_module_proto,
                                                  int replicas, std::string* error) {
  auto program = Zeroed<PJRT_Program>(PJRT_Program_STRUCT_SIZE);
  program.code = const_cast<char*>(hlo_module_proto.data());
  program.code_size = hlo_module_proto.size();
  program.format = "hlo";
  program.format_size = 3;
  std::string options = CompileOptions(replicas);
  auto args = Zeroed<PJRT_Client_Compile_Args>(PJRT_Client_Compile_Args_STRUCT_SIZE);
  args.client = client_;
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  if (PJRT_Error* failure = api_->PJRT_Client_Compile(&args)) {
    *error = "XLA's CPU compiler refused the program: " + TakeError(failure);
    return nullptr;
  }
  std::unique_ptr<XlaProgram> compiled(new XlaProgram);
  compiled->engine_ = shared_from_this();
  compiled->executable_ = args.executable;
  compiled->replicas_ = replicas;

  auto get = Zeroed<PJRT_LoadedExecutable_GetExecutable_Args>(
      PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE);
  get.loaded_executable = args.executable;
  if (PJRT_Error* failure = api_->PJRT_LoadedExecutable_GetExecutable(&get)) {
    *error = TakeError(failure);
    return nullptr;
  }
  auto outputs = Zeroed<PJRT_Executable_NumOutputs_Args>(PJRT_Executable_NumOutputs_Args_STRUCT_SIZE);
  outputs.executable = get.executable;
  std::string failure = TakeError(api_->PJRT_Executable_NumOutputs(&outputs));
  auto destroy = Zeroed<PJRT_Executable_Destroy_Args>(PJRT_Executable_Destroy_Args_STRUCT_SIZE);
  destroy.executable = get.executable;
  TakeError(api_->PJRT_Executable_Destroy(&destroy));
  if (!failure.empty()) {
    *error = failure;
    return nullptr;
  }
  compiled->output_count_ = outputs.num_outputs;
  return compiled;
}

bool XlaCpuEngine::Execute(const XlaProgram& program,
                           const std::vector<std::vector<HostArray>>& arguments,
                           const std::vector<std::vector<HostDestination>>& results,
                           std::string* error) {
  const size_t replicas = static_cast<size_t>(program.replicas());
  if (arguments.size() != replicas || results.size() != replicas) {
    *error = "argument lists for " + std::to_string(arguments.size()) + " replicas, program has " +
             std::to_string(replicas);
    return false;
  }
  auto devices = Zeroed<PJRT_LoadedExecutable_AddressableDevices_Args>(
      PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE);
  devices.executable = program.executable_;
  if (PJRT_Error* failure = api_->PJRT_LoadedExecutable_AddressableDevices(&devices)) {
    *error = TakeError(failure);
    return false;
  }
  if (devices.num_addressable_devices != replicas) {
    *error = "the program runs on " + std::to_string(devices.num_addressable_devices) +
             " devices, not " + std::to_string(replicas);
    return false;
  }

  auto deleter = [this](PJRT_Buffer* b) { DestroyBuffer(b); };
  using Buffer = std::unique_ptr<PJRT_Buffer, decltype(deleter)>;
  std::vector<std::vector<Buffer>> inputs(replicas);
  static const char kNoElements = 0;
  for (size_t r = 0; r < replicas; ++r) {
    for (const HostArray& array : arguments[r]) {
      auto args = Zeroed<PJRT_Client_BufferFromHostBuffer_Args>(
          PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE);
      args.client = client_;
      args.data = array.data ? array.data : &kNoElements;
      args.type = static_cast<PJRT_Buffer_Type>(array.pjrt_type);
      args.dims = array.dims.data();
      args.num_dims = array.dims.size();
      args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
      args.device = devices.addressable_devices[r];
      if (PJRT_Error* failure = api_->PJRT_Client_BufferFromHostBuffer(&args)) {
        *error = "copying an input to XLA's CPU engine: " + TakeError(failure);
        return false;
      }
      inputs[r].emplace_back(args.buffer, deleter);
      if (!Await(args.done_with_host_buffer, error)) return false;
    }
  }

  std::vector<std::vector<PJRT_Buffer*>> input_lists(replicas);
  std::vector<PJRT_Buffer* const*> input_pointers(replicas);
  std::vector<std::vector<PJRT_Buffer*>> output_lists(replicas);
  std::vector<PJRT_Buffer**> output_pointers(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    for (const Buffer& b : inputs[r]) input_lists[r].push_back(b.get());
    input_pointers[r] = input_lists[r].data();
    output_lists[r].assign(program.output_count(), nullptr);
    output_pointers[r] = output_lists[r].data();
  }
  std::vector<PJRT_Event*> done(replicas, nullptr);
  auto options = Zeroed<PJRT_ExecuteOptions>(PJRT_ExecuteOptions_STRUCT_SIZE);
  auto execute = Zeroed<PJRT_LoadedExecutable_Execute_Args>(
      PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE);
  execute.executable = program.executable_;
  execute.options = &options;
  execute.argument_lists = input_pointers.data();
  execute.num_devices = replicas;
  execute.num_args = replicas ? arguments[0].size() : 0;
  execute.output_lists = output_pointers.data();
  execute.device_complete_events = done.data();
  if (PJRT_Error* failure = api_->PJRT_LoadedExecutable_Execute(&execute)) {
    *error = "XLA's CPU engine failed to run the program: " + TakeError(failure);
    return false;
  }
  std::vector<std::vector<Buffer>> outputs(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    for (PJRT_Buffer* b : output_lists[r]) outputs[r].emplace_back(b, deleter);
  }
  bool ok = true;
  for (PJRT_Event* event : done) ok = Await(event, error) && ok;
  if (!ok) return false;

  for (size_t r = 0; r < replicas; ++r) {
    if (results[r].size() != outputs[r].size()) {
      *error = "the program has " + std::to_string(outputs[r].size()) + " results, the NEFF " +
               std::to_string(results[r].size());
      return false;
    }
    for (size_t i = 0; i < outputs[r].size(); ++i) {
      const HostDestination& destination = results[r][i];
      if (!destination.data) continue;
      // Ask for the dense row-major layout that NEFF tensors have, whatever the device layout.
      std::vector<int64_t> minor_to_major(destination.rank);
      for (size_t d = 0; d < destination.rank; ++d) minor_to_major[d] = destination.rank - 1 - d;
      auto layout = Zeroed<PJRT_Buffer_MemoryLayout>(PJRT_Buffer_MemoryLayout_STRUCT_SIZE);
      layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
      layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
      layout.tiled.minor_to_major = minor_to_major.data();
      layout.tiled.minor_to_major_size = minor_to_major.size();
      auto query = Zeroed<PJRT_Buffer_ToHostBuffer_Args>(PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE);
      query.src = outputs[r][i].get();
      query.host_layout = &layout;
      if (PJRT_Error* failure = api_->PJRT_Buffer_ToHostBuffer(&query)) {
        *error = TakeError(failure);
        return false;
      }
      if (query.dst_size != destination.size) {
        *error = "result " + std::to_string(i) + " is " + std::to_string(query.dst_size) +
                 " bytes, its tensor " + std::to_string(destination.size);
        return false;
      }
      auto copy = Zeroed<PJRT_Buffer_ToHostBuffer_Args>(PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE);
      copy.src = outputs[r][i].get();
      copy.host_layout = &layout;
      copy.dst = destination.data;
      copy.dst_size = destination.size;
      if (PJRT_Error* failure = api_->PJRT_Buffer_ToHostBuffer(&copy)) {
        *error = TakeError(failure);
        return false;
      }
      if (!Await(copy.event, error)) return false;
    }
  }
  return true;
}

}  // namespace standin
