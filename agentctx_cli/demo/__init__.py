"""The demo: a scripted coding agent (script), run call by call against a
context service (runner), priced as its owner would price it (pricing) and
shown on the terminal (display, show)."""
