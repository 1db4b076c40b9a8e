"""Thin jupyter_server layer: extension loading and HTTP handlers."""
