"""The ``pjrt-neuron`` command line."""

from __future__ import annotations

import argparse
import json
import sys

from pjrt_neuron import __version__, config


def _ls(args) -> int:
    from pjrt_neuron import instance

    description = instance.describe(args.instance_type, args.logical_nc_config)
    if args.json:
        print(json.dumps(description, indent=2))
    else:
        print(instance.format_table(description, show_processes=args.wide))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pjrt-neuron", description="NeuronCores as XLA devices.")
    parser.add_argument("--version", action="version", version=f"pjrt-neuron {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("library-path", help="print the plugin library's path (for NEURON_LIBRARY_PATH)")
    commands.add_parser("engine-path", help="print the simulator engine's path")
    ls = commands.add_parser("ls", help="list the NeuronCores of the (simulated) instance, like neuron-ls")
    ls.add_argument("-w", "--wide", action="store_true", help="also show the processes holding cores")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.add_argument("--instance-type", help="default: $PJRT_NEURON_INSTANCE_TYPE or trn1.2xlarge")
    ls.add_argument("--logical-nc-config", type=int, choices=(1, 2),
                    help="default: $NEURON_LOGICAL_NC_CONFIG or the instance's own")
    check = commands.add_parser(
        "check", help="run a script with the Trainium compatibility analysis and report what would fail there")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--strict", action="store_true",
                       help="fail each incompatible compilation at once, as neuronx-cc would")
    check.add_argument("script", nargs=argparse.REMAINDER, help="-- python script.py [args]")
    args = parser.parse_args(argv)
    try:
        if args.command == "library-path":
            print(config.library_path())
        elif args.command == "engine-path":
            print(config.engine_library_path())
        elif args.command == "ls":
            return _ls(args)
        elif args.command == "check":
            from pjrt_neuron import check as check_command

            script = args.script[1:] if args.script[:1] == ["--"] else args.script
            return check_command.main(script, args.json, "strict" if args.strict else "warn")
    except config.ConfigurationError as error:
        print(f"pjrt-neuron: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
