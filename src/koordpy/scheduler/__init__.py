"""The scheduler side: the pure framework and plugins, the extender adapter, offline explain."""
