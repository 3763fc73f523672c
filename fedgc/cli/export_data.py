"""``fedgc export-data SCENARIO --out DIR [--partition P ...] [--set key=value ...]``

Writes simulated partitions in the on-device format (``fedgc.data.device_files``): ``DIR/partition-P/train.npz``
for each partition asked (default: all ``data.num_clients``), the same examples the simulation gives
partition P. Copy one folder to a device and start its SuperNode with
``--node-config "partition-id=P num-partitions=N data-dir=/path/to/that/folder"`` (docs/deploy-edge.md).
A folder that already holds files is refused (nothing is written) unless ``--overwrite``, which first
removes the ``partition-*`` folders an earlier export left there; a folder holding anything else is
refused even then. Exit codes: 0 written; 2 a bad scenario, partition or output (one line on stderr).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import NoReturn

from fedgc.core.parts import federated_data
from fedgc.data.base import DataFileError
from fedgc.data.device_files import save_device_data
from fedgc.runs.engines import EXIT_INVALID
from fedgc.scenario.errors import ScenarioError
from fedgc.scenario.model import load_scenario


def _take_folder(out: Path, overwrite: bool) -> None:
    """Refuse a folder that holds files, or with ``overwrite`` clear an earlier export from it."""
    if out.exists() and not out.is_dir():
        raise OSError(f"--out {out}: exists and is not a folder")
    held = sorted(out.iterdir()) if out.is_dir() else []
    if not held:
        return
    if not overwrite:
        raise OSError(f"--out {out} already holds files: choose a new folder, or add --overwrite to replace "
                      "an earlier export there")
    foreign = [p.name for p in held if not (p.name.startswith("partition-") and p.is_dir() and not p.is_symlink())]
    if foreign:
        raise OSError(f"--out {out} holds {foreign[0]!r}, not an export (partition-P folders): --overwrite "
                      "replaces only those; choose another folder")
    for path in held:
        shutil.rmtree(path)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(EXIT_INVALID, f"error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="fedgc export-data", description=__doc__.split("\n\n")[1])
    parser.add_argument("scenario")
    parser.add_argument("--out", required=True, help="folder to write partition-P/train.npz into (new or empty)")
    parser.add_argument("--partition", type=int, action="append", default=[],
                        help="a partition to export (repeatable; default: all)")
    parser.add_argument("--overwrite", action="store_true",
                        help="write into a folder that holds an earlier export (its partition-P folders are removed first)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        scenario = load_scenario(args.scenario, args.overrides)
        count = scenario.data.num_clients
        wanted = args.partition or list(range(count))
        bad = [p for p in wanted if not 0 <= p < count]
        if bad:
            raise ScenarioError(f"partition {bad[0]} out of range: the scenario has partitions 0..{count - 1}")
        data = federated_data(scenario)
        _take_folder(Path(args.out), args.overwrite)
        for partition in wanted:
            path = save_device_data(data.partitions[partition], Path(args.out) / f"partition-{partition}")
            print(f"{path}: {len(data.partitions[partition])} examples of shape {tuple(data.input_shape)}, "
                  f"{data.num_classes} classes")
    except (ScenarioError, DataFileError, OSError) as err:
        sys.stderr.write(f"error: {err}\n")
        return EXIT_INVALID
    return 0


if __name__ == "__main__":
    sys.exit(main())
