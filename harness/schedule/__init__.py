"""Where and when engines run: which check is the last to need an engine
(`retirement`), and which engine starts ahead of its first use (`ahead`),
planned from the scenario modules' declared engines."""
