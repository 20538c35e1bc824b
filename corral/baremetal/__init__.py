"""Bare Metal: nodes, drivers and conductors, wire-compatible with OpenStack Ironic."""
