"""mmharness: a regression and stress harness for multimodal serving engines."""
