"""Backends: one module per implementation of a port in candor.ports."""
