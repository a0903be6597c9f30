"""The ``pjrt-neuron`` command line."""

from __future__ import annotations

import argparse
import json
import sys

from pjrt_neuron import __version__, config


def _ls(args) -> int:
    from pjrt_neuron import _native, instance

    engine = _native.engine_report(with_memory=True) if not args.instance_type else {"engine": "sim"}
    if "engine_error" in engine:
        raise config.ConfigurationError(engine["engine_error"])
    if engine["engine"] == "neuron":
        if args.json:
            print(json.dumps(engine, indent=2))
        else:
            print(instance.format_neuron(engine))
        return 0 if "runtime_error" not in engine and "settings_error" not in engine else 1
    description = instance.describe(args.instance_type, args.logical_nc_config)
    description["engine"] = "sim"
    description["sim_engines"] = _sim_engines()
    if args.json:
        print(json.dumps(description, indent=2))
    else:
        print(instance.format_table(description, show_processes=args.wide))
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
    value = config.os.environ.get("PJRT_NEURON_ENGINE_LIBRARY")
    return bool(value) and value != config.os.environ.get(config._AUTO_MARK)


def _cache(args) -> int:
    from pjrt_neuron import cache

    if args.cache_command == "ls":
        found = cache.entries()
        if args.json:
            print(json.dumps([{"key": e.key, "size": e.size, "last_used": e.last_used, "valid": e.valid,
                               **e.header} for e in found], indent=2))
        else:
            print(f"compile cache: {cache.directory()}")
            print(cache.format_entries(found))
    elif args.cache_command == "stats":
        stats = cache.stats()
        print(json.dumps(stats, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in stats.items()))
    elif args.cache_command == "clear":
        removed = cache.clear(failed_only=args.failed)
        print(f"removed {removed} file(s) from {cache.directory()}")
    elif args.cache_command == "prune":
        removed = cache.prune(cache.parse_size(args.max_size))
        print(f"removed {len(removed)} entr{'y' if len(removed) == 1 else 'ies'} "
              f"({sum(e.size for e in removed)} bytes) from {cache.directory()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pjrt-neuron", description="NeuronCores as XLA devices.")
    parser.add_argument("--version", action="version", version=f"pjrt-neuron {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("library-path", help="print the plugin library's path (for NEURON_LIBRARY_PATH)")
    engine_path = commands.add_parser("engine-path", help="print the simulator engine's path")
    engine_path.add_argument("--framework", choices=config.FRAMEWORKS, default="capi",
                             help="the engine build this kind of client runs on (default: capi)")
    ls = commands.add_parser("ls", help="which engine is in use, and its NeuronCores (the Neuron runtime's, or the "
                                        "simulated instance's), like neuron-ls")
    ls.add_argument("-w", "--wide", action="store_true", help="also show the processes holding cores")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.add_argument("--instance-type", help="describe this simulated instance (default: the engine in use; "
                                            "on sim, $PJRT_NEURON_INSTANCE_TYPE or trn1.2xlarge)")
    ls.add_argument("--logical-nc-config", type=int, choices=(1, 2),
                    help="default: $NEURON_LOGICAL_NC_CONFIG or the instance's own")
    cache = commands.add_parser("cache", help="the persistent compile cache: ls, stats, clear, prune")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True)
    cache_ls = cache_commands.add_parser("ls", help="list entries, least recently used first")
    cache_ls.add_argument("--json", action="store_true")
    cache_stats = cache_commands.add_parser("stats", help="entries, bytes, corrupt entries, remembered failures")
    cache_stats.add_argument("--json", action="store_true")
    cache_clear = cache_commands.add_parser("clear", help="remove every entry")
    cache_clear.add_argument("--failed", action="store_true", help="remove only remembered failed compilations")
    cache_prune = cache_commands.add_parser("prune", help="remove least recently used entries down to a size")
    cache_prune.add_argument("--max-size", required=True, help="e.g. 500M or 10G")
    selftest = commands.add_parser(
        "selftest", help="run a fixed battery of checks on the engine in use and print a report for bug reports")
    selftest.add_argument("--json", action="store_true", help="print the report as JSON")
    precompile = commands.add_parser(
        "precompile", help="record the programs a script compiles, then compile them in parallel into the cache")
    precompile.add_argument("--workers", type=int, help="parallel compile processes (default: CPU count)")
    precompile.add_argument("script", nargs=argparse.REMAINDER, help="-- python script.py [args]")
    check = commands.add_parser(
        "check", help="run a script with the Trainium compatibility analysis and report what would fail there")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--strict", action="store_true",
                       help="fail each incompatible compilation at once, as neuronx-cc would")
    check.add_argument("script", nargs=argparse.REMAINDER, help="-- python script.py [args]")
    estimate = commands.add_parser(
        "estimate", help="run a script on the simulator and estimate its step time and cost on Trainium")
    estimate.add_argument("--instance", action="append", metavar="TYPE",
                          help="instance type to estimate for; repeat for several side by side "
                               "(default: the simulated one)")
    estimate.add_argument("--unit", default="steps", help="what a step processes, e.g. samples or tokens")
    estimate.add_argument("--per-step", type=float, default=1.0, help="units a step processes (default 1)")
    estimate.add_argument("--price", action="append", default=[], metavar="TYPE=USD",
                          help="hourly price of an instance type, overriding the table's")
    estimate.add_argument("--baseline-price", type=float, help="hourly price of what you run today")
    estimate.add_argument("--baseline-throughput", type=float, help="units a second of what you run today")
    estimate.add_argument("--auto-cast", choices=("none", "matmult"), default="none",
                          help="model neuronx-cc's --auto-cast: matmult runs FP32 matrix products at the BF16 rate "
                               "(neuronx-cc's own default when not told otherwise)")
    estimate.add_argument("--deployment", choices=("copies", "data-parallel", "as-run"), default="copies",
                          help="how the job fills the instance: copies of it (one model copy a core when the "
                               "script used one; the default), data-parallel over every core (collectives "
                               "widened), or as-run (only the cores the script used)")
    estimate.add_argument("--json", action="store_true", help="print the estimate as JSON")
    estimate.add_argument("--trace", metavar="FILE",
                          help="write a Chrome / Perfetto trace of one step on the first instance")
    estimate.add_argument("--plot", metavar="FILE.png",
                          help="draw each program on the first instance's roofline (needs the plot extra)")
    estimate.add_argument("script", nargs=argparse.REMAINDER, help="-- python script.py [args]")
    plan = commands.add_parser(
        "plan", help="monthly cost of training and serving per instance type, from two `estimate --json` reports")
    plan.add_argument("--training", metavar="REPORT.json", help="`pjrt-neuron estimate --json` of the training script")
    plan.add_argument("--serving", metavar="REPORT.json", help="`pjrt-neuron estimate --json` of the serving script")
    plan.add_argument("--training-units-per-month", type=float, default=0.0,
                      help="units (in the training report's unit) trained a month: runs x units a run")
    plan.add_argument("--serving-units-per-day", type=float, default=0.0,
                      help="units (in the serving report's unit) served a day")
    plan.add_argument("--peak-to-average", type=float, default=1.0,
                      help="the busiest hour's rate over the day's average (serving is sized for it)")
    plan.add_argument("--latency-bound-ms", type=float, help="p50 latency a served request must meet")
    plan.add_argument("--current-monthly-cost", type=float, help="what the same work costs you a month today, USD")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "library-path":
            print(config.library_path())
        elif args.command == "engine-path":
            print(config.engine_library_path(args.framework))
        elif args.command == "ls":
            return _ls(args)
        elif args.command == "selftest":
            from pjrt_neuron import selftest as selftest_command

            return selftest_command.main(args.json)
        elif args.command == "cache":
            return _cache(args)
        elif args.command == "precompile":
            from pjrt_neuron import precompile as precompile_command

            script = args.script[1:] if args.script[:1] == ["--"] else args.script
            return precompile_command.main(script, args.workers)
        elif args.command == "check":
            from pjrt_neuron import check as check_command

            script = args.script[1:] if args.script[:1] == ["--"] else args.script
            return check_command.main(script, args.json, "strict" if args.strict else "warn")
        elif args.command == "estimate":
            from pjrt_neuron import estimator as estimate_command

            script = args.script[1:] if args.script[:1] == ["--"] else args.script
            return estimate_command.main(script, args.instance, args.unit, args.per_step, args.price,
                                         args.baseline_price, args.baseline_throughput, args.auto_cast, args.json,
                                         args.trace, args.plot, args.deployment)
        elif args.command == "plan":
            from pjrt_neuron import estimator_plan

            return estimator_plan.main(args)
    except config.ConfigurationError as error:
        print(f"pjrt-neuron: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
