"""Tests of qadvisor.render: golden reports and the published schemas."""
