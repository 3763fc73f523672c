"""A two-node Ray cluster on this machine, for tests: ``python -m tests.ray_cluster HEAD_CPUS WORKER_CPUS``.

Ray's own test utility (``ray.cluster_utils.Cluster``) starts a head node and a worker node, each
with its own raylet and CPU count, as separate machines would have them. The process prints one
JSON line, ``{"address": ..., "nodes": {node id: CPUs}}``, then waits; each line it reads on stdin
is answered with the nodes that the named actor class ran on (``{"actor nodes": [...]}``, from the
cluster's actor table, dead actors included). End of input shuts the cluster down.
"""

from __future__ import annotations

import json
import sys

import ray
from ray.cluster_utils import Cluster

OBJECT_STORE_BYTES = 200 * 2**20  # Ray's default is 30% of RAM per node


def main(head_cpus: int, worker_cpus: int) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": head_cpus, "include_dashboard": False, "object_store_memory": OBJECT_STORE_BYTES})
    try:
        cluster.add_node(num_cpus=worker_cpus, object_store_memory=OBJECT_STORE_BYTES)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        nodes = {n["NodeID"]: n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]}
        print(json.dumps({"address": cluster.address, "nodes": nodes}), flush=True)
        for line in sys.stdin:
            actors = ray._private.state.state.actor_table(None)
            ran_on = {a["Address"]["NodeID"] for a in actors.values() if a.get("ActorClassName") == line.strip()}
            print(json.dumps({"actor nodes": sorted(ran_on)}), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
