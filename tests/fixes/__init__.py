"""Tests of qadvisor.fixes: fix builders, and every printed fix run on a real server."""
