"""The ``pjrt-neuron`` command line."""

from __future__ import annotations

import argparse
import sys

from pjrt_neuron import __version__, config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pjrt-neuron", description="NeuronCores as XLA devices.")
    parser.add_argument("--version", action="version", version=f"pjrt-neuron {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("library-path", help="print the plugin library's path (for NEURON_LIBRARY_PATH)")
    commands.add_parser("engine-path", help="print the simulator engine's path")
    args = parser.parse_args(argv)
    try:
        if args.command == "library-path":
            print(config.library_path())
        elif args.command == "engine-path":
            print(config.engine_library_path())
    except config.ConfigurationError as error:
        print(f"pjrt-neuron: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
