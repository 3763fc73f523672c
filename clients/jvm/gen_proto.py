"""Write the Flower Fleet API schema, exactly as the installed flwr has it, for the JVM client's build.

flwr ships its protobuf schema only compiled, as the ``flwr.proto.*_pb2`` modules; each embeds its
serialized ``FileDescriptorProto``. This script collects the descriptors of the Fleet API's files
(and everything they import), unchanged, into one ``FileDescriptorSet``:
``clients/jvm/proto/flwr-proto.desc``, plus the flwr version in ``clients/jvm/proto/FLWR_VERSION``.
``make jvm`` then runs ``protoc --descriptor_set_in=... --java_out=...`` on it, so the Java message
classes have the SuperLink's field numbers and types by construction.

Usage (needs a Python with flwr installed, e.g. the project's .venv):
    python clients/jvm/gen_proto.py           # (re)write the two files
    python clients/jvm/gen_proto.py --check   # exit 1 if they differ from the installed flwr's
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2

HERE = Path(__file__).resolve().parent
DESC = HERE / "proto" / "flwr-proto.desc"
VERSION = HERE / "proto" / "FLWR_VERSION"
# The Fleet API (fleet.proto) and the files the client uses directly; imports are added below.
ROOTS = ["fleet", "heartbeat", "message", "run", "fab", "node", "recorddict", "error", "transport"]


def descriptor_set() -> bytes:
    """The FileDescriptorSet of ROOTS and their imports, dependencies first, each file unchanged."""
    ordered: list = []
    seen: set[str] = set()

    def visit(file_descriptor) -> None:
        if file_descriptor.name in seen:
            return
        seen.add(file_descriptor.name)
        for dependency in file_descriptor.dependencies:
            visit(dependency)
        ordered.append(file_descriptor)

    for name in ROOTS:
        visit(importlib.import_module(f"flwr.proto.{name}_pb2").DESCRIPTOR)
    files = [descriptor_pb2.FileDescriptorProto.FromString(fd.serialized_pb) for fd in ordered]
    return descriptor_pb2.FileDescriptorSet(file=files).SerializeToString(deterministic=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args(argv)
    import flwr

    expected = {DESC: descriptor_set(), VERSION: f"{flwr.__version__}\n".encode()}
    if args.check:
        stale = [p.name for p, data in expected.items() if not p.exists() or p.read_bytes() != data]
        if stale:
            print(f"error: {', '.join(stale)} differ from the installed flwr {flwr.__version__}: "
                  "run python clients/jvm/gen_proto.py", file=sys.stderr)
            return 1
        return 0
    DESC.parent.mkdir(parents=True, exist_ok=True)
    for path, data in expected.items():
        path.write_bytes(data)
    print(f"wrote {DESC.relative_to(HERE.parent.parent)} ({len(expected[DESC])} bytes, flwr {flwr.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
