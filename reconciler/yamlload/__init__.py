"""YAML read into plain values, each part's position kept; knows nothing of invites."""
