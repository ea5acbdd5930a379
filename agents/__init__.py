"""The agents: which analyzers run for a trace, in which tier, and how their findings share the trace's time."""

from tracelake.core.package_name import require_installed_name

require_installed_name(__name__, "tracelake.agents")
