"""Comparing renders: committed output read back, a git revision's files, the object diff
and its reviews, what a change does to running nodes, and which clusters changed files affect."""
