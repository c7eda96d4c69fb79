"""PySpark and networkx checks over run files (shared/HISTORY.md); import only harness.history."""
