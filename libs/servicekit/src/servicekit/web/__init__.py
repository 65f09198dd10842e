"""HTTP plumbing shared by the services: errors, health, metrics, request ids, logging."""
