"""Tests of qadvisor.derive: pure facts from catalog rows and parsed statements."""
