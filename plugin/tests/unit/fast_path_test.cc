// The pieces of the per-execution path: inline lists, block pools, the spin lock, and the
// registry's one-hold check of an argument list.
#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <memory>
#include <thread>
#include <vector>

#include "common/block_pool.h"
#include "common/inline_vector.h"
#include "common/spin_lock.h"
#include "core/tagged.h"

namespace pjrt_neuron {
namespace {

// Counts live instances, so a list that leaks or destroys twice shows.
struct Counted {
  static inline int live = 0;
  explicit Counted(int v = 0) : value(v) { ++live; }
  Counted(Counted&& other) noexcept : value(other.value) {
    other.value = -1;
    ++live;
  }
  Counted(const Counted&) = delete;
  ~Counted() { --live; }
  int value;
};

TEST(InlineVector, KeepsItsElementsWhenItGrowsPastItsInlineRoom) {
  {
    InlineVector<std::unique_ptr<int>, 2> list;
    for (int i = 0; i < 9; ++i) list.push_back(std::make_unique<int>(i));
    ASSERT_EQ(list.size(), 9u);
    for (int i = 0; i < 9; ++i) EXPECT_EQ(*list[i], i);
  }
  {
    InlineVector<Counted, 2> list;
    for (int i = 0; i < 5; ++i) list.emplace_back(i);
    EXPECT_EQ(Counted::live, 5);
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(InlineVector, AMoveTakesEveryElementAndLeavesTheSourceEmpty) {
  for (int count : {1, 3, 10}) {  // inline, at capacity's edge, on the heap
    InlineVector<Counted, 3> source;
    for (int i = 0; i < count; ++i) source.emplace_back(i * 10);
    InlineVector<Counted, 3> moved(std::move(source));
    EXPECT_TRUE(source.empty());
    ASSERT_EQ(moved.size(), static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) EXPECT_EQ(moved[i].value, i * 10);
    InlineVector<Counted, 3> assigned;
    assigned.emplace_back(99);
    assigned = std::move(moved);
    EXPECT_TRUE(moved.empty());
    ASSERT_EQ(assigned.size(), static_cast<size_t>(count));
    EXPECT_EQ(assigned[count - 1].value, (count - 1) * 10);
    EXPECT_EQ(Counted::live, count);
    source.emplace_back(7);  // a moved-from list is usable again
    EXPECT_EQ(source[0].value, 7);
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(InlineVector, NestedListsMoveAndResizeDestroysWhatItDrops) {
  InlineVector<InlineVector<Counted, 2>, 1> table;
  table.resize(3);
  for (size_t d = 0; d < 3; ++d) {
    for (int o = 0; o < 4; ++o) table[d].emplace_back(static_cast<int>(d) * 100 + o);
  }
  InlineVector<InlineVector<Counted, 2>, 1> moved(std::move(table));
  EXPECT_EQ(moved[2][3].value, 203);
  EXPECT_EQ(Counted::live, 12);
  moved.resize(1);
  EXPECT_EQ(Counted::live, 4);
  moved.clear();
  EXPECT_EQ(Counted::live, 0);
}

struct Small : Pooled<Small> {
  char bytes[40];
};
struct Larger : Small {  // not exactly Small: takes plain new and delete
  char more[100];
};

TEST(BlockPool, AFreedBlockIsTheNextOneTakenAndOtherSizesBypassThePool) {
  auto* first = new Small();
  void* address = first;
  delete first;
  auto* second = new Small();
  if (PN_BLOCK_POOL_ENABLED) {
    EXPECT_EQ(static_cast<void*>(second), address);
  }
  delete second;
  Small* larger = new Larger();  // sized delete sees 140 bytes: plain delete, no pool corruption
  delete static_cast<Larger*>(larger);
  std::vector<std::unique_ptr<Small>> many;
  for (int i = 0; i < 100; ++i) many.push_back(std::make_unique<Small>());
  for (auto& s : many) s->bytes[0] = 1;
  many.clear();
}

TEST(BlockPool, BlocksMadeOnOneThreadAreFreedOnAnother) {
  std::vector<Small*> made(1000);
  std::thread maker([&] {
    for (auto& p : made) p = new Small();
  });
  maker.join();
  std::thread freer([&] {
    for (auto* p : made) delete p;
  });
  freer.join();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 10000; ++i) {
        auto* s = new Small();
        s->bytes[39] = static_cast<char>(i);
        delete s;
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(SpinLock, CountsFromSeveralThreadsAddUp) {
  SpinLock lock;
  long total = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        std::lock_guard<SpinLock> hold(lock);
        ++total;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(total, 200000);
}

struct Item : core::Tagged<0x4e425546> {  // a buffer's kind
  int payload = 0;
};
struct Other : core::Tagged<0x4e444556> {};  // a device's kind

TEST(Handles, FirstNotLiveNamesTheFirstDeadNullOrForeignEntry) {
  auto a = std::make_unique<Item>();
  auto b = std::make_unique<Item>();
  alignas(Item) unsigned char storage[sizeof(Item)];
  Item* dead_address = new (storage) Item();
  dead_address->~Item();  // unregistered; its storage stays, so only the registry says it is gone
  Other other;
  Item* live[] = {a.get(), b.get()};
  EXPECT_EQ(core::FirstNotLiveHandle(live, 2), 2u);
  Item* with_dead[] = {a.get(), dead_address, b.get()};
  EXPECT_EQ(core::FirstNotLiveHandle(with_dead, 3), 1u);
  Item* with_null[] = {a.get(), b.get(), nullptr};
  EXPECT_EQ(core::FirstNotLiveHandle(with_null, 3), 2u);
  Item* with_other[] = {reinterpret_cast<Item*>(&other), a.get()};
  EXPECT_EQ(core::FirstNotLiveHandle(with_other, 2), 0u);
  EXPECT_EQ(core::FirstNotLiveHandle(live, 0), 0u);
}

TEST(Handles, RegistrationsFromSeveralThreadsStayExact) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        std::vector<std::unique_ptr<Item>> items;
        for (int i = 0; i < 50; ++i) items.push_back(std::make_unique<Item>());
        std::vector<Item*> raw;
        for (auto& item : items) raw.push_back(item.get());
        if (core::FirstNotLiveHandle(raw.data(), raw.size()) != raw.size()) ++wrong;
        for (auto* item : raw) {
          if (!core::IsLiveHandle(item)) ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace pjrt_neuron
