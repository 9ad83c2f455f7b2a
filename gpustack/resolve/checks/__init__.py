"""The checks of a config against its profile, one module per section, sharing one
`CheckContext`; `resolve/profile_checks.py` runs them in order."""
