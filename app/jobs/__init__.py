"""Background jobs: the runner interface, its backends, and the work a job does."""
