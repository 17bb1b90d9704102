"""The cache-consistency matrix: its cells (settings) and its workload."""
