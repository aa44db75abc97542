"""What one process runs on: the allocator settings, the gc freeze, logs and metrics, and ``labelserve serve``."""
