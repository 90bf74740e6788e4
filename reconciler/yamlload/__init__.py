"""YAML read into plain values, each part's position kept; and where an invite file's
values are written, for editing them in place."""
