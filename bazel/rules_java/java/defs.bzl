"""Offline stand-in for @rules_java: Bazel 4.2.3's @bazel_tools loads these names, and
the real rules_java would be downloaded. Each one forwards to the rule built into Bazel.
Building and testing //plugin takes java_import, java_runtime and java_toolchain (from
@bazel_tools//tools/jdk); the rest are loaded by other @bazel_tools files."""

def java_binary(**kwargs):
    native.java_binary(**kwargs)

def java_import(**kwargs):
    native.java_import(**kwargs)

def java_library(**kwargs):
    native.java_library(**kwargs)

def java_proto_library(**kwargs):
    native.java_proto_library(**kwargs)

def java_runtime(**kwargs):
    native.java_runtime(**kwargs)

def java_toolchain(**kwargs):
    native.java_toolchain(**kwargs)
