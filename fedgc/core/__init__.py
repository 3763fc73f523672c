"""The Flower-free core of one run: the parts every engine and both apps derive from a scenario,
the round records and observers, the checkpoint format and the stop rules."""
