/* The measured loop of profile_execute.py: what a framework does per dispatch of a program with
 * `num_args` arguments and as many results, in C so the profile shows only the plugin. Each
 * iteration: PJRT_LoadedExecutable_Execute, await and destroy the completion event, destroy the
 * outputs. Under callgrind (--instr-atstart=no) only the loop is instrumented. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <valgrind/callgrind.h>

#include "pjrt_c_api.h"

static int check(const PJRT_Api* api, PJRT_Error* error, const char* what) {
  if (error == NULL) return 0;
  PJRT_Error_Message_Args message;
  memset(&message, 0, sizeof(message));
  message.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  message.error = error;
  api->PJRT_Error_Message(&message);
  fprintf(stderr, "%s: %.*s\n", what, (int)message.message_size, message.message);
  PJRT_Error_Destroy_Args destroy;
  memset(&destroy, 0, sizeof(destroy));
  destroy.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  destroy.error = error;
  api->PJRT_Error_Destroy(&destroy);
  return 1;
}

/* Returns seconds per iteration, or -1 on an error (printed). */
double run_execute_loop(const PJRT_Api* api, PJRT_LoadedExecutable* executable, PJRT_Buffer** arguments,
                        size_t num_args, size_t num_outputs, long iterations, int instrument) {
  PJRT_Buffer** outputs = calloc(num_outputs > 0 ? num_outputs : 1, sizeof(PJRT_Buffer*));
  PJRT_Buffer* const* argument_lists[1] = {arguments};
  PJRT_Buffer** output_lists[1] = {outputs};
  PJRT_Event* events[1] = {NULL};
  PJRT_ExecuteOptions options;
  memset(&options, 0, sizeof(options));
  options.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  PJRT_LoadedExecutable_Execute_Args execute;
  memset(&execute, 0, sizeof(execute));
  execute.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  execute.executable = executable;
  execute.options = &options;
  execute.argument_lists = argument_lists;
  execute.num_devices = 1;
  execute.num_args = num_args;
  execute.output_lists = output_lists;
  execute.device_complete_events = events;
  struct timespec start, end;
  if (instrument) {
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
  }
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long it = 0; it < iterations; ++it) {
    if (check(api, api->PJRT_LoadedExecutable_Execute(&execute), "PJRT_LoadedExecutable_Execute")) return -1;
    if (events[0] != NULL) {
      PJRT_Event_Await_Args await_args;
      memset(&await_args, 0, sizeof(await_args));
      await_args.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
      await_args.event = events[0];
      if (check(api, api->PJRT_Event_Await(&await_args), "PJRT_Event_Await")) return -1;
      PJRT_Event_Destroy_Args destroy_event;
      memset(&destroy_event, 0, sizeof(destroy_event));
      destroy_event.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
      destroy_event.event = events[0];
      api->PJRT_Event_Destroy(&destroy_event);
      events[0] = NULL;
    }
    for (size_t o = 0; o < num_outputs; ++o) {
      PJRT_Buffer_Destroy_Args destroy;
      memset(&destroy, 0, sizeof(destroy));
      destroy.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
      destroy.buffer = outputs[o];
      api->PJRT_Buffer_Destroy(&destroy);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  if (instrument) {
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT("execute loop");
  }
  free(outputs);
  return ((end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) * 1e-9) / iterations;
}

/* For a framework's loop driven from Python (profile_execute.py --jax): instrument between. */
void instrument_start(void) {
  CALLGRIND_ZERO_STATS;
  CALLGRIND_START_INSTRUMENTATION;
}

void instrument_stop(const char* label) {
  CALLGRIND_STOP_INSTRUMENTATION;
  CALLGRIND_DUMP_STATS_AT(label);
}
