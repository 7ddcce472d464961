"""`planner design`: search network designs for a workload mix (CONTRACT.md "Network design").

backends.py evaluates design points in parallel (local processes or Ray), cache.py keeps their
results on disk."""
