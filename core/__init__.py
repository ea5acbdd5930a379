"""What every layer shares: the error types a user can cause and the jinja2 template settings."""

from tracelake.core.package_name import require_installed_name

require_installed_name(__name__, "tracelake.core")
