"""The audit's transport (its rules are pure, in `rules/audit.py` and `rules/reports.py`): reading objects for
the `audit` command, the in-server audit loop, writing policy reports and the Lease that picks their one
writer.
"""
