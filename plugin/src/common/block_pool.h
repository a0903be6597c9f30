// Free lists of same-size blocks for the objects every execution makes and destroys (buffers,
// events, their engine halves). glibc's per-thread cache keeps 7 blocks of a size; a program
// with 128 outputs makes hundreds per call, and the rest took malloc's slow path (profiled).
// Each thread keeps up to kThreadKept blocks of its own, taken and given without a lock; past
// that, blocks go to one shared list under a spin lock (a block may be freed on another thread
// than the one that took it). A thread's blocks go to the shared list when it exits (a
// pthread key's destructor; the library is linked -z nodelete, so that code stays loaded).
// Under AddressSanitizer the pool is bypassed, so use after free stays detectable.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <mutex>
#include <new>

#include "common/spin_lock.h"

#if defined(__SANITIZE_ADDRESS__)
#define PN_BLOCK_POOL_ENABLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PN_BLOCK_POOL_ENABLED 0
#endif
#endif
#ifndef PN_BLOCK_POOL_ENABLED
#define PN_BLOCK_POOL_ENABLED 1
#endif

namespace pjrt_neuron {

template <size_t kSize>
class BlockPool {
 public:
  // Blocks kept for reuse at most, in the shared list and by each thread; beyond these they
  // go back to malloc.
  static constexpr size_t kMaxKept = 4096;
  static constexpr size_t kThreadKept = 256;

  static void* Allocate() {
    if constexpr (PN_BLOCK_POOL_ENABLED) {
      ThreadCache& cache = thread_cache_;
      if (Node* node = cache.head) {
        cache.head = node->next;
        --cache.count;
        return node;
      }
      std::lock_guard<SpinLock> hold(lock_);
      if (Node* node = head_) {
        head_ = node->next;
        --kept_;
        return node;
      }
    }
    return ::operator new(kSize);
  }

  static void Free(void* block) {
    if constexpr (PN_BLOCK_POOL_ENABLED) {
      ThreadCache& cache = thread_cache_;
      if (cache.count < kThreadKept) {
        if (!cache.flushed_at_exit) FlushAtExit(&cache);
        cache.head = new (block) Node{cache.head};
        ++cache.count;
        return;
      }
      FreeShared(block);
      return;
    }
    ::operator delete(block);
  }

 private:
  struct Node {
    Node* next;
  };
  struct ThreadCache {  // constant-initialised and trivially destroyed: no TLS guard or atexit
    Node* head = nullptr;
    size_t count = 0;
    bool flushed_at_exit = false;
  };
  static_assert(kSize >= sizeof(Node));

  static void FreeShared(void* block) {
    {
      std::lock_guard<SpinLock> hold(lock_);
      if (kept_ < kMaxKept) {
        head_ = new (block) Node{head_};
        ++kept_;
        return;
      }
    }
    ::operator delete(block);
  }

  // Arranges for the calling thread's blocks to go to the shared list when it exits.
  static void FlushAtExit(ThreadCache* cache) {
    static const pthread_key_t key = [] {
      pthread_key_t made;
      pthread_key_create(&made, [](void* exiting) {
        auto* gone = static_cast<ThreadCache*>(exiting);
        while (Node* node = gone->head) {
          gone->head = node->next;
          FreeShared(node);
        }
        gone->count = 0;
      });
      return made;
    }();
    pthread_setspecific(key, cache);
    cache->flushed_at_exit = true;
  }

  static inline thread_local ThreadCache thread_cache_;
  static inline SpinLock lock_;
  static inline Node* head_ = nullptr;
  static inline size_t kept_ = 0;
};

// Derive from Pooled<T> to allocate T (exactly T, not a larger subclass) from BlockPool.
template <typename T>
class Pooled {
 public:
  static void* operator new(size_t size) {
    return size == sizeof(T) ? BlockPool<sizeof(T)>::Allocate() : ::operator new(size);
  }
  static void operator delete(void* block, size_t size) {
    if (size == sizeof(T)) {
      BlockPool<sizeof(T)>::Free(block);
    } else {
      ::operator delete(block);
    }
  }
};

// For std::allocate_shared: the object and its count in one pooled block.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding, as allocators do
  T* allocate(size_t n) {
    if (n == 1) return static_cast<T*>(BlockPool<sizeof(T)>::Allocate());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* block, size_t n) {
    if (n == 1) {
      BlockPool<sizeof(T)>::Free(block);
    } else {
      ::operator delete(block);
    }
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const PoolAllocator<U>&) const { return false; }
};

}  // namespace pjrt_neuron
