// Runtime log lines on stderr, shaped like the real runtime's and filtered by NEURON_RT_LOG_LEVEL.
#ifndef NEURON_STANDIN_LOG_H_
#define NEURON_STANDIN_LOG_H_

#include <string>

namespace standin {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// Reads NEURON_RT_LOG_LEVEL (ERROR by default); false with a message if it is not a level.
bool ReadLogLevel(std::string* error);
void Log(LogLevel level, const char* function, const std::string& message);

inline void LogError(const char* function, const std::string& message) {
  Log(LogLevel::kError, function, message);
}
inline void LogWarning(const char* function, const std::string& message) {
  Log(LogLevel::kWarning, function, message);
}

}  // namespace standin

#endif  // NEURON_STANDIN_LOG_H_
