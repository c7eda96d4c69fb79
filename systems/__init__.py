"""The systems under test, one sub-package each."""
