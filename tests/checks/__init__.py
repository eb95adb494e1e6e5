"""Tests of the checks (checks/): each check's snapshots and its pathology on real servers."""
