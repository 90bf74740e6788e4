"""HTTP plumbing: one request with its turn, deadline, retries, token and bounded answer."""
