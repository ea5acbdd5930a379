"""What every layer shares: the error types a user can cause and the jinja2 template settings."""
