"""The model registry: reference grammar, versions, the loaded-model cache and the resolved references."""
