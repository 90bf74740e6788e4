"""Invite files' JSON Schema (fastjsonschema says yes, jsonschema words a no) and policies."""
