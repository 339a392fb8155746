"""The process: wiring (app), leader election, health endpoints, settings."""
