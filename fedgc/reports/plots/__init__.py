"""Plots (matplotlib, no pyplot): one run's ``plots/`` folder, and overlays comparing runs."""

from fedgc.reports.plots.overlays import COMPARE_PLOT_FILES, RunSeries, plot_comparison
from fedgc.reports.plots.run import RUN_PLOT_FILES, AccuracyPoint, accuracy_points, merge_attempts, plot_run

__all__ = ["COMPARE_PLOT_FILES", "RUN_PLOT_FILES", "AccuracyPoint", "RunSeries", "accuracy_points",
           "merge_attempts", "plot_comparison", "plot_run"]
