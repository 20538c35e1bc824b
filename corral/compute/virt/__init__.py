"""Virt drivers: what a compute service runs servers with (see driver.py)."""
