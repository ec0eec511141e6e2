"""Colours every figure shares (one owner): the verdict colours."""

VERDICT_COLOURS = {"holds": "#2ca02c", "fails": "#d62728", "inconclusive": "#ff7f0e"}
NOT_TESTED = "#bbbbbb"

__all__ = ["NOT_TESTED", "VERDICT_COLOURS"]
