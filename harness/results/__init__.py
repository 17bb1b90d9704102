"""Results store: one record per check, appended as it happens, merged at
the end into results.json, which is the source of truth for the report."""
