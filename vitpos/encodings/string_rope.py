"""Placeholder: being written (issue 33)."""
