// Files the engine hands to its helper programs: a private directory under $TMPDIR, removed
// with everything in it unless kept (a failed compile keeps its log for the user).
#pragma once

#include <string>

#include "common/status.h"

namespace pjrt_neuron::engine::neuron {

class ScratchDir {
 public:
  static StatusOr<ScratchDir> Create(const std::string& prefix);
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)), keep_(other.keep_) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }
  void Keep() { keep_ = true; }

 private:
  ScratchDir() = default;
  std::string path_;
  bool keep_ = false;
};

Status WriteFile(const std::string& path, const std::string& bytes);
StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace pjrt_neuron::engine::neuron
