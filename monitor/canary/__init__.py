"""Canary comparison: load both endpoints alike, judge the canary against its baseline."""
