// A vector whose first N elements live inside it: the per-execution lists (arguments, outputs,
// completion events) of the usual one- to few-device run then cost no allocation.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace pjrt_neuron {

template <typename T, size_t N>
class InlineVector {
 public:
  InlineVector() = default;
  // `size` value-initialised elements (null pointers, zeros).
  explicit InlineVector(size_t size) { resize(size); }
  InlineVector(InlineVector&& other) noexcept { MoveFrom(std::move(other)); }
  InlineVector& operator=(InlineVector&& other) noexcept {
    if (this != &other) {
      Release();
      MoveFrom(std::move(other));
    }
    return *this;
  }
  InlineVector(const InlineVector&) = delete;
  InlineVector& operator=(const InlineVector&) = delete;
  ~InlineVector() { Release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& back() { return data_[size_ - 1]; }

  void reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    T* grown = static_cast<T*>(::operator new(capacity * sizeof(T), std::align_val_t{alignof(T)}));
    for (size_t i = 0; i < size_; ++i) {
      new (grown + i) T(std::move(data_[i]));
      data_[i].~T();
    }
    FreeHeap();
    data_ = grown;
    capacity_ = capacity;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) reserve(capacity_ * 2);
    T* slot = new (data_ + size_) T(std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  void resize(size_t size) {
    reserve(size);
    while (size_ < size) emplace_back();
    while (size_ > size) data_[--size_].~T();
  }
  void clear() { resize(0); }

 private:
  T* inline_data() { return reinterpret_cast<T*>(inline_); }
  void FreeHeap() {
    if (data_ != inline_data()) ::operator delete(data_, std::align_val_t{alignof(T)});
  }
  void Release() {
    clear();
    FreeHeap();
    data_ = inline_data();
    capacity_ = N;
  }
  // Takes other's heap block when it has one, else moves its elements in; `this` is empty.
  void MoveFrom(InlineVector&& other) {
    if (other.data_ != other.inline_data()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      size_ = other.size_;
    } else {
      for (size_t i = 0; i < other.size_; ++i) {
        new (inline_data() + i) T(std::move(other.data_[i]));
        other.data_[i].~T();
      }
      size_ = other.size_;
    }
    other.data_ = other.inline_data();
    other.capacity_ = N;
    other.size_ = 0;
  }

  static_assert(N > 0);
  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* data_ = inline_data();
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace pjrt_neuron
