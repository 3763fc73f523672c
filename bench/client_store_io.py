"""Benchmark: the client-state store's throughput (``fedgc.flower.state.client_store``).

One stateful client's state as the ClientApp stores it (``pack_state`` of DGC's fp32 momentum u and
velocity v, dense) for ``mnist_2nn`` (199,210 parameters) and ``mnist_cnn`` (1,663,370): the time to
write it to the disk store (a first row, and a row that supersedes one), to read it back, and for
comparison the encoding alone and a plain file's write and read of the same bytes, each the mean of
``--repeat`` clients. The store is in a temporary folder (the OS page cache, as in a run).

    .venv/bin/python bench/client_store_io.py [--repeat 20]

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def mean_ms(call, repeat: int) -> float:
    t0 = time.perf_counter()
    for i in range(repeat):
        call(i)
    return 1000 * (time.perf_counter() - t0) / repeat


def measure(params: int, repeat: int, folder: Path) -> dict:
    import torch
    from flwr.app import RecordDict

    from fedgc.flower.state.client_state import pack_state
    from fedgc.flower.state.disk_store import DiskStore
    from fedgc.flower.state.state_bytes import decode_state, encode_state

    generator = torch.Generator().manual_seed(0)
    state = RecordDict({"fedgc.memory": pack_state({"u": torch.randn(params, generator=generator),
                                                    "v": torch.randn(params, generator=generator)})})
    store = DiskStore(folder / f"store-{params}.sqlite")
    data = encode_state(state)

    def write_file(i: int) -> None:
        (folder / f"f{params}-{i}").write_bytes(data)

    result = {
        "params": params, "state_mb": round(len(data) / 1e6, 3),
        "encode_ms": mean_ms(lambda i: encode_state(state), repeat),
        "decode_ms": mean_ms(lambda i: decode_state(data), repeat),
        "save_first_ms": mean_ms(lambda i: store.save(i, 1, state), repeat),
        "save_superseding_ms": mean_ms(lambda i: store.save(i, 2, state), repeat),
        "load_ms": mean_ms(lambda i: store.load(i), repeat),
        "plain_file_write_ms": mean_ms(write_file, repeat),
        "plain_file_read_ms": mean_ms(lambda i: (folder / f"f{params}-{i}").read_bytes(), repeat),
    }
    result = {k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}
    result["save_mb_per_s"] = round(len(data) / 1e3 / result["save_superseding_ms"], 1)
    result["load_mb_per_s"] = round(len(data) / 1e3 / result["load_ms"], 1)
    store.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    runs = []
    with tempfile.TemporaryDirectory(prefix="fedgc-store-bench-") as tmp:
        for name, params in (("mnist_2nn", 199_210), ("mnist_cnn", 1_663_370)):
            run = {"model": name, **measure(params, args.repeat, Path(tmp))}
            print(f"{name}: {run['state_mb']} MB a client: save {run['save_superseding_ms']} ms "
                  f"({run['save_mb_per_s']} MB/s), load {run['load_ms']} ms ({run['load_mb_per_s']} MB/s); "
                  f"a plain file: write {run['plain_file_write_ms']} ms, read {run['plain_file_read_ms']} ms",
                  flush=True)
            runs.append(run)
    print(json.dumps({"repeat": args.repeat, "runs": runs}))


if __name__ == "__main__":
    main()
