"""Memory of an engine: samplers (host, NVML), the watch over one engine, card profiles, ballast and chunk decisions."""
