"""Link models, one per file. ``LINKS`` maps a scenario's ``network.link.kind`` to a class."""
