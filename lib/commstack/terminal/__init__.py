"""What `commstack run` and `commstack suite` show on the terminal (the modules: docs/architecture.md)."""
