"""Diff: takes two reports (JSON reports, or snapshots judged by the installed checks), gives
what changed between them (findings new, gone, of another severity, the figures that moved,
the checks that could judge before and no longer can) in text, markdown or JSON, and whether
it got worse.
"""
