"""Tests of qadvisor.settings: flags, environment, config, baselines, report files."""
