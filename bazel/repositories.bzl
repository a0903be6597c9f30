"""Repository rules that take what the build needs from this machine, never from the network."""

_PYTHON_ENV = "PJRT_NEURON_PYTHON"

# The same question plugin/CMakeLists.txt asks: where did pip put the xla-cpu-pjrt wheel?
_FIND_WHEEL = """
import importlib.util, os
try:
    spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt")
except ImportError:
    spec = None
if spec is None or spec.origin is None:
    raise SystemExit("xla_plugins.xla_cpu_pjrt is not importable")
print(os.path.dirname(spec.origin))
"""

_XLA_CPU_PJRT_BUILD = """\
package(default_visibility = ["//visibility:public"])

# pjrt_c_api.h, included as "pjrt_c_api.h" like the CMake build's -I does.
cc_library(
    name = "pjrt_c_api",
    hdrs = glob(["include/**/*.h"]),
    strip_include_prefix = "include",
)

# The simulator's engine, for tests that load the plugin.
exports_files(["xla_cpu_pjrt.so"])
"""

def _workspace_root(rctx):
    return rctx.path(Label("//plugin:CMakeLists.txt")).dirname.dirname

def _python(rctx):
    python = rctx.os.environ.get(_PYTHON_ENV) or "python3"
    if "/" not in python:
        found = rctx.which(python)
        if found == None:
            fail("%s (from $%s) is not on PATH" % (python, _PYTHON_ENV))
        return str(found)
    if not python.startswith("/"):
        # Relative to the workspace, e.g. PJRT_NEURON_PYTHON=.venv/bin/python.
        python = "%s/%s" % (_workspace_root(rctx), python)

    # Not resolved through symlinks: a venv's python is a symlink and only works by that name.
    return python

def _xla_cpu_pjrt_impl(rctx):
    python = _python(rctx)
    result = rctx.execute([python, "-c", _FIND_WHEEL])
    if result.return_code != 0:
        fail(("cannot find the xla-cpu-pjrt wheel with %s: %s\n" +
              "Install it (pip install xla-cpu-pjrt==0.0.1) or point $%s at the python that has it.") %
             (python, (result.stderr or result.stdout).strip(), _PYTHON_ENV))
    wheel_dir = result.stdout.strip()
    for needed in ["include/pjrt_c_api.h", "xla_cpu_pjrt.so"]:
        if not rctx.path("%s/%s" % (wheel_dir, needed)).exists:
            fail("%s/%s is missing; reinstall xla-cpu-pjrt==0.0.1" % (wheel_dir, needed))

    # Symlinks, not copies: XLA's files stay in the wheel.
    rctx.symlink(wheel_dir + "/include", "include")
    rctx.symlink(wheel_dir + "/xla_cpu_pjrt.so", "xla_cpu_pjrt.so")
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)
    rctx.file("BUILD.bazel", _XLA_CPU_PJRT_BUILD)

xla_cpu_pjrt_repository = repository_rule(
    implementation = _xla_cpu_pjrt_impl,
    environ = [_PYTHON_ENV],
    # Also re-run whenever the Bazel server starts: the wheel may have moved without the
    # variable changing. (Edits to the header itself are seen anyway, through the symlink.)
    local = True,
    doc = "Exposes pjrt_c_api.h and xla_cpu_pjrt.so from the installed xla-cpu-pjrt wheel.",
)

def _pjrt_neuron_version_impl(rctx):
    # One version for every build: the package's, from pyproject.toml (CMake reads it there too).
    pyproject = rctx.read("%s/pyproject.toml" % _workspace_root(rctx))
    version = ""
    for line in pyproject.splitlines():
        if line.startswith("version = \""):
            version = line.split("\"")[1]
            break
    if not version:
        fail("pyproject.toml has no 'version = \"x.y.z\"' line")
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)
    rctx.file("BUILD.bazel", "")
    rctx.file("version.bzl", 'PJRT_NEURON_VERSION = "%s"\n' % version)

pjrt_neuron_version_repository = repository_rule(
    implementation = _pjrt_neuron_version_impl,
    doc = "PJRT_NEURON_VERSION, as declared in pyproject.toml.",
)
