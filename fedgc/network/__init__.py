"""The mobile network and device model on a simpy clock (no Flower imports here)."""
