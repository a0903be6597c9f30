// Runtime log lines on stderr, shaped like the real runtime's and filtered by NEURON_RT_LOG_LEVEL.
#include "log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace standin {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kError)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "ERROR";
    case LogLevel::kWarning: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kDebug: return "DEBUG";
  }
  return "?";
}

}  // namespace

bool ReadLogLevel(std::string* error) {
  const char* text = std::getenv("NEURON_RT_LOG_LEVEL");
  std::string value = text ? text : "";
  LogLevel level = LogLevel::kError;
  if (value.empty() || value == "ERROR") {
    level = LogLevel::kError;
  } else if (value == "WARN" || value == "WARNING") {
    level = LogLevel::kWarning;
  } else if (value == "INFO") {
    level = LogLevel::kInfo;
  } else if (value == "DEBUG" || value == "TRACE") {
    level = LogLevel::kDebug;
  } else {
    *error = "NEURON_RT_LOG_LEVEL='" + value + "': must be ERROR, WARN, INFO, DEBUG or TRACE";
    return false;
  }
  g_level = static_cast<int>(level);
  return true;
}

void Log(LogLevel level, const char* function, const std::string& message) {
  if (static_cast<int>(level) > g_level.load()) return;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm local{};
  localtime_r(&now.tv_sec, &local);
  char stamp[64];
  strftime(stamp, sizeof stamp, "%Y-%b-%d %H:%M:%S", &local);
  // One fprintf per line, so lines of concurrent threads do not interleave.
  std::fprintf(stderr, "%s.%06ld %d:%ld %-5s NRT:%s  %s\n", stamp, now.tv_nsec / 1000,
               static_cast<int>(getpid()), static_cast<long>(syscall(SYS_gettid)),
               LevelName(level), function, message.c_str());
}

}  // namespace standin
