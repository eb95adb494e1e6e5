"""Tests of qadvisor.demo: the demo command and the throwaway-server launcher."""
