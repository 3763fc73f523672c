"""The scenario: its model and sections, the errors that say the fix, the YAML 1.2 reader and its bounds, how the
files it names are found, the built-in scenarios, and whether one is ready to run.
"""
