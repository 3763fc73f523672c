"""The client's side of the wire: fedgc's ClientApp, its mods and the checks a client makes of a message. Never
imports fedgc.flower.server.
"""
