"""A real, shaped network for checking the simulated clock (docs/sim-to-real.md): Linux network
namespaces joined by veth pairs shaped with ``tbf`` (``netns``), throughput traces replayed with
``tc qdisc change`` (``replay``), byte counters read off the interfaces (``traffic``), and Flower's
SuperLink and SuperNodes started on it as processes (``deployment``). No flwr import here."""

from fedgc.shaped.netns import FRAME_OVERHEAD, ShapingUnavailable, Star, namespaces_with, unavailable_reason

__all__ = ["FRAME_OVERHEAD", "ShapingUnavailable", "Star", "namespaces_with", "unavailable_reason"]
