"""What a user reads about runs: the comparison tables, the baseline comparison, plots, the progress line and
TensorBoard files. Reports read run folders; they never change a run's records.
"""
