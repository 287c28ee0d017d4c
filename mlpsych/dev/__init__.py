"""Developer tools: tiny offline models for tests, and training a small real reader offline."""
