"""CLI commands: option parsing and rendering only; the logic lives in the library."""
