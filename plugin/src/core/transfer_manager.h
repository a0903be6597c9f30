// Asynchronous host-to-device transfer managers: buffers created up front on one NeuronCore
// memory and filled piecewise (PJRT_Client_CreateBuffersForAsyncHostToDevice).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/buffer.h"
#include "core/device.h"
#include "core/tagged.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

class Client;

// HBM for every buffer is charged at creation (the buffers exist from then on); a retrieved
// buffer carries its own charge, and destroying the manager releases the rest.
class TransferManager : public Tagged<0x4e54584d> {
 public:
  TransferManager(Client* client, Memory* memory, std::unique_ptr<engine::TransferManager> engine_manager,
                  std::vector<int64_t> charges);
  ~TransferManager();
  Device* device() const { return memory_->device(); }
  size_t buffer_count() const { return charges_.size(); }
  StatusOr<size_t> BufferSize(int index);
  StatusOr<std::unique_ptr<Event>> TransferData(int index, const void* data, int64_t offset, int64_t size, bool last);
  StatusOr<std::unique_ptr<Buffer>> RetrieveBuffer(int index);
  Status SetBufferError(int index, ErrorCode code, const std::string& message);

 private:
  Status CheckIndex(int index) const;
  Client* client_;
  Memory* memory_;
  std::unique_ptr<engine::TransferManager> engine_manager_;
  std::vector<int64_t> charges_;  // [buffer]; 0 once retrieved
  std::vector<bool> retrieved_;
};

}  // namespace pjrt_neuron::core
