"""The report's one template environment. Autoescape is on for every
template: whatever a check, the engine or a log put in a record reaches the
page as text, never as markup."""
from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined

from harness.report.format import as_text, css_class, first_line, gib

ENV = Environment(loader=PackageLoader("harness.report", "templates"), autoescape=True,
                  undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
ENV.filters.update(as_text=as_text, css_class=css_class, first_line=first_line, gib=gib)
