"""The plan: compare, the records it is made of, saved and signed plans."""
