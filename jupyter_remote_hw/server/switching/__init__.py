"""Switching a notebook's kernel to other hardware: the switch's steps, and what it
carries from the old kernel to the new one."""
