// The JSON writer: string escaping (quotes, backslashes, control characters, UTF-8 kept,
// invalid bytes replaced), nesting and separators, numbers.
#include "common/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace pjrt_neuron::json {
namespace {

TEST(JsonQuote, PlainTextIsQuoted) { EXPECT_EQ(Quote("mlp"), "\"mlp\""); }

TEST(JsonQuote, QuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(Quote("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(Quote("C:\\temp\\"), "\"C:\\\\temp\\\\\"");
}

TEST(JsonQuote, ControlCharactersAreEscaped) {
  EXPECT_EQ(Quote("a\nb\tc\rd"), "\"a\\nb\\tc\\rd\"");
  EXPECT_EQ(Quote("\b\f"), "\"\\b\\f\"");
  EXPECT_EQ(Quote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(Quote(std::string("a\0b", 3)), "\"a\\u0000b\"");
}

TEST(JsonQuote, DeleteAndSlashNeedNoEscape) { EXPECT_EQ(Quote("a/b\x7f"), "\"a/b\x7f\""); }

TEST(JsonQuote, ValidUtf8PassesThrough) {
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE2\x80\xA8";  // é € 😀 U+2028
  EXPECT_EQ(Quote(text), "\"" + text + "\"");
}

TEST(JsonQuote, InvalidUtf8BecomesReplacementCharacters) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(Quote("\xFF"), "\"" + replacement + "\"");
  EXPECT_EQ(Quote("a\xC3"), "\"a" + replacement + "\"");                    // cut short at the end
  EXPECT_EQ(Quote("\xC3(x"), "\"" + replacement + "(x\"");                  // not a continuation byte
  EXPECT_EQ(Quote("\xC0\xAF"), "\"" + replacement + replacement + "\"");    // overlong '/'
  EXPECT_EQ(Quote("\xED\xA0\x80"), "\"" + replacement + replacement + replacement + "\"");  // a surrogate
  EXPECT_EQ(Quote("\xF4\x90\x80\x80"), "\"" + replacement + replacement + replacement + replacement + "\"");
}

TEST(JsonWriter, CompactObject) {
  Writer w;
  w.BeginObject().Field("name", "x\"y").Field("count", 3).Field("ok", true).EndObject();
  EXPECT_EQ(w.text(), "{\"name\":\"x\\\"y\",\"count\":3,\"ok\":true}");
}

TEST(JsonWriter, SpacedObject) {
  Writer w(Writer::Spacing::kSpaced);
  w.BeginObject().Field("a", 1).Field("b", "two").EndObject();
  EXPECT_EQ(w.text(), "{\"a\": 1, \"b\": \"two\"}");
}

TEST(JsonWriter, NestedArraysAndObjects) {
  Writer w;
  w.BeginObject().Key("chips").BeginArray();
  for (int chip = 0; chip < 2; ++chip) {
    w.BeginObject().Field("chip", chip).Field("cores", std::vector<int>{2 * chip, 2 * chip + 1});
    w.Key("holders").BeginArray().EndArray().EndObject();
  }
  w.EndArray().Key("none").Null().EndObject();
  EXPECT_EQ(w.text(),
            "{\"chips\":[{\"chip\":0,\"cores\":[0,1],\"holders\":[]},{\"chip\":1,\"cores\":[2,3],\"holders\":[]}],"
            "\"none\":null}");
}

TEST(JsonWriter, EmptyContainers) {
  Writer object;
  EXPECT_EQ(object.BeginObject().EndObject().text(), "{}");
  Writer array;
  EXPECT_EQ(array.BeginArray().BeginArray().EndArray().BeginObject().EndObject().EndArray().text(), "[[],{}]");
}

TEST(JsonWriter, KeysAreEscapedToo) {
  Writer w;
  w.BeginObject().Field("a\nb", 1).EndObject();
  EXPECT_EQ(w.text(), "{\"a\\nb\":1}");
}

TEST(JsonWriter, Integers) {
  Writer w;
  w.BeginArray().Int(std::numeric_limits<int64_t>::min()).Int(0).Int(int64_t{10} << 30).EndArray();
  EXPECT_EQ(w.text(), "[-9223372036854775808,0,10737418240]");
}

TEST(JsonWriter, NumbersWithFixedDecimals) {
  Writer w;
  w.BeginArray().Number(1.23456, 3).Number(0, 3).Number(1e20, 1).EndArray();
  EXPECT_EQ(w.text(), "[1.235,0.000,100000000000000000000.0]");
}

TEST(JsonWriter, NonFiniteNumbersAreNull) {
  Writer w;
  w.BeginArray()
      .Number(std::numeric_limits<double>::quiet_NaN(), 3)
      .Number(std::numeric_limits<double>::infinity(), 3)
      .EndArray();
  EXPECT_EQ(w.text(), "[null,null]");
}

TEST(JsonWriter, HugeNumbersAreWrittenWhole) {
  Writer w;
  w.Number(1e300, 2);
  EXPECT_EQ(w.text().size(), 301u + 3u);  // 301 digits, the point and two decimals
}

}  // namespace
}  // namespace pjrt_neuron::json
