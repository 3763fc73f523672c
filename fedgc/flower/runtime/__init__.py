"""Where the two sides meet in one process or start as processes: the inline engine's grid, the flower engine on
Flower's simulation runtime, and the Flower CLI processes (SuperLink, SuperNodes, flwr run).
"""
