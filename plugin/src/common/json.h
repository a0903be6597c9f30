// Writing JSON: the one writer behind every JSON text the plugin emits, with strings escaped.
// Hand-written, not nlohmann-json: the plugin only writes JSON, and this needs no package on build machines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pjrt_neuron::json {

// `text` as a JSON string literal: quotes, backslashes and control characters escaped, valid
// UTF-8 passed through, and each byte that starts no valid UTF-8 sequence replaced by U+FFFD,
// so the result is valid JSON whatever bytes a program's name holds.
std::string Quote(std::string_view text);

// Builds one JSON value in order: objects and arrays nest, a key goes before each member.
//   Writer w;  w.BeginObject().Key("n").Int(1).EndObject();  w.text() == "{\"n\":1}"
class Writer {
 public:
  enum class Spacing { kCompact, kSpaced };  // kSpaced: ", " and ": ", for text people read
  explicit Writer(Spacing spacing = Spacing::kCompact) : spacing_(spacing) {}

  Writer& BeginObject();
  Writer& EndObject();
  Writer& BeginArray();
  Writer& EndArray();
  Writer& Key(std::string_view key);

  Writer& String(std::string_view value);
  Writer& Int(int64_t value);
  Writer& Number(double value, int decimals);  // fixed decimals; NaN and infinities as null
  Writer& Bool(bool value);
  Writer& Null();
  Writer& IntArray(const std::vector<int>& values);

  // A member: Key(key) and its value.
  template <typename T>
  Writer& Field(std::string_view key, const T& value) {
    Key(key);
    return Value(value);
  }

  const std::string& text() const { return out_; }

 private:
  Writer& Value(std::string_view v) { return String(v); }
  Writer& Value(const std::string& v) { return String(v); }
  Writer& Value(const char* v) { return String(v); }
  Writer& Value(bool v) { return Bool(v); }
  Writer& Value(int v) { return Int(v); }
  Writer& Value(long v) { return Int(v); }
  Writer& Value(long long v) { return Int(static_cast<int64_t>(v)); }
  Writer& Value(unsigned v) { return Int(v); }
  Writer& Value(unsigned long v) { return Int(static_cast<int64_t>(v)); }
  Writer& Value(unsigned long long v) { return Int(static_cast<int64_t>(v)); }
  Writer& Value(const std::vector<int>& v) { return IntArray(v); }

  void BeforeValue();
  Writer& Open(char bracket);
  Writer& Close(char bracket);

  Spacing spacing_;
  std::string out_;
  std::vector<bool> has_items_;  // per open object or array: whether a member was written
  bool after_key_ = false;
};

}  // namespace pjrt_neuron::json
