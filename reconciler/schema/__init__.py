"""The JSON Schema of invite files: a quick check, jsonschema for doubts, messages for people."""
