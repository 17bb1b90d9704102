"""What must hold: verdicts and causes, the greedy comparator, checks on request outcomes, the encoder chunk-size probe."""
