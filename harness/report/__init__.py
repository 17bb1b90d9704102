"""The HTML report and the run-to-run diff, both read from results.json."""
