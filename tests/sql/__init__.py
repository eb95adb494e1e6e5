"""Tests of qadvisor.sql: statements and function bodies read as text (no server)."""
