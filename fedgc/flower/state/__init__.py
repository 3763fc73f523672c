"""Stateful clients' state, read by both sides: the records a client keeps between rounds, their bytes, and the
stores (memory, disk) that keep them between a client's turns.
"""
