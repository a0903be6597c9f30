// engine/neuron/neuronx_cc and subprocess: the compiler's command line, NEURON_CC_FLAGS split
// like a shell, the target for an instance, ERROR lines and NCC_ codes into a PJRT status,
// and helper programs run with progress and cancellation.
#include "engine/neuron/neuronx_cc.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "engine/neuron/subprocess.h"

namespace pjrt_neuron::engine::neuron {
namespace {

using Words = std::vector<std::string>;

TEST(NeuronxCcCommand, DocumentedShapeWithFlagsLast) {
  CompilerConfig config;
  config.path = "/opt/bin/neuronx-cc";
  config.target = "trn2";
  config.lnc = 2;
  config.extra_flags = {"--model-type", "transformer", "-O1"};
  EXPECT_EQ(CompileCommand(config, "/w/model.hlo_module.pb", "/w/model.neff"),
            (Words{"/opt/bin/neuronx-cc", "compile", "/w/model.hlo_module.pb", "--framework=XLA", "--target=trn2",
                   "--lnc", "2", "--output", "/w/model.neff", "--model-type", "transformer", "-O1"}));
}

TEST(NeuronxCcCommand, TargetFromInstanceFamilyThenInstanceType) {
  EXPECT_EQ(TargetFor(2, ""), "trn1");
  EXPECT_EQ(TargetFor(3, "trn1.2xlarge"), "trn1n");  // the runtime's word wins
  EXPECT_EQ(TargetFor(4, ""), "inf2");
  EXPECT_EQ(TargetFor(5, ""), "trn2");
  EXPECT_EQ(TargetFor(0, "trn1n.32xlarge"), "trn1n");
  EXPECT_EQ(TargetFor(0, "trn1.32xlarge"), "trn1");
  EXPECT_EQ(TargetFor(0, "inf2.xlarge"), "inf2");
  EXPECT_EQ(TargetFor(0, "trn2.48xlarge"), "trn2");
  EXPECT_EQ(TargetFor(0, "p4d.24xlarge"), "");
  EXPECT_EQ(DefaultLnc("trn2"), 2);
  EXPECT_EQ(DefaultLnc("trn1"), 1);
}

TEST(ShellWords, SplitsLikeAShell) {
  EXPECT_EQ(SplitShellWords("").value(), Words{});
  EXPECT_EQ(SplitShellWords("  --a  -b\t--c=1 ").value(), (Words{"--a", "-b", "--c=1"}));
  EXPECT_EQ(SplitShellWords("--x='a b' \"c d\" e\\ f").value(), (Words{"--x=a b", "c d", "e f"}));
  EXPECT_EQ(SplitShellWords("'' \"\"").value(), (Words{"", ""}));
  EXPECT_EQ(SplitShellWords("\"say \\\"hi\\\"\" '\\n'").value(), (Words{"say \"hi\"", "\\n"}));
  EXPECT_EQ(SplitShellWords("--cache_dir=$HOME").value(), (Words{"--cache_dir=$HOME"}));  // no expansion
  EXPECT_EQ(SplitShellWords("--a 'open").status().code(), ErrorCode::kInvalidArgument);
}

constexpr char kFailedOutput[] =
    "2026-01-02 10:00:00.000000: INFO: compiling\n"
    "2026-01-02 10:00:01.000000 ERROR 4711 [neuronx-cc]: [NCC_EUOC002] Unsupported operator: conditional\n"
    "an ERRORS word and NCC_ with no code are not errors\n"
    "2026-01-02 10:00:01.000000 ERROR 4711 [neuronx-cc]: [NCC_EUOC002] Unsupported type f64\n"
    "ERROR: see NCC_EVRF004\n"
    "Compiler status ERROR\n";

TEST(CompilerOutput, ErrorLinesAndCodesInOrderEachCodeOnce) {
  CompilerDiagnostics d = ParseCompilerOutput(kFailedOutput);
  ASSERT_EQ(d.error_lines.size(), 4u);  // "Compiler status ERROR" counts: it says so
  EXPECT_NE(d.error_lines[0].find("conditional"), std::string::npos);
  EXPECT_EQ(d.codes, (Words{"NCC_EUOC002", "NCC_EVRF004"}));
  EXPECT_FALSE(d.passed);
  EXPECT_TRUE(ParseCompilerOutput("...\nCompiler status PASS\n").passed);
}

TEST(CompilerOutput, FailureIsInvalidArgumentWithLinesCodesAndLog) {
  Status s = CompileFailure({1, 0, false}, ParseCompilerOutput(kFailedOutput), "jit_f", "/tmp/x/neuronx-cc.log");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("jit_f"), std::string::npos);
  EXPECT_NE(s.message().find("exit code 1"), std::string::npos);
  EXPECT_NE(s.message().find("[NCC_EUOC002, NCC_EVRF004]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Unsupported operator: conditional"), std::string::npos);
  EXPECT_NE(s.message().find("full log: /tmp/x/neuronx-cc.log"), std::string::npos);
}

TEST(CompilerOutput, HbmCodesAreResourceExhausted) {
  for (const char* code : {"NCC_EOOM001", "NCC_EVRF009"}) {
    const std::string output = std::string("x ERROR 1 [neuronx-cc]: [") + code + "] too big\n";
    Status s = CompileFailure({1, 0, false}, ParseCompilerOutput(output), "p", "log");
    EXPECT_EQ(s.code(), ErrorCode::kResourceExhausted) << code;
    EXPECT_NE(s.message().find(code), std::string::npos);
  }
}

TEST(CompilerOutput, SignalsAndCancellation) {
  CompilerDiagnostics none;
  EXPECT_EQ(CompileFailure({0, SIGKILL, false}, none, "p", "log").code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(CompileFailure({0, SIGKILL, false}, none, "p", "log").message().find("OOM killer"), std::string::npos);
  EXPECT_EQ(CompileFailure({0, SIGABRT, false}, none, "p", "log").code(), ErrorCode::kInternal);
  EXPECT_EQ(CompileFailure({0, SIGSEGV, false}, none, "p", "log").code(), ErrorCode::kInternal);
  EXPECT_EQ(CompileFailure({0, SIGTERM, true}, none, "p", "log").code(), ErrorCode::kCancelled);
}

TEST(CompilerOutput, ManyErrorLinesAreCut) {
  std::string output;
  for (int i = 0; i < 20; ++i) output += "ERROR line " + std::to_string(i) + "\n";
  Status s = CompileFailure({1, 0, false}, ParseCompilerOutput(output), "p", "log");
  EXPECT_NE(s.message().find("(12 more ERROR lines)"), std::string::npos) << s.message();
}

TEST(Subprocess, OutputAndExitCode) {
  SubprocessOptions options;
  options.argv = {"sh", "-c", "echo out; echo err >&2; echo $PN_TEST_VALUE; exit 3"};
  options.environment = {{"PN_TEST_VALUE", "given"}};
  auto run = RunSubprocess(options);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->exit_code, 3);
  EXPECT_EQ(run->signal, 0);
  EXPECT_NE(run->output.find("out\n"), std::string::npos);
  EXPECT_NE(run->output.find("err\n"), std::string::npos);
  EXPECT_NE(run->output.find("given\n"), std::string::npos);
}

TEST(Subprocess, MissingProgramIsFailedPrecondition) {
  SubprocessOptions options;
  options.argv = {"pjrt-neuron-no-such-program"};
  EXPECT_EQ(RunSubprocess(options).status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(FindExecutable("pjrt-neuron-no-such-program"), "");
  EXPECT_NE(FindExecutable("sh"), "");
}

TEST(Subprocess, ProgressWhileItRunsThenCancelKillsItsGroup) {
  SubprocessOptions options;
  // A child of the child, too: cancelling must end the whole group.
  options.argv = {"sh", "-c", "sleep 60 & sleep 60; echo not reached"};
  options.progress_after_seconds = 0.2;
  int reports = 0;
  options.on_progress = [&](double) { reports += 1; };
  std::thread canceller([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    CancelSubprocesses();
  });
  const auto start = std::chrono::steady_clock::now();
  auto run = RunSubprocess(options);
  canceller.join();
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(run->cancelled);
  EXPECT_NE(run->signal, 0);
  EXPECT_GE(reports, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

volatile sig_atomic_t test_handler_calls = 0;
void TestSigintHandler(int) { test_handler_calls = test_handler_calls + 1; }

TEST(Subprocess, SigintKillsTheProgramThenReachesTheProcesssOwnHandler) {
  struct sigaction ours {}, before {};
  ours.sa_handler = TestSigintHandler;
  sigemptyset(&ours.sa_mask);
  sigaction(SIGINT, &ours, &before);
  test_handler_calls = 0;
  SubprocessOptions options;
  options.argv = {"sleep", "60"};
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(getpid(), SIGINT);  // as Ctrl-C does to the framework process
  });
  auto run = RunSubprocess(options);
  interrupter.join();
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_TRUE(run->cancelled);
  EXPECT_EQ(test_handler_calls, 1);  // forwarded once, after the handler was put back
  struct sigaction now {};
  sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, &TestSigintHandler);
  sigaction(SIGINT, &before, nullptr);
}

}  // namespace
}  // namespace pjrt_neuron::engine::neuron
