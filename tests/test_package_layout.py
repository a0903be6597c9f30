"""The Python package's house rules (issue #31): no module over 400 lines, and imports that run
one way, so that no import cycle is hidden again behind an import inside a function.

Read from the source with `ast`; nothing here imports the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pjrt_neuron"
MAX_LINES = 400
# The settings and the library's tables sit at the bottom; the estimate is read by config's
# at-exit hook, so it sits between them.
BOTTOM = ("pjrt_neuron._library", "pjrt_neuron._native")
ABOVE_BOTTOM = ("pjrt_neuron.config", "pjrt_neuron.estimator", "pjrt_neuron.estimation")


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, this: str, is_package: bool, known: set[str]) -> set[str]:
    """The package's modules this one imports, at module level or inside functions alike (an import
    inside a function is still a dependency), except under `if TYPE_CHECKING:`."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = this.split(".") if is_package else this.split(".")[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
            found.update(names)
            if not all(n in known for n in names):  # an attribute of `base`, not only its submodules
                found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name in known and name != this}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(package)
    return {name: _imports(ast.parse(path.read_text()), name, path.name == "__init__.py", set(modules))
            for name, path in modules.items()}


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def cycles_through(graph: dict[str, set[str]], prefixes) -> list[str]:
    """Each module under `prefixes` that its own imports lead back to, with the way back."""
    found = []
    for start in sorted(graph):
        if _within(start, prefixes) and start in _reachable(graph, start):
            found.append(f"{start} -> ... -> {start}")
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports from the bottom (the library and its tables) up to the settings or the estimate."""
    return [f"{low} -> {high}" for low in BOTTOM for high in sorted(_reachable(graph, low))
            if _within(high, ABOVE_BOTTOM)]


def oversized(package: Path = PACKAGE, limit: int = MAX_LINES) -> list[str]:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules(package).items()}
    return [f"{name}: {lines} lines" for name, lines in sorted(sizes.items()) if lines > limit]


def test_no_python_module_is_over_400_lines():
    assert oversized() == [], f"split these along a seam (a module over {MAX_LINES} lines does two jobs)"


def test_the_library_and_its_tables_import_neither_the_settings_nor_the_estimate():
    assert upward_imports(import_graph()) == []


def test_the_settings_the_library_and_the_estimate_import_no_cycle():
    assert cycles_through(import_graph(), BOTTOM + ABOVE_BOTTOM) == []


def test_no_import_cycle_outside_the_native_device():
    # torch_native's tensor type and its dispatcher call each other by design (_storage, _dispatch).
    found = cycles_through(import_graph(), ["pjrt_neuron"])
    assert [c for c in found if not c.startswith("pjrt_neuron.torch_native.")] == []


# ---------------------------------------------------------------- the checks themselves can fail


def _write(root: Path, files: dict[str, str]) -> Path:
    package = root / "pjrt_neuron"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_the_checks_find_the_old_cycle_hidden_in_a_function(tmp_path):
    # The tree before #31: _native imported config inside a function, config the estimator inside
    # a function, and the estimator _native at module level.
    package = _write(tmp_path, {
        "__init__.py": "",
        "_native.py": "def library():\n    from pjrt_neuron.config import library_path\n",
        "config.py": "from pjrt_neuron import _native\n\ndef prepare():\n    from pjrt_neuron import estimator\n",
        "estimator.py": "from pjrt_neuron import _native\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pjrt_neuron import config\n",
    })
    graph = import_graph(package)
    assert graph["pjrt_neuron._native"] == {"pjrt_neuron.config"}
    assert graph["pjrt_neuron.typed"] == set()  # TYPE_CHECKING imports are annotations only
    assert "pjrt_neuron._native -> pjrt_neuron.config" in upward_imports(graph)
    assert cycles_through(graph, BOTTOM + ABOVE_BOTTOM) == [
        "pjrt_neuron._native -> ... -> pjrt_neuron._native", "pjrt_neuron.config -> ... -> pjrt_neuron.config",
        "pjrt_neuron.estimator -> ... -> pjrt_neuron.estimator"]


def test_the_checks_find_relative_imports_and_a_long_module(tmp_path):
    package = _write(tmp_path, {
        "__init__.py": "",
        "estimation/__init__.py": "",
        "estimation/hook.py": "from . import model\n",
        "estimation/model.py": "from .. import _native\n",
        "_native.py": "from .estimation import hook\n" + "x = 1\n" * MAX_LINES,
    })
    graph = import_graph(package)
    assert graph["pjrt_neuron.estimation.hook"] == {"pjrt_neuron.estimation.model"}
    assert graph["pjrt_neuron.estimation.model"] == {"pjrt_neuron._native"}
    assert "pjrt_neuron.estimation.model -> ... -> pjrt_neuron.estimation.model" in \
        cycles_through(graph, BOTTOM + ABOVE_BOTTOM)
    assert oversized(package) == [f"pjrt_neuron._native: {MAX_LINES + 1} lines"]


@pytest.mark.parametrize("module", ["pjrt_neuron._native", "pjrt_neuron.config", "pjrt_neuron.estimator"])
def test_each_module_of_the_old_cycle_is_in_the_real_graph(module):
    # A rename would otherwise leave the cycle checks looking at nothing.
    assert module in import_graph()
