"""The ``fedgc`` command: one entry point for the researcher's workflow.

    fedgc run SCENARIO [options]     run a scenario: a YAML file or a built-in's name (= python -m fedgc run ...)
    fedgc check SCENARIO [--deep]    is it ready to run? validate it, find its files (--deep: load its data)
    fedgc report RUN [RUN ...]       summarize runs (= python -m fedgc report ...)
    fedgc fetch ITEM [--dir D]       download data sets and traces (docs/data.md)
    fedgc export-data SCENARIO --out D   write partitions as device data (docs/deploy-edge.md)
    fedgc submit APP CONNECTION --run-config F   flwr run on a deployment, exit 1 if the run failed
    fedgc plugins                    what is registered (models, datasets, compressors, rules, optimizers) and from where
    fedgc scenarios [copy NAME [DEST]]   the built-in scenarios (fedgc run NAME runs one); copy one out to edit

This module only dispatches: each subcommand's options are those of the module it calls.
It must stay importable by old Pythons, so that they get a one-line message instead of a traceback.
"""

import sys

MIN_PYTHON = (3, 11)  # flwr 1.41+ requires Python >= 3.11 (keep equal to requires-python in pyproject.toml)

USAGE = __doc__.split("\n\n")[1].rstrip() + "\n"
COMMANDS = ("run", "check", "report", "fetch", "export-data", "submit", "plugins", "scenarios")


def _run(argv: "list[str]") -> int:
    from fedgc.cli.run import main
    return main(argv)


def _own_process() -> None:
    """Run as the ``fedgc`` command: a Flower runtime's orphans are re-parented to this process, so
    the clean-up finds them all (fedgc.runs.process_tree.adopt_orphans)."""
    from fedgc.runs.process_tree import adopt_orphans

    adopt_orphans()


def _check(argv: "list[str]") -> int:
    from fedgc.cli.check import main
    return main(argv)


def _report(argv: "list[str]") -> int:
    from fedgc.reports.run_reports import main
    return main(argv)


def _fetch(argv: "list[str]") -> int:
    from fedgc.fetch import main
    return main(argv)


def _export_data(argv: "list[str]") -> int:
    from fedgc.cli.export_data import main
    return main(argv)


def _submit(argv: "list[str]") -> int:
    from fedgc.cli.submit import main
    return main(argv)


def _plugins(argv: "list[str]") -> int:
    from fedgc.plugins.registry import main
    return main(argv)


def _scenarios(argv: "list[str]") -> int:
    from fedgc.scenario.builtin import main
    return main(argv)


DISPATCH = {"run": _run, "check": _check, "report": _report, "fetch": _fetch, "export-data": _export_data,
            "submit": _submit, "plugins": _plugins, "scenarios": _scenarios}


def main(argv: "list[str] | None" = None) -> int:  # quoted: old Pythons import this module (above)
    if sys.version_info < MIN_PYTHON:
        found = ".".join(map(str, sys.version_info[:3]))
        sys.stderr.write(f"fedgc: needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer (this is Python {found})\n")
        return 2
    if argv is None:
        _own_process()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write("usage: fedgc COMMAND [ARGS]\n\n" + USAGE
                         + "\n'fedgc COMMAND --help' lists a command's options.\n")
        return 0 if argv else 2
    if argv[0] == "--version":
        import fedgc
        print("fedgc " + fedgc.__version__)
        return 0
    command = DISPATCH.get(argv[0])
    if command is None:
        sys.stderr.write(f"fedgc: unknown command {argv[0]!r} (expected one of: {', '.join(COMMANDS)})\n")
        return 2
    code = command(argv[1:])
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
