"""Command-line entry points (typer): one command per deployable plus the offline tools."""
