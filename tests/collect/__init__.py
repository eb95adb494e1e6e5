"""Tests of qadvisor.collect: what is read from real servers, and how."""
