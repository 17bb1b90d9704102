"""Property-based search for multimodal bugs: workload specs within a
model's limits (space), hypothesis strategies over them (strategies), the
budgeted search that shrinks a failure to its smallest batch (search), and
the reproducers it writes (reproducers)."""
