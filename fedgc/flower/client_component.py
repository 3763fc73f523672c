"""The ClientApp as Flower loads it (pyproject's ``clientapp`` component): the ``app`` of
``fedgc.flower.client_app`` plus its answer to the server's partition query.

On Flower's runtimes the server learns which data partition each node holds by asking
(``fedgc.flower.partition_grid``); the node answers from its ``node_config``. The handler is registered
here, on the same ``ClientApp`` object, so every engine runs the one ClientApp.
"""

from __future__ import annotations

from flwr.app import Context, Message, MetricRecord, RecordDict

from fedgc.flower.client_app import app
from fedgc.flower.partition_grid import PARTITION_QUERY

__all__ = ["app"]


@app.query(PARTITION_QUERY.split(".", 1)[1])
def report_partition(msg: Message, context: Context) -> Message:
    """Which partition this node holds (``--node-config "partition-id=P num-partitions=N"``)."""
    config = context.node_config
    if "partition-id" not in config:
        raise ValueError('this SuperNode has no partition-id: start it with --node-config "partition-id=P ..."')
    record = MetricRecord({"partition-id": int(config["partition-id"]),
                           "num-partitions": int(config.get("num-partitions", 0))})
    return Message(RecordDict({"partition": record}), reply_to=msg)
