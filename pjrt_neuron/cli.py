"""The ``pjrt-neuron`` command line: each subcommand declares itself once (name, help, arguments,
handler) with @command, and main builds the parser from those declarations."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Callable

from pjrt_neuron import __version__, _native, cache, check, config, instance, precompile, selftest
from pjrt_neuron.estimation import command as estimate_command
from pjrt_neuron.estimation import plan as estimate_plan
from pjrt_neuron.estimation.step import DEPLOYMENTS


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: Callable[[argparse.Namespace], int | None]
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    script: bool = False  # takes `-- python script.py [args]` after its options


COMMANDS: list[Command] = []


def command(name: str, help: str, arguments=None, script: bool = False):
    def declare(run):
        COMMANDS.append(Command(name, help, run, arguments, script))
        return run
    return declare


def _json_flag(parser: argparse.ArgumentParser, what: str = "print JSON instead of a table") -> None:
    parser.add_argument("--json", action="store_true", help=what)


# ---------------------------------------------------------------- paths


@command("library-path", "print the plugin library's path (for NEURON_LIBRARY_PATH)")
def _library_path(args) -> int:
    print(config.library_path())
    return 0


def _engine_path_arguments(parser):
    parser.add_argument("--framework", choices=config.FRAMEWORKS, default="capi",
                        help="the engine build this kind of client runs on (default: capi)")


@command("engine-path", "print the simulator engine's path", _engine_path_arguments)
def _engine_path(args) -> int:
    print(config.engine_library_path(args.framework))
    return 0


# ---------------------------------------------------------------- ls


def _ls_arguments(parser):
    parser.add_argument("-w", "--wide", action="store_true", help="also show the processes holding cores")
    _json_flag(parser)
    parser.add_argument("--instance-type", help="describe this simulated instance (default: the engine in use; "
                                                "on sim, $PJRT_NEURON_INSTANCE_TYPE or trn1.2xlarge)")
    parser.add_argument("--logical-nc-config", type=int, choices=(1, 2),
                        help="default: $NEURON_LOGICAL_NC_CONFIG or the instance's own")


@command("ls", "which engine is in use, and its NeuronCores (the Neuron runtime's, or the simulated instance's), "
               "like neuron-ls", _ls_arguments)
def _ls(args) -> int:
    engine = _native.engine_report(with_memory=True) if not args.instance_type else {"engine": "sim"}
    if "engine_error" in engine:
        raise config.ConfigurationError(engine["engine_error"])
    if engine["engine"] == "neuron":
        print(json.dumps(engine, indent=2) if args.json else instance.format_neuron(engine))
        return 0 if "runtime_error" not in engine and "settings_error" not in engine else 1
    description = instance.describe(args.instance_type, args.logical_nc_config)
    description["engine"] = "sim"
    description["sim_engines"] = _sim_engines()
    print(json.dumps(description, indent=2) if args.json else instance.format_table(description, args.wide))
    return 0


def _sim_engines() -> dict:
    """Which engine build each kind of client runs on (config.engine_build_for), and its path."""
    out = {}
    for framework in config.FRAMEWORKS:
        try:
            path = config.engine_library_path(framework)
            build = config.engine_build_for(framework) if not _engine_overridden() else "PJRT_NEURON_ENGINE_LIBRARY"
            out[framework] = {"build": build, "path": path}
        except config.ConfigurationError as e:
            out[framework] = {"build": None, "error": str(e)}
    return out


def _engine_overridden() -> bool:
    value = os.environ.get("PJRT_NEURON_ENGINE_LIBRARY")
    return bool(value) and value != os.environ.get(config._AUTO_MARK)


# ---------------------------------------------------------------- cache


def _cache_ls(args) -> int:
    found = cache.entries()
    if args.json:
        print(json.dumps([{"key": e.key, "size": e.size, "last_used": e.last_used, "valid": e.valid, **e.header}
                          for e in found], indent=2))
    else:
        print(f"compile cache: {cache.directory()}")
        print(cache.format_entries(found))
    return 0


def _cache_stats(args) -> int:
    stats = cache.stats()
    print(json.dumps(stats, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in stats.items()))
    return 0


def _cache_clear(args) -> int:
    removed = cache.clear(failed_only=args.failed)
    print(f"removed {removed} file(s) from {cache.directory()}")
    return 0


def _cache_prune(args) -> int:
    removed = cache.prune(cache.parse_size(args.max_size))
    print(f"removed {len(removed)} entr{'y' if len(removed) == 1 else 'ies'} "
          f"({sum(e.size for e in removed)} bytes) from {cache.directory()}")
    return 0


def _cache_arguments(parser):
    actions = parser.add_subparsers(dest="cache_command", required=True)
    ls = actions.add_parser("ls", help="list entries, least recently used first")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(cache_run=_cache_ls)
    stats = actions.add_parser("stats", help="entries, bytes, corrupt entries, remembered failures")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(cache_run=_cache_stats)
    clear = actions.add_parser("clear", help="remove every entry")
    clear.add_argument("--failed", action="store_true", help="remove only remembered failed compilations")
    clear.set_defaults(cache_run=_cache_clear)
    prune = actions.add_parser("prune", help="remove least recently used entries down to a size")
    prune.add_argument("--max-size", required=True, help="e.g. 500M or 10G")
    prune.set_defaults(cache_run=_cache_prune)


@command("cache", "the persistent compile cache: ls, stats, clear, prune", _cache_arguments)
def _cache(args) -> int:
    return args.cache_run(args)


# ---------------------------------------------------------------- checks of the engine and of a script


@command("selftest", "run a fixed battery of checks on the engine in use and print a report for bug reports",
         lambda parser: _json_flag(parser, "print the report as JSON"))
def _selftest(args) -> int:
    return selftest.main(args.json)


def _precompile_arguments(parser):
    parser.add_argument("--workers", type=int, help="parallel compile processes (default: CPU count)")


@command("precompile", "record the programs a script compiles, then compile them in parallel into the cache",
         _precompile_arguments, script=True)
def _precompile(args) -> int:
    return precompile.main(args.script, args.workers)


def _check_arguments(parser):
    _json_flag(parser, "print the report as JSON")
    parser.add_argument("--strict", action="store_true",
                        help="fail each incompatible compilation at once, as neuronx-cc would")


@command("check", "run a script with the Trainium compatibility analysis and report what would fail there",
         _check_arguments, script=True)
def _check(args) -> int:
    return check.main(args.script, args.json, "strict" if args.strict else "warn")


# ---------------------------------------------------------------- the estimate


def _estimate_arguments(parser):
    parser.add_argument("--instance", action="append", metavar="TYPE",
                        help="instance type to estimate for; repeat for several side by side "
                             "(default: the simulated one)")
    parser.add_argument("--unit", default="steps", help="what a step processes, e.g. samples or tokens")
    parser.add_argument("--per-step", type=float, default=1.0, help="units a step processes (default 1)")
    parser.add_argument("--price", action="append", default=[], metavar="TYPE=USD",
                        help="hourly price of an instance type, overriding the table's")
    parser.add_argument("--baseline-price", type=float, help="hourly price of what you run today")
    parser.add_argument("--baseline-throughput", type=float, help="units a second of what you run today")
    parser.add_argument("--auto-cast", choices=("none", "matmult"), default="none",
                        help="model neuronx-cc's --auto-cast: matmult runs FP32 matrix products at the BF16 rate "
                             "(neuronx-cc's own default when not told otherwise)")
    parser.add_argument("--deployment", choices=DEPLOYMENTS, default="copies",
                        help="how the job fills the instance: copies of it (one model copy a core when the "
                             "script used one; the default), data-parallel over every core (collectives "
                             "widened), or as-run (only the cores the script used)")
    _json_flag(parser, "print the estimate as JSON")
    parser.add_argument("--trace", metavar="FILE",
                        help="write a Chrome / Perfetto trace of one step on the first instance")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="draw each program on the first instance's roofline (needs the plot extra)")


@command("estimate", "run a script on the simulator and estimate its step time and cost on Trainium",
         _estimate_arguments, script=True)
def _estimate(args) -> int:
    return estimate_command.main(args.script, args.instance, args.unit, args.per_step, args.price,
                                 args.baseline_price, args.baseline_throughput, args.auto_cast, args.json,
                                 args.trace, args.plot, args.deployment)


def _plan_arguments(parser):
    parser.add_argument("--training", metavar="REPORT.json",
                        help="`pjrt-neuron estimate --json` of the training script")
    parser.add_argument("--serving", metavar="REPORT.json", help="`pjrt-neuron estimate --json` of the serving script")
    parser.add_argument("--training-units-per-month", type=float, default=0.0,
                        help="units (in the training report's unit) trained a month: runs x units a run")
    parser.add_argument("--serving-units-per-day", type=float, default=0.0,
                        help="units (in the serving report's unit) served a day")
    parser.add_argument("--peak-to-average", type=float, default=1.0,
                        help="the busiest hour's rate over the day's average (serving is sized for it)")
    parser.add_argument("--latency-bound-ms", type=float, help="p50 latency a served request must meet")
    parser.add_argument("--current-monthly-cost", type=float, help="what the same work costs you a month today, USD")
    _json_flag(parser, "print the plan as JSON")


@command("plan", "monthly cost of training and serving per instance type, from two `estimate --json` reports",
         _plan_arguments)
def _plan(args) -> int:
    return estimate_plan.main(args)


# ---------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="pjrt-neuron", description="NeuronCores as XLA devices.")
    root.add_argument("--version", action="version", version=f"pjrt-neuron {__version__}")
    subcommands = root.add_subparsers(dest="command", required=True)
    for c in COMMANDS:
        sub = subcommands.add_parser(c.name, help=c.help)
        if c.arguments:
            c.arguments(sub)
        if c.script:
            sub.add_argument("script", nargs=argparse.REMAINDER, help="-- python script.py [args]")
        sub.set_defaults(declared=c)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.declared.script and args.script[:1] == ["--"]:
        args.script = args.script[1:]
    try:
        return args.declared.run(args)
    except config.ConfigurationError as error:
        print(f"pjrt-neuron: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
