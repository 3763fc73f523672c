"""The server side of a round without Flower: aggregation rules and server optimizers."""
