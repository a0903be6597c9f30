// Transfer managers (transfer_manager.h): index checks and HBM accounting around the engine's.
#include "core/transfer_manager.h"

namespace pjrt_neuron::core {

TransferManager::TransferManager(Client* client, Memory* memory,
                                 std::unique_ptr<engine::TransferManager> engine_manager,
                                 std::vector<int64_t> charges)
    : client_(client),
      memory_(memory),
      engine_manager_(std::move(engine_manager)),
      charges_(std::move(charges)),
      retrieved_(charges_.size(), false) {}

TransferManager::~TransferManager() {
  int64_t left = 0;
  for (int64_t charge : charges_) left += charge;
  device()->Release(left);
}

Status TransferManager::CheckIndex(int index) const {
  if (index < 0 || static_cast<size_t>(index) >= charges_.size()) {
    return InvalidArgument("buffer_index " + std::to_string(index) + " is out of range; the manager has " +
                           std::to_string(charges_.size()) + " buffer(s)");
  }
  return Status::Ok();
}

StatusOr<size_t> TransferManager::BufferSize(int index) {
  PN_RETURN_IF_ERROR(CheckIndex(index));
  return engine_manager_->BufferSize(index);
}

StatusOr<std::unique_ptr<Event>> TransferManager::TransferData(int index, const void* data, int64_t offset,
                                                               int64_t size, bool last) {
  PN_RETURN_IF_ERROR(CheckIndex(index));
  if (size < 0 || offset < 0) return InvalidArgument("offset and transfer_size must not be negative");
  if (size > 0 && data == nullptr) return InvalidArgument("`data` is null but transfer_size is " + std::to_string(size));
  PN_ASSIGN_OR_RETURN(size_t buffer_size, engine_manager_->BufferSize(index));
  if (static_cast<uint64_t>(offset) + static_cast<uint64_t>(size) > buffer_size) {
    return InvalidArgument("transfer of " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                           " overruns buffer " + std::to_string(index) + " of " + std::to_string(buffer_size) +
                           " bytes");
  }
  PN_ASSIGN_OR_RETURN(engine::EventRef done, engine_manager_->TransferData(index, data, offset, size, last));
  return std::make_unique<Event>(std::move(done));
}

StatusOr<std::unique_ptr<Buffer>> TransferManager::RetrieveBuffer(int index) {
  PN_RETURN_IF_ERROR(CheckIndex(index));
  if (retrieved_[index]) return FailedPrecondition("buffer " + std::to_string(index) + " was already retrieved");
  PN_ASSIGN_OR_RETURN(std::unique_ptr<engine::Buffer> buffer, engine_manager_->RetrieveBuffer(index));
  retrieved_[index] = true;
  const int64_t charge = charges_[index];
  charges_[index] = 0;  // the buffer owns it now
  return std::make_unique<Buffer>(device(), std::move(buffer), charge);
}

Status TransferManager::SetBufferError(int index, ErrorCode code, const std::string& message) {
  PN_RETURN_IF_ERROR(CheckIndex(index));
  if (code == ErrorCode::kOk) return InvalidArgument("error_code must not be OK");
  return engine_manager_->SetBufferError(index, code, message);
}

}  // namespace pjrt_neuron::core
