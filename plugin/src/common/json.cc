// The JSON writer (json.h): string escaping, UTF-8 checking and the separators between items.
#include "common/json.h"

#include <cmath>
#include <cstdio>

namespace pjrt_neuron::json {
namespace {

bool Continuation(std::string_view text, size_t at) {
  return at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80;
}

// Length of the valid UTF-8 sequence of two or more bytes at `at`, or 0 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
size_t MultiByteLength(std::string_view text, size_t at) {
  const unsigned char lead = static_cast<unsigned char>(text[at]);
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return 0;
  }
  if (at + 1 >= text.size()) return 0;
  const unsigned char second = static_cast<unsigned char>(text[at + 1]);
  if (second < second_min || second > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (!Continuation(text, at + i)) return 0;
  }
  return length;
}

}  // namespace

std::string Quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (size_t at = 0; at < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[at]);
    if (c >= 0x80) {
      const size_t length = MultiByteLength(text, at);
      if (length == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD
        at += 1;
      } else {
        out.append(text.data() + at, length);
        at += length;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
    at += 1;
  }
  out += '"';
  return out;
}

void Writer::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (has_items_.empty()) return;
  if (has_items_.back()) out_ += spacing_ == Spacing::kSpaced ? ", " : ",";
  has_items_.back() = true;
}

Writer& Writer::Open(char bracket) {
  BeforeValue();
  out_ += bracket;
  has_items_.push_back(false);
  return *this;
}

Writer& Writer::Close(char bracket) {
  out_ += bracket;
  if (!has_items_.empty()) has_items_.pop_back();
  return *this;
}

Writer& Writer::BeginObject() { return Open('{'); }
Writer& Writer::EndObject() { return Close('}'); }
Writer& Writer::BeginArray() { return Open('['); }
Writer& Writer::EndArray() { return Close(']'); }

Writer& Writer::Key(std::string_view key) {
  BeforeValue();
  out_ += Quote(key);
  out_ += spacing_ == Spacing::kSpaced ? ": " : ":";
  after_key_ = true;
  return *this;
}

Writer& Writer::String(std::string_view value) {
  BeforeValue();
  out_ += Quote(value);
  return *this;
}

Writer& Writer::Int(int64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
  return *this;
}

Writer& Writer::Number(double value, int decimals) {
  if (!std::isfinite(value)) return Null();
  BeforeValue();
  const int length = std::snprintf(nullptr, 0, "%.*f", decimals, value);
  std::string text(static_cast<size_t>(length) + 1, '\0');
  std::snprintf(text.data(), text.size(), "%.*f", decimals, value);
  text.resize(static_cast<size_t>(length));
  out_ += text;
  return *this;
}

Writer& Writer::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

Writer& Writer::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

Writer& Writer::IntArray(const std::vector<int>& values) {
  BeginArray();
  for (int v : values) Int(v);
  return EndArray();
}

}  // namespace pjrt_neuron::json
