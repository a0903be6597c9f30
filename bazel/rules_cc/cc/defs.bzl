"""Offline stand-in for @rules_cc: Bazel 4.2.3's @bazel_tools loads these names, and
the real rules_cc would be downloaded. Each one forwards to the rule built into Bazel.
Building and testing //plugin takes cc_binary, cc_library, cc_test, cc_toolchain and
cc_toolchain_suite; the rest are loaded by other @bazel_tools files."""

def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_import(**kwargs):
    native.cc_import(**kwargs)

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_proto_library(**kwargs):
    native.cc_proto_library(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)

def objc_library(**kwargs):
    native.objc_library(**kwargs)
