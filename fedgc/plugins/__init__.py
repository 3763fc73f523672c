"""A researcher's own parts: the registries of models, datasets, compressors, aggregation rules and server
optimizers, the three ways in (Python, import path, entry point), and the options model of a part that takes
none.
"""
