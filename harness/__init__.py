"""The runner and everything a run needs: spec, generators, interpreter, backends, store."""
