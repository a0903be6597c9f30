// The live-handle registry: a destroyed or mistyped handle is told apart from a live one by
// its address alone.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/tagged.h"

namespace pjrt_neuron::core {
namespace {

struct Apple : Tagged<0x4e425546> {  // a buffer's kind
  int seeds = 3;
};
struct Pear : Tagged<0x4e444556> {};  // a device's kind
struct Basket : Tagged<0x4e434c49> {  // its first member shares its address
  Apple first;
};

TEST(Handles, ALiveObjectIsLiveAndADestroyedOneIsNot) {
  auto apple = std::make_unique<Apple>();
  const Apple* handle = apple.get();
  EXPECT_TRUE(IsLiveHandle(handle));
  apple.reset();
  EXPECT_FALSE(IsLiveHandle(handle));  // only the pointer's value is looked at
  EXPECT_EQ(handles::LiveKind(handle), 0u);
}

TEST(Handles, AnObjectOfAnotherKindIsNamed) {
  Pear pear;
  const auto* as_apple = reinterpret_cast<const Apple*>(&pear);
  EXPECT_FALSE(IsLiveHandle(as_apple));
  EXPECT_STREQ(handles::KindName(handles::LiveKind(as_apple)), "PJRT_Device");
}

TEST(Handles, AnAddressThatIsNoObjectIsNotLive) {
  int not_an_object = 0;
  EXPECT_FALSE(IsLiveHandle(reinterpret_cast<const Apple*>(&not_an_object)));
  EXPECT_FALSE(IsLiveHandle(static_cast<const Apple*>(nullptr)));
}

TEST(Handles, AnObjectAndItsFirstMemberAreBothLiveAtOneAddress) {
  auto basket = std::make_unique<Basket>();
  ASSERT_EQ(static_cast<const void*>(basket.get()), static_cast<const void*>(&basket->first));
  EXPECT_TRUE(IsLiveHandle(basket.get()));
  EXPECT_TRUE(IsLiveHandle(&basket->first));
  const Basket* handle = basket.get();
  const Apple* member = &basket->first;
  basket.reset();
  EXPECT_FALSE(IsLiveHandle(handle));
  EXPECT_FALSE(IsLiveHandle(member));
}

TEST(Handles, ACopyIsLiveOnItsOwnAndOutlivesTheOriginal) {
  auto original = std::make_unique<Apple>();
  Apple copy = *original;
  const Apple* gone = original.get();
  original.reset();
  EXPECT_FALSE(IsLiveHandle(gone));
  EXPECT_TRUE(IsLiveHandle(&copy));
  EXPECT_EQ(copy.seeds, 3);
}

TEST(Handles, ManyObjectsComeAndGoAndEachIsToldApart) {
  // Enough to grow the table several times and to leave removed entries between live ones.
  std::vector<std::unique_ptr<Apple>> apples;
  for (int i = 0; i < 20000; ++i) apples.push_back(std::make_unique<Apple>());
  std::vector<const Apple*> gone;
  for (size_t i = 0; i < apples.size(); i += 2) {
    gone.push_back(apples[i].get());
    apples[i].reset();
  }
  std::vector<std::unique_ptr<Pear>> pears;
  for (int i = 0; i < 5000; ++i) pears.push_back(std::make_unique<Pear>());
  for (size_t i = 1; i < apples.size(); i += 2) ASSERT_TRUE(IsLiveHandle(apples[i].get()));
  for (const auto& pear : pears) ASSERT_TRUE(IsLiveHandle(pear.get()));
  for (const Apple* handle : gone) {
    // A freed address may have been reused by a pear, never by a live apple.
    ASSERT_FALSE(IsLiveHandle(handle));
  }
}

}  // namespace
}  // namespace pjrt_neuron::core
