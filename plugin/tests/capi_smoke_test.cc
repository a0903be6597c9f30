// Drives a built libpjrt_neuron.so through the PJRT C API only, the way a framework would:
// create a client, compile and run a StableHLO add, read the result back, and check that
// an unknown program format is refused with INVALID_ARGUMENT.
//
// Usage: capi_smoke_test PLUGIN.so [ENGINE.so]
// ENGINE.so (xla_cpu_pjrt.so) becomes $PJRT_NEURON_ENGINE_LIBRARY unless that is already set.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "pjrt_c_api.h"

namespace {

const PJRT_Api* api = nullptr;
int failures = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

template <typename T>
T Args(size_t struct_size) {
  T args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = struct_size;
  return args;
}
#define ARGS(type) Args<type>(type##_STRUCT_SIZE)

std::string Message(PJRT_Error* error) {
  auto args = ARGS(PJRT_Error_Message_Args);
  args.error = error;
  api->PJRT_Error_Message(&args);
  return std::string(args.message, args.message_size);
}

PJRT_Error_Code Code(PJRT_Error* error) {
  auto args = ARGS(PJRT_Error_GetCode_Args);
  args.error = error;
  PJRT_Error* e = api->PJRT_Error_GetCode(&args);
  CHECK(e == nullptr);
  return args.code;
}

void Destroy(PJRT_Error* error) {
  auto args = ARGS(PJRT_Error_Destroy_Args);
  args.error = error;
  api->PJRT_Error_Destroy(&args);
}

// Aborts the test on an error, printing the plugin's message.
void Ok(PJRT_Error* error, const char* what) {
  if (error == nullptr) return;
  std::fprintf(stderr, "%s failed: %s\n", what, Message(error).c_str());
  Destroy(error);
  std::exit(1);
}
#define OK(call, args) Ok(api->call(&args), #call)

void AwaitAndDestroy(PJRT_Event* event) {
  if (event == nullptr) return;
  auto await = ARGS(PJRT_Event_Await_Args);
  await.event = event;
  OK(PJRT_Event_Await, await);
  auto destroy = ARGS(PJRT_Event_Destroy_Args);
  destroy.event = event;
  OK(PJRT_Event_Destroy, destroy);
}

// A serialized xla.CompileOptionsProto: executable_build_options (3) {num_replicas (4): 1,
// num_partitions (5): 1}. The all-defaults proto would mean 0 replicas.
const std::string kCompileOptions("\x1a\x04\x20\x01\x28\x01", 6);

const char kAddProgram[] = R"(
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
})";

PJRT_Error* Compile(PJRT_Client* client, const char* format, PJRT_LoadedExecutable** out) {
  std::string code = kAddProgram;
  auto program = ARGS(PJRT_Program);
  program.code = &code[0];
  program.code_size = code.size();
  program.format = format;
  program.format_size = std::strlen(format);
  auto args = ARGS(PJRT_Client_Compile_Args);
  args.client = client;
  args.program = &program;
  args.compile_options = kCompileOptions.data();
  args.compile_options_size = kCompileOptions.size();
  PJRT_Error* error = api->PJRT_Client_Compile(&args);
  *out = args.executable;
  return error;
}

PJRT_Buffer* ToDevice(PJRT_Client* client, PJRT_Device* device, const std::vector<float>& data) {
  const int64_t dims[] = {2, 3};
  auto args = ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client;
  args.data = data.data();
  args.type = PJRT_Buffer_Type_F32;
  args.dims = dims;
  args.num_dims = 2;
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args.device = device;
  OK(PJRT_Client_BufferFromHostBuffer, args);
  AwaitAndDestroy(args.done_with_host_buffer);
  return args.buffer;
}

std::vector<float> ToHost(PJRT_Buffer* buffer) {
  std::vector<float> out(6, -1.0f);
  auto args = ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buffer;
  args.dst = out.data();
  args.dst_size = out.size() * sizeof(float);
  OK(PJRT_Buffer_ToHostBuffer, args);
  AwaitAndDestroy(args.event);
  return out;
}

void DestroyBuffer(PJRT_Buffer* buffer) {
  auto args = ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = buffer;
  OK(PJRT_Buffer_Destroy, args);
}

std::string Absolute(const char* path) {
  char resolved[PATH_MAX];
  CHECK(realpath(path, resolved) != nullptr);
  return resolved;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PLUGIN.so [ENGINE.so]\n", argv[0]);
    return 2;
  }
  if (argc > 2) setenv("PJRT_NEURON_ENGINE_LIBRARY", Absolute(argv[2]).c_str(), /*overwrite=*/0);
  // NeuronCores are exclusive between processes: an instance of its own, so another process
  // holding core 0 (a test run beside this one) does not fail it.
  char lock_dir[] = "/tmp/pjrt-neuron-smoke-locks-XXXXXX";
  CHECK(mkdtemp(lock_dir) != nullptr);
  setenv("PJRT_NEURON_LOCK_DIR", lock_dir, /*overwrite=*/0);

  const std::string plugin = Absolute(argv[1]);
  void* handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen(%s): %s\n", plugin.c_str(), dlerror());
    return 1;
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(handle, "GetPjrtApi"));
  CHECK(get_api != nullptr);
  api = get_api();
  CHECK(api != nullptr);
  CHECK(api->pjrt_api_version.major_version == PJRT_API_MAJOR);
  std::printf("plugin %s speaks PJRT C API %d.%d\n", plugin.c_str(), api->pjrt_api_version.major_version,
              api->pjrt_api_version.minor_version);

  auto init = ARGS(PJRT_Plugin_Initialize_Args);
  OK(PJRT_Plugin_Initialize, init);

  auto create = ARGS(PJRT_Client_Create_Args);
  OK(PJRT_Client_Create, create);
  PJRT_Client* client = create.client;
  CHECK(client != nullptr);

  auto platform = ARGS(PJRT_Client_PlatformName_Args);
  platform.client = client;
  OK(PJRT_Client_PlatformName, platform);
  CHECK(std::string(platform.platform_name, platform.platform_name_size) == "neuron");

  auto devices = ARGS(PJRT_Client_AddressableDevices_Args);
  devices.client = client;
  OK(PJRT_Client_AddressableDevices, devices);
  CHECK(devices.num_addressable_devices >= 1);
  PJRT_Device* device = devices.addressable_devices[0];

  // add(x, y) on a NeuronCore, checked element by element.
  PJRT_LoadedExecutable* executable = nullptr;
  Ok(Compile(client, "mlir", &executable), "PJRT_Client_Compile");
  CHECK(executable != nullptr);

  const std::vector<float> x = {0, 1, 2, 3, 4, 5};
  const std::vector<float> y = {10, 20, 30, 40, 50, 60.5f};
  PJRT_Buffer* inputs[] = {ToDevice(client, device, x), ToDevice(client, device, y)};
  PJRT_Buffer* const* argument_lists[] = {inputs};
  PJRT_Buffer* outputs[1] = {nullptr};
  PJRT_Buffer** output_lists[] = {outputs};
  PJRT_Event* complete[1] = {nullptr};

  auto options = ARGS(PJRT_ExecuteOptions);
  auto execute = ARGS(PJRT_LoadedExecutable_Execute_Args);
  execute.executable = executable;
  execute.options = &options;
  execute.argument_lists = argument_lists;
  execute.num_devices = 1;
  execute.num_args = 2;
  execute.output_lists = output_lists;
  execute.device_complete_events = complete;
  OK(PJRT_LoadedExecutable_Execute, execute);
  AwaitAndDestroy(complete[0]);
  CHECK(outputs[0] != nullptr);

  const std::vector<float> sum = ToHost(outputs[0]);
  for (size_t i = 0; i < sum.size(); ++i) {
    if (sum[i] != x[i] + y[i]) {
      std::fprintf(stderr, "element %zu: got %g, want %g\n", i, sum[i], x[i] + y[i]);
      ++failures;
    }
  }
  std::printf("add: [%g %g %g; %g %g %g]\n", sum[0], sum[1], sum[2], sum[3], sum[4], sum[5]);

  // An unknown program format is the caller's mistake: INVALID_ARGUMENT, not a crash.
  PJRT_LoadedExecutable* bogus = nullptr;
  PJRT_Error* error = Compile(client, "not-a-format", &bogus);
  if (error == nullptr) {
    std::fprintf(stderr, "compiling format 'not-a-format' succeeded\n");
    ++failures;
  } else {
    const PJRT_Error_Code code = Code(error);
    const std::string message = Message(error);
    std::printf("unknown format: code %d, \"%s\"\n", static_cast<int>(code), message.c_str());
    if (code != PJRT_Error_Code_INVALID_ARGUMENT) {
      std::fprintf(stderr, "unknown format: code %d, want INVALID_ARGUMENT (%d)\n", static_cast<int>(code),
                   static_cast<int>(PJRT_Error_Code_INVALID_ARGUMENT));
      ++failures;
    }
    if (message.find("not-a-format") == std::string::npos) {
      std::fprintf(stderr, "the message does not name the format\n");
      ++failures;
    }
    Destroy(error);
  }

  DestroyBuffer(outputs[0]);
  for (PJRT_Buffer* input : inputs) DestroyBuffer(input);
  auto destroy_executable = ARGS(PJRT_LoadedExecutable_Destroy_Args);
  destroy_executable.executable = executable;
  OK(PJRT_LoadedExecutable_Destroy, destroy_executable);
  auto destroy_client = ARGS(PJRT_Client_Destroy_Args);
  destroy_client.client = client;
  OK(PJRT_Client_Destroy, destroy_client);

  if (failures == 0) {
    std::printf("capi_smoke_test: OK\n");
  } else {
    std::printf("capi_smoke_test: %d check(s) failed\n", failures);
  }
  return failures == 0 ? 0 : 1;
}
