"""Ranked findings and metrics -> analysis.md, analysis.html, CSVs, plots and the dashboard."""

from tracelake.core.package_name import require_installed_name

require_installed_name(__name__, "tracelake.reports")
