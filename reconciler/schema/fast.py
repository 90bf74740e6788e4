"""A quick yes for values the schema accepts, compiled once from the schema itself.

jsonschema walks its keywords generically: about 50 µs per invite, a second
for 20,000 invites. Almost every invite in a file is valid, so the loader
first asks a check compiled here from the same JSON Schema. It answers True
only when the value satisfies every keyword of the schema; anything it does
not understand, or any doubt, answers False, and jsonschema then decides and
words the errors. So this check can make loading faster, never more lenient:
a property test holds it to "True implies jsonschema finds no error".

The check is Python source written from the schema and compiled once, as
fastjsonschema does: one function for a whole invite with its fields' checks
inline, so a value costs no Python call of its own (a closure per keyword and a
call per value cost about 1.4 times the instructions). This is done only for the
schema packaged with this tool (``schema.check``), never for a schema a user
passes at run time, and even so no text of the schema becomes code: every
literal written (a property's name, a length) is written through ``repr()``
after its type is checked, and every other value (a compiled pattern, a set of
names, a format's function) is handed to the code under a name made up here.
"""

from __future__ import annotations

from typing import Any

from reconciler.schema.fast_source import Check, CheckSource
from reconciler.schema.fast_text import Formats

__all__ = ["Check", "Formats", "compile_check"]


def _never(value: Any) -> bool:
    return False


def compile_check(schema: Any, formats: Formats) -> Check:
    """A check of ``schema`` (references already inlined), conservative as described above.

    Only for a schema this tool ships: the check is Python source written from it."""
    source = CheckSource(formats)
    name = source.function(schema)
    if name is None:
        return _never
    text = "\n".join(source.lines) + "\n"
    exec(compile(text, "<quick schema check>", "exec"), source.namespace)
    check: Check = source.namespace[name]
    return check
