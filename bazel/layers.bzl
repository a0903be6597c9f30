"""pjrt_neuron_layer: one folder of plugin/src as a cc_library, as plugin/cmake/layers.cmake does for CMake."""

load("@rules_cc//cc:defs.bzl", "cc_library")

COPTS = [
    "-std=c++17",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
    "-fvisibility=hidden",
    "-fvisibility-inlines-hidden",
]

def pjrt_neuron_layer(name, dir, files = None, exclude = [], deps = [], local_defines = []):
    """The files of src/<dir> (not its subfolders), or only `files`, less `exclude`.

    Headers are included as "<dir>/<file>.h" through the library's own include directory.
    """
    prefix = "src/%s/" % dir
    if files:
        paths = [prefix + f for f in files]
    else:
        paths = native.glob([prefix + "*.h", prefix + "*.inc", prefix + "*.cc"])
    paths = [p for p in paths if p[len(prefix):] not in exclude]
    cc_library(
        name = name,
        srcs = [p for p in paths if p.endswith(".cc")],
        hdrs = [p for p in paths if not p.endswith(".cc")],
        strip_include_prefix = "src",
        copts = COPTS,
        local_defines = local_defines,
        # The exported PjrtNeuron_* helpers are referenced by nothing in the library.
        alwayslink = True,
        visibility = ["//visibility:public"],
        deps = deps,
    )
