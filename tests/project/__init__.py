"""Tests of the repository itself: lint and import contracts, CI, docs, test shapes."""
