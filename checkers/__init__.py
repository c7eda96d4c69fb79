"""PySpark and scipy checks over run files (shared/HISTORY.md).

Run files are read and results.json written only through `harness.runfiles`'s public names."""
