"""Tally: sums of expense files."""
