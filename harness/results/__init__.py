"""Results store: one record per check, appended as it happens, merged at
the end into results.json, which is the source of truth for the report.
Library code only: the pytest plugins that drive it are in harness/plugins/,
and nothing here imports harness/report/."""
