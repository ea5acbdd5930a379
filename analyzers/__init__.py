"""Mart rows -> typed metrics and findings, one analysis per module. Nothing here writes files."""

from tracelake.core.package_name import require_installed_name

require_installed_name(__name__, "tracelake.analyzers")
