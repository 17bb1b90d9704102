"""Start-up shims that make an engine interpreter usable; see site/."""
from pathlib import Path

# Directory put on PYTHONPATH (or named in a venv .pth file) so that every
# process of an engine interpreter runs the shims at start-up.
SITE_DIR = Path(__file__).parent / "site"
