"""Workload builders: what a scenario sends (chat messages with media, adapters)."""
