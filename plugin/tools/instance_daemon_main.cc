// pjrt-neuron-instanced: the per-host process that owns a simulated instance's NeuronCores in
// multi-process jobs, or (--compile-helper) the process a client's compilations run in. It
// loads the plugin library it was started by and serves from it.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LIBRARY ADDRESS NUM_CORES ENGINE_LIBRARY\n", argv[0]);
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "%s: %s\n", argv[0], dlerror());
    return 1;
  }
  using Serve = int (*)(int, char**);
  const bool compile_helper = argc >= 3 && std::strcmp(argv[2], "--compile-helper") == 0;
  auto serve = reinterpret_cast<Serve>(
      dlsym(library, compile_helper ? "PjrtNeuron_ServeCompiles" : "PjrtNeuron_ServeInstance"));
  if (serve == nullptr) {
    std::fprintf(stderr, "%s: %s is not a pjrt-neuron plugin of this version\n", argv[0], argv[1]);
    return 1;
  }
  return compile_helper ? serve(argc - 3, argv + 3) : serve(argc - 2, argv + 2);
}
