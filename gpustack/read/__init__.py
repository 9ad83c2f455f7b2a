"""Reading what a user or a pull request brings: bounded reads of regular files, YAML with
the position of every value, the rule for where a named file may lie, and user patterns."""
