"""Settings: options, environment, `reconciler.yaml` and defaults, one conversion each."""
