// PJRT_NamedValue lists to and from engine attributes (named_values.h).
#include "engine/named_values.h"

#include <cstring>
#include <string>

namespace pjrt_neuron::engine {

NamedValues::NamedValues(const Attributes& attributes) : attributes_(attributes) {
  for (const Attribute& a : attributes_) {
    PJRT_NamedValue v;
    std::memset(&v, 0, sizeof(v));
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = a.name.c_str();
    v.name_size = a.name.size();
    v.value_size = 1;
    if (auto* s = std::get_if<std::string>(&a.value)) {
      v.type = PJRT_NamedValue_kString;
      v.string_value = s->c_str();
      v.value_size = s->size();
    } else if (auto* i = std::get_if<int64_t>(&a.value)) {
      v.type = PJRT_NamedValue_kInt64;
      v.int64_value = *i;
    } else if (auto* list = std::get_if<std::vector<int64_t>>(&a.value)) {
      v.type = PJRT_NamedValue_kInt64List;
      v.int64_array_value = list->data();
      v.value_size = list->size();
    } else if (auto* f = std::get_if<float>(&a.value)) {
      v.type = PJRT_NamedValue_kFloat;
      v.float_value = *f;
    } else if (auto* b = std::get_if<bool>(&a.value)) {
      v.type = PJRT_NamedValue_kBool;
      v.bool_value = *b;
    }
    values_.push_back(v);
  }
}

Attributes AttributesOf(const PJRT_NamedValue* values, size_t count) {
  Attributes out;
  for (size_t i = 0; i < count; ++i) {
    const PJRT_NamedValue& v = values[i];
    Attribute a{std::string(v.name, v.name_size), int64_t{0}};
    switch (v.type) {
      case PJRT_NamedValue_kString: a.value = std::string(v.string_value, v.value_size); break;
      case PJRT_NamedValue_kInt64: a.value = v.int64_value; break;
      case PJRT_NamedValue_kInt64List:
        a.value = std::vector<int64_t>(v.int64_array_value, v.int64_array_value + v.value_size);
        break;
      case PJRT_NamedValue_kFloat: a.value = v.float_value; break;
      case PJRT_NamedValue_kBool: a.value = v.bool_value; break;
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace pjrt_neuron::engine
