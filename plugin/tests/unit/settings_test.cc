// The settings table and its strict parsers: every row in order and described, each kind's
// accepted and refused values, messages that name the variable and what is allowed, defaults,
// and the compile cache directory rule.
#include "common/settings.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <set>
#include <string>

#include "core/settings_check.h"

namespace pjrt_neuron::settings {
namespace {

// Sets (or, with nullopt, unsets) a variable for one test and puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value.has_value()) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string ErrorOf(const Status& status) { return status.ok() ? "(ok)" : status.message(); }

TEST(SettingsTable, RowsAreInIdOrderWithUniqueNames) {
  std::set<std::string> names;
  for (size_t i = 0; i < Table().size(); ++i) {
    const Setting& s = Table()[i];
    EXPECT_EQ(static_cast<size_t>(s.id), i) << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " is in the table twice";
    EXPECT_STRNE(s.meaning, "") << s.name;
    EXPECT_STRNE(s.default_text, "") << s.name;
    EXPECT_EQ(&Get(s.id), &s);
    EXPECT_EQ(Find(s.name), &s);
  }
  EXPECT_EQ(Find("PJRT_NEURON_NO_SUCH_SETTING"), nullptr);
}

TEST(SettingsTable, DefaultValuesPassTheirOwnCheck) {
  for (const Setting& s : Table()) {
    if (s.default_value == nullptr) continue;
    EXPECT_TRUE(Check(s, s.default_value).ok()) << s.name << ": " << s.default_value;
  }
}

TEST(SettingsTable, ChoicesAndFlagsListWhatIsAllowed) {
  for (const Setting& s : Table()) {
    if (s.kind == Kind::kChoice || s.kind == Kind::kFlag) {
      EXPECT_FALSE(s.choices.empty()) << s.name;
    } else {
      EXPECT_TRUE(s.choices.empty()) << s.name;
    }
    EXPECT_NE(AllowedText(s), "") << s.name;
  }
}

TEST(SettingsTable, JsonHasEveryRow) {
  const std::string json = TableJson();
  for (const Setting& s : Table()) EXPECT_NE(json.find(std::string("\"name\":\"") + s.name + "\""), std::string::npos);
  EXPECT_NE(json.find("\"default\":null"), std::string::npos);
  EXPECT_NE(json.find("\"allowed\":\"warn (the default), strict or off\""), std::string::npos);
}

TEST(SettingsParse, ChoiceMessageListsTheChoices) {
  EXPECT_EQ(ErrorOf(Check(Get(Id::kCompat), "bogus")),
            "PJRT_NEURON_COMPAT='bogus'; use warn (the default), strict or off");
  EXPECT_TRUE(Check(Get(Id::kCompat), "strict").ok());
  EXPECT_EQ(ErrorOf(Check(Get(Id::kTorchPlugin), "bogus")),
            "PJRT_NEURON_TORCH_PLUGIN='bogus'; use pjrt-neuron (this plugin, the default) or aws (AWS's libneuronxla)");
}

TEST(SettingsParse, FlagsAreZeroOrOne) {
  EXPECT_TRUE(*ParseFlag(Get(Id::kCompileCache), "1"));
  EXPECT_FALSE(*ParseFlag(Get(Id::kCompileCache), "0"));
  EXPECT_EQ(ErrorOf(ParseFlag(Get(Id::kCompileCache), "yes").status()),
            "PJRT_NEURON_COMPILE_CACHE='yes'; use 1 (on, the default) or 0 (off)");
  EXPECT_FALSE(ParseFlag(Get(Id::kCompileCacheShared), "true").ok());
  EXPECT_FALSE(ParseFlag(Get(Id::kCompileCacheShared), " 1").ok());
}

TEST(SettingsParse, PositiveIntegers) {
  EXPECT_EQ(*ParsePositiveInt("N", "1"), 1);
  EXPECT_EQ(*ParsePositiveInt("N", "4096"), 4096);
  for (const char* bad : {"0", "-1", "two", "", "4097", "1.5", " 2", "2 ", "+2", "99999"}) {
    EXPECT_EQ(ErrorOf(ParsePositiveInt("N", bad).status()), std::string("N='") + bad + "' is not a positive integer");
  }
}

TEST(SettingsParse, ProcessIndex) {
  EXPECT_EQ(*ParseProcessIndex("I", "0"), 0);
  EXPECT_EQ(*ParseProcessIndex("I", "999999"), 999999);
  EXPECT_EQ(ErrorOf(ParseProcessIndex("I", "one").status()), "I='one' is not a process index");
  EXPECT_FALSE(ParseProcessIndex("I", "1234567").ok());
  EXPECT_FALSE(ParseProcessIndex("I", "-1").ok());
}

TEST(SettingsParse, PositiveIntegerListNamesTheBadEntry) {
  EXPECT_EQ(*ParsePositiveIntList("L", "2,2,4"), (std::vector<int>{2, 2, 4}));
  EXPECT_EQ(ErrorOf(ParsePositiveIntList("L", "1,x").status()), "L entry='x' is not a positive integer");
  EXPECT_FALSE(ParsePositiveIntList("L", "1,,2").ok());
}

TEST(SettingsParse, Sizes) {
  EXPECT_EQ(*ParseSize("S", "4096"), 4096);
  EXPECT_EQ(*ParseSize("S", "10B"), 10);
  EXPECT_EQ(*ParseSize("S", "500M"), int64_t{500} << 20);
  EXPECT_EQ(*ParseSize("S", "10G"), int64_t{10} << 30);
  EXPECT_EQ(*ParseSize("S", "1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(*ParseSize("S", "2KB"), 2048);
  EXPECT_EQ(*ParseSize("S", "12.34K"), 12636);  // truncated, as before
  EXPECT_EQ(*ParseSize("S", "0"), 0);
  for (const char* bad : {"lots", "10T", "", "-1G", "1e3", "0x10", " 5M", "5M ", "5.", ".5", "1.2.3", "inf", "5m",
                          "99999999999G"}) {
    EXPECT_EQ(ErrorOf(ParseSize("S", bad).status()),
              std::string("S='") + bad + "' is not a size like 500M or 10G (units B, K, M, G)");
  }
}

TEST(SettingsParse, SizeWithoutAVariableNamesOnlyTheValue) {
  EXPECT_EQ(ErrorOf(ParseSize("", "lots").status()), "'lots' is not a size like 500M or 10G (units B, K, M, G)");
}

TEST(SettingsParse, Seconds) {
  EXPECT_EQ(*ParseSeconds("T", "300", false), 300);
  EXPECT_EQ(*ParseSeconds("T", "0.5", false), 0.5);
  EXPECT_EQ(*ParseSeconds("T", "0", true), 0);
  EXPECT_EQ(ErrorOf(ParseSeconds("T", "0", false).status()), "T='0' is not a positive number of seconds");
  for (const char* bad : {"soon", "5s", "-1", "inf", "nan", "1e3", ""}) {
    EXPECT_FALSE(ParseSeconds("T", bad, false).ok()) << bad;
  }
  EXPECT_EQ(ErrorOf(ParseSeconds("T", "-1", true).status()), "T='-1' is not a non-negative number of seconds");
}

TEST(SettingsRead, UnsetAndEmptyMeanTheDefault) {
  for (std::optional<std::string> value : {std::optional<std::string>(), std::optional<std::string>("")}) {
    ScopedEnv compat("PJRT_NEURON_COMPAT", value);
    ScopedEnv size("PJRT_NEURON_COMPILE_CACHE_MAX_SIZE", value);
    ScopedEnv lnc("NEURON_LOGICAL_NC_CONFIG", value);
    ScopedEnv lock_dir("PJRT_NEURON_LOCK_DIR", value);
    EXPECT_FALSE(IsSet(Id::kCompat));
    EXPECT_EQ(*ChoiceValue(Id::kCompat), "warn");
    EXPECT_EQ(*Size(Id::kCompileCacheMaxSize), int64_t{10} << 30);
    EXPECT_EQ(*PositiveInt(Id::kLogicalNcConfig), 0);
    EXPECT_EQ(Text(Id::kLockDir), "/tmp/pjrt-neuron-locks");
    EXPECT_EQ(*Seconds(Id::kCollectiveTimeout), 300);
    EXPECT_EQ(*ProcessIndex(Id::kProcessIndex), 0);
    EXPECT_TRUE(PositiveIntList(Id::kProcessesNumDevices)->empty());
  }
}

TEST(SettingsRead, TheEnvironmentIsReadAtEachCall) {
  ScopedEnv first("PJRT_NEURON_COMPILE_CACHE", "0");
  EXPECT_FALSE(*Flag(Id::kCompileCache));
  ScopedEnv second("PJRT_NEURON_COMPILE_CACHE", "1");
  EXPECT_TRUE(*Flag(Id::kCompileCache));
}

TEST(SettingsRead, BadValuesNameTheVariable) {
  ScopedEnv timeout("PJRT_NEURON_COLLECTIVE_TIMEOUT", "5s");
  EXPECT_EQ(ErrorOf(Seconds(Id::kCollectiveTimeout).status()),
            "PJRT_NEURON_COLLECTIVE_TIMEOUT='5s' is not a positive number of seconds");
  ScopedEnv idle("PJRT_NEURON_DAEMON_IDLE_SECONDS", "0");
  EXPECT_EQ(*Seconds(Id::kDaemonIdleSeconds), 0);  // 0 is allowed: leave with the last process
  ScopedEnv numerics("PJRT_NEURON_COMPAT_STRICT_NUMERICS", "yes");
  EXPECT_EQ(ErrorOf(Flag(Id::kCompatStrictNumerics).status()),
            "PJRT_NEURON_COMPAT_STRICT_NUMERICS='yes'; use 1 (on) or 0 (off, the default)");
}

TEST(SettingsCompileCacheDirectory, LocalPathsAndFileUrlsAreUsed) {
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  {
    ScopedEnv url("NEURON_COMPILE_CACHE_URL", "/data/cache");
    EXPECT_EQ(CompileCacheDirectory(), "/data/cache");
  }
  {
    ScopedEnv url("NEURON_COMPILE_CACHE_URL", "file:///data/cache");
    EXPECT_EQ(CompileCacheDirectory(), "/data/cache");
  }
}

TEST(SettingsCompileCacheDirectory, RemoteUrlsAndUnsetUseTheUsersCacheDirectory) {
  for (std::optional<std::string> url_value : {std::optional<std::string>("s3://bucket/cache"),
                                               std::optional<std::string>()}) {
    ScopedEnv url("NEURON_COMPILE_CACHE_URL", url_value);
    {
      ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
      EXPECT_EQ(CompileCacheDirectory(), "/xdg/pjrt-neuron/compile-cache");
    }
    ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    {
      ScopedEnv home("HOME", "/home/me");
      EXPECT_EQ(CompileCacheDirectory(), "/home/me/.cache/pjrt-neuron/compile-cache");
    }
    ScopedEnv home("HOME", std::nullopt);
    EXPECT_EQ(CompileCacheDirectory(), "/tmp/pjrt-neuron/compile-cache");
  }
}

TEST(SettingsCheck, InstanceTypesAndCoreListsAreJudgedByTheCore) {
  {
    ScopedEnv type("PJRT_NEURON_INSTANCE_TYPE", "trn9.mega");
    const std::string error = ErrorOf(core::CheckSettings({"PJRT_NEURON_INSTANCE_TYPE"}));
    const std::string expected =
        "PJRT_NEURON_INSTANCE_TYPE='trn9.mega' is not a known instance type; use one of trn1.2xlarge, ";
    EXPECT_EQ(error.rfind(expected, 0), 0u) << error;
    EXPECT_EQ(ErrorOf(core::CheckSettings({})), error);
  }
  {
    ScopedEnv cores("NEURON_RT_VISIBLE_CORES", "0,2");
    EXPECT_NE(ErrorOf(core::CheckSettings({"NEURON_RT_VISIBLE_CORES"})).find("contiguous"), std::string::npos);
  }
  ScopedEnv cores("NEURON_RT_VISIBLE_CORES", "4-7");
  ScopedEnv type("PJRT_NEURON_INSTANCE_TYPE", "trn2.48xlarge");
  EXPECT_TRUE(core::CheckSettings({"NEURON_RT_VISIBLE_CORES", "PJRT_NEURON_INSTANCE_TYPE"}).ok());
}

TEST(SettingsCheck, UnknownNamesAreRefused) {
  EXPECT_EQ(ErrorOf(core::CheckSettings({"PJRT_NEURON_NOPE"})), "'PJRT_NEURON_NOPE' is not a pjrt-neuron setting");
}

}  // namespace
}  // namespace pjrt_neuron::settings
