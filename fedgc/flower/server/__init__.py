"""The server's side of the wire: fedgc's strategy, the round loop's Flower stages (exchange, downlink), the
grids and the ServerApp. Never imports fedgc.flower.client.
"""
