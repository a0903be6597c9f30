// The one PJRT_NamedValue builder: every attribute type out and back again.
#include "engine/named_values.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pjrt_neuron::engine {
namespace {

TEST(NamedValues, EveryTypeRoundTrips) {
  const Attributes attributes = {
      {"text", std::string("neuron")},
      {"count", int64_t{4}},
      {"dims", std::vector<int64_t>{2, 3}},
      {"scale", 0.5f},
      {"enabled", true},
  };
  const NamedValues values(attributes);
  ASSERT_EQ(values.size(), attributes.size());
  EXPECT_EQ(values.data()[0].type, PJRT_NamedValue_kString);
  EXPECT_EQ(values.data()[0].value_size, 6u);
  EXPECT_EQ(values.data()[2].type, PJRT_NamedValue_kInt64List);
  EXPECT_EQ(values.data()[2].value_size, 2u);
  EXPECT_EQ(values.data()[4].value_size, 1u);

  const Attributes read = AttributesOf(values.data(), values.size());
  ASSERT_EQ(read.size(), attributes.size());
  for (size_t i = 0; i < read.size(); ++i) {
    EXPECT_EQ(read[i].name, attributes[i].name);
    EXPECT_EQ(read[i].value, attributes[i].value);
  }
}

TEST(NamedValues, OwnsWhatTheValuesPointAt) {
  Attributes attributes = {{"name", std::string("first")}};
  const NamedValues values(attributes);
  attributes[0].value = std::string("changed");
  EXPECT_EQ(std::string(values.data()[0].string_value, values.data()[0].value_size), "first");
}

}  // namespace
}  // namespace pjrt_neuron::engine
