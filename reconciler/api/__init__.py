"""The platform API: current state in, changes out."""
