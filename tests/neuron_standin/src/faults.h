// Fault injection: NEURON_STANDIN_FAULT makes a chosen nrt call return a chosen status.
#ifndef NEURON_STANDIN_FAULTS_H_
#define NEURON_STANDIN_FAULTS_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace standin {

// "nrt_execute:3:1004,nrt_tensor_allocate:1:4": the 3rd nrt_execute returns 1004, the first
// nrt_tensor_allocate 4; "nrt_execute:2+:5" fails the 2nd and every later call.
class FaultPlan {
 public:
  // Replaces the plan and zeroes every count; false with a message on a malformed spec.
  bool Reset(const char* spec, std::string* error);
  // Counts one call of `function`; true (and the status to return) if it is to fail.
  bool Hit(const char* function, int* status, uint64_t* call);

 private:
  struct Rule {
    uint64_t call = 0;
    bool and_later = false;
    int status = 0;
  };
  std::mutex mutex_;
  std::map<std::string, std::vector<Rule>> rules_;
  std::map<std::string, uint64_t> calls_;
};

}  // namespace standin

#endif  // NEURON_STANDIN_FAULTS_H_
