"""Link models, one per file. ``LINKS`` maps a scenario's ``network.link`` to a class."""

from fedgc.network.links.base import Direction, Link
from fedgc.network.links.constant import ConstantLink
from fedgc.network.links.gilbert_elliott import GilbertElliottLink
from fedgc.network.links.trace import TraceLink

LINKS: dict[str, type[Link]] = {
    "constant": ConstantLink,
    "gilbert_elliott": GilbertElliottLink,
    "trace": TraceLink,
}

__all__ = ["LINKS", "ConstantLink", "Direction", "GilbertElliottLink", "Link", "TraceLink"]
