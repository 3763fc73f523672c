"""A run and what it leaves behind: its folder (the lock, the metrics files, the runtime record), the engines
that run it, and the processes it starts (the process tree and the guard that ends them).
"""
