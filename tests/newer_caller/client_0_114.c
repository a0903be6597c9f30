/* A PJRT C API caller that reads errors and memories the way callers of 0.112 to 0.114 (JAX 0.11)
 * do: through the function table that leads each PJRT_Error and PJRT_Memory, and through the
 * PJRT_Api slots added after 0.81. Written from the header's published facts, apart from the
 * plugin; it is pointed at a real 0.115 plugin (the newer engine build) as well as at ours.
 *
 * Usage: client_0_114 PLUGIN.so [bad-input]   Prints one "key value" line per finding; exit 0 when
 * done. With bad-input it also passes what a careless caller might (for plugins that check). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt_c_api.h" /* the 0.81 header: the table's first 123 slots and the older structs */

typedef void (*PayloadVisitor)(const char* key, size_t key_size, const char* value, size_t value_size, void* user);
typedef struct {
  size_t struct_size;
  size_t instance_size;
  void* extension_start;
  void (*destroy)(PJRT_Error*);
  void (*message)(const PJRT_Error*, const char**, size_t*);
  PJRT_Error_Code (*get_code)(const PJRT_Error*);
  void (*for_each_payload)(const PJRT_Error*, PayloadVisitor, void*);
} ErrorTable;
typedef struct {
  size_t struct_size;
  void* extension_start;
  size_t instance_struct_size;
  void* (*get_user_data)(PJRT_Memory*, const void* key);
  void (*set_user_data)(PJRT_Memory*, const void* key, void* data, void (*destructor)(void*));
} MemoryTable;
typedef struct { size_t struct_size; void* extension_start; const PJRT_Error* error; PayloadVisitor visitor; void* user; } ForEachPayloadArgs;
typedef struct { size_t struct_size; void* extension_start; const PJRT_TopologyDescription* topology; uint64_t fingerprint; } FingerprintArgs;
typedef struct { size_t struct_size; void* extension_start; const PJRT_TopologyDescription* topology; const int* ids; size_t num_ids; } KindIdsArgs;
typedef struct { size_t struct_size; void* extension_start; PJRT_Device* device; const PJRT_NamedValue* attributes; size_t num_attributes; void* device_attributes; void (*deleter)(void*); } GetAttributesArgs;
typedef struct { size_t struct_size; void* extension_start; PJRT_Device* device; } ClearMemoryStatsArgs;
typedef PJRT_Error* (*Entry)(void* args);

/* Slots after the 0.81 table (123 pointer-sized slots), in the 0.114 header's order. */
enum { kSlotForEachPayload = 137, kSlotFingerprint = 138, kSlotClearMemoryStats = 140, kSlotGetMemorySpaceKindIds = 142,
       kSlotGetAttributes = 133, kSlotCount = 143 };

static const PJRT_Api* api;
static Entry Slot(int index) { return ((Entry*)api)[index]; }

static void Fail(const char* what) {
  printf("failed %s\n", what);
  exit(1);
}

static void Check(PJRT_Error* error, const char* what) {
  if (error == NULL) return;
  const ErrorTable* table = *(const ErrorTable* const*)error;
  const char* message;
  size_t size;
  table->message(error, &message, &size);
  printf("error_in %s %.*s\n", what, (int)size, message);
  exit(1);
}

static void PrintPayload(const char* key, size_t key_size, const char* value, size_t value_size, void* user) {
  printf("%s %.*s=%.*s\n", (const char*)user, (int)key_size, key, (int)value_size, value);
}

static int destructor_calls;
static void CountDestructor(void* data) {
  destructor_calls++;
  printf("destructor %s\n", (const char*)data);
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) Fail("usage");
  const int bad_input = argc == 3 && strcmp(argv[2], "bad-input") == 0;
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) Fail(dlerror());
  const PJRT_Api* (*get_api)(void) = (const PJRT_Api* (*)(void))dlsym(library, "GetPjrtApi");
  if (get_api == NULL) Fail("GetPjrtApi");
  api = get_api();
  printf("version %d.%d\n", api->pjrt_api_version.major_version, api->pjrt_api_version.minor_version);
  printf("api_slots %zu\n", api->struct_size / sizeof(void*));
  if (api->struct_size < kSlotCount * sizeof(void*)) Fail("a table shorter than 0.114's");
  for (int i = 5; i < kSlotCount; ++i) {
    if (((void**)api)[i] == NULL) Fail("a null slot");
  }

  PJRT_Plugin_Initialize_Args init = {PJRT_Plugin_Initialize_Args_STRUCT_SIZE, NULL};
  Check(api->PJRT_Plugin_Initialize(&init), "PJRT_Plugin_Initialize");
  PJRT_Client_Create_Args create;
  memset(&create, 0, sizeof(create));
  create.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  Check(api->PJRT_Client_Create(&create), "PJRT_Client_Create");
  PJRT_Client* client = create.client;

  /* An error, read through its own table and through the API; both must agree. */
  PJRT_Client_LookupDevice_Args lookup;
  memset(&lookup, 0, sizeof(lookup));
  lookup.struct_size = PJRT_Client_LookupDevice_Args_STRUCT_SIZE;
  lookup.client = client;
  lookup.id = 123456;
  PJRT_Error* error = api->PJRT_Client_LookupDevice(&lookup);
  if (error == NULL) Fail("no error for an absent device");
  const ErrorTable* errors = *(const ErrorTable* const*)error;
  printf("error_table_size %zu\n", errors->struct_size);
  const char* message;
  size_t message_size;
  errors->message(error, &message, &message_size);
  printf("error_message %.*s\n", (int)message_size, message);
  printf("error_code %d\n", (int)errors->get_code(error));
  PJRT_Error_Message_Args api_message = {PJRT_Error_Message_Args_STRUCT_SIZE, NULL, error, NULL, 0};
  api->PJRT_Error_Message(&api_message);
  PJRT_Error_GetCode_Args api_code = {PJRT_Error_GetCode_Args_STRUCT_SIZE, NULL, error, 0};
  Check(api->PJRT_Error_GetCode(&api_code), "PJRT_Error_GetCode");
  printf("error_api_agrees %d\n", api_message.message_size == message_size &&
                                      memcmp(api_message.message, message, message_size) == 0 &&
                                      api_code.code == errors->get_code(error));
  errors->for_each_payload(error, PrintPayload, "payload_table");
  ForEachPayloadArgs payloads = {sizeof(ForEachPayloadArgs), NULL, error, PrintPayload, "payload_api"};
  Check(Slot(kSlotForEachPayload)(&payloads), "PJRT_Error_ForEachPayload");
  if (bad_input) {
    ForEachPayloadArgs no_visitor = {sizeof(ForEachPayloadArgs), NULL, error, NULL, NULL};
    PJRT_Error* refused = Slot(kSlotForEachPayload)(&no_visitor);
    if (refused == NULL) Fail("a null visitor was accepted");
    const ErrorTable* table = *(const ErrorTable* const*)refused;
    table->message(refused, &message, &message_size);
    printf("null_visitor %d %.*s\n", (int)table->get_code(refused), (int)message_size, message);
    table->destroy(refused);
  }
  errors->destroy(error);

  /* Memories: the caller's data kept under its keys. */
  PJRT_Client_AddressableMemories_Args memories;
  memset(&memories, 0, sizeof(memories));
  memories.struct_size = PJRT_Client_AddressableMemories_Args_STRUCT_SIZE;
  memories.client = client;
  Check(api->PJRT_Client_AddressableMemories(&memories), "PJRT_Client_AddressableMemories");
  printf("memories %zu\n", memories.num_addressable_memories);
  PJRT_Memory* memory = memories.addressable_memories[0];
  const MemoryTable* memory_table = *(const MemoryTable* const*)memory;
  printf("memory_table_size %zu\n", memory_table->struct_size);
  static const char key_a = 'a', key_b = 'b';
  memory_table->set_user_data(memory, &key_a, "first", CountDestructor);
  printf("user_data_a %s\n", (const char*)memory_table->get_user_data(memory, &key_a));
  printf("user_data_b_absent %d\n", memory_table->get_user_data(memory, &key_b) == NULL);
  memory_table->set_user_data(memory, &key_a, "second", CountDestructor); /* replaces: "first" destroyed */
  printf("user_data_a %s\n", (const char*)memory_table->get_user_data(memory, &key_a));
  printf("destructor_calls_before_destroy %d\n", destructor_calls);
  if (bad_input) {
    /* Not a memory: reads as holding nothing and keeps nothing, without a crash. */
    static char not_a_memory[64];
    memory_table->set_user_data((PJRT_Memory*)not_a_memory, &key_a, "stray", CountDestructor);
    printf("stray_user_data_absent %d\n", memory_table->get_user_data((PJRT_Memory*)not_a_memory, &key_a) == NULL);
  }

  /* Topology and device entries a 0.114 caller calls. */
  PJRT_Client_TopologyDescription_Args topology;
  memset(&topology, 0, sizeof(topology));
  topology.struct_size = PJRT_Client_TopologyDescription_Args_STRUCT_SIZE;
  topology.client = client;
  Check(api->PJRT_Client_TopologyDescription(&topology), "PJRT_Client_TopologyDescription");
  FingerprintArgs first = {sizeof(FingerprintArgs), NULL, topology.topology, 0};
  FingerprintArgs second = {sizeof(FingerprintArgs), NULL, topology.topology, 0};
  Check(Slot(kSlotFingerprint)(&first), "PJRT_TopologyDescription_Fingerprint");
  Check(Slot(kSlotFingerprint)(&second), "PJRT_TopologyDescription_Fingerprint");
  printf("fingerprint_stable %d\n", first.fingerprint == second.fingerprint);
  printf("fingerprint %llu\n", (unsigned long long)first.fingerprint);
  KindIdsArgs kinds = {sizeof(KindIdsArgs), NULL, topology.topology, NULL, 0};
  Check(Slot(kSlotGetMemorySpaceKindIds)(&kinds), "PJRT_TopologyDescription_GetMemorySpaceKindIds");
  printf("memory_space_kind_ids");
  for (size_t i = 0; i < kinds.num_ids; ++i) printf(" %d", kinds.ids[i]);
  printf("\n");

  PJRT_Client_AddressableDevices_Args devices;
  memset(&devices, 0, sizeof(devices));
  devices.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  devices.client = client;
  Check(api->PJRT_Client_AddressableDevices(&devices), "PJRT_Client_AddressableDevices");
  GetAttributesArgs attributes = {sizeof(GetAttributesArgs), NULL, devices.addressable_devices[0], NULL, 0, NULL, NULL};
  Check(Slot(kSlotGetAttributes)(&attributes), "PJRT_Device_GetAttributes");
  printf("device_attributes %zu\n", attributes.num_attributes);
  if (attributes.deleter != NULL) attributes.deleter(attributes.device_attributes);
  ClearMemoryStatsArgs clear = {sizeof(ClearMemoryStatsArgs), NULL, devices.addressable_devices[0]};
  PJRT_Error* clear_error = Slot(kSlotClearMemoryStats)(&clear);
  if (clear_error != NULL) {
    const ErrorTable* table = *(const ErrorTable* const*)clear_error;
    table->message(clear_error, &message, &message_size);
    printf("clear_memory_stats_error %.*s\n", (int)message_size, message);
    table->destroy(clear_error);
  } else {
    printf("clear_memory_stats ok\n");
  }

  PJRT_Client_Destroy_Args destroy = {PJRT_Client_Destroy_Args_STRUCT_SIZE, NULL, client};
  Check(api->PJRT_Client_Destroy(&destroy), "PJRT_Client_Destroy");
  printf("destructor_calls_after_destroy %d\n", destructor_calls);
  printf("done\n");
  return 0;
}
