"""Sweeps: the plan (swept axes and their points), the runner, and the jobs that run points side by side."""
