"""Well-formed keyword values, checked at every schema position of a document.

A malformed value is an error wherever it is, not only where the compiler
happens to read it (``{"type": "integer", "minLength": -1}`` is a bad schema
even though no string is ever checked against it).
"""

from __future__ import annotations

import math

from automask.budget import check_time
from automask.errors import GrammarError, LimitExceeded
from automask.schema.subschema import Subschema, count, escape, is_number, pointer

# The keywords the compiler reads (besides annotations, and unevaluated* where tracked);
# any other is ignored, as JSON Schema ignores unknown keywords.
HANDLED = frozenset({
    "type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf", "not",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
    "minContains", "maxContains", "uniqueItems",
    "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
    "$dynamicRef",
})


COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
          "minContains", "maxContains")


NUMBERS = ("minimum", "maximum", "multipleOf")


SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")


SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


SUBSCHEMA = ("additionalProperties", "additionalItems", "items", "contains", "not", "if", "then",
             "else", "propertyNames", "unevaluatedProperties", "unevaluatedItems")

#: where a subschema may sit below a schema object: the keywords whose value is a map of
#: names to schemas, and those whose value is a list of schemas (``items`` in draft 4-2019)
SCHEMA_MAP_KEYWORDS = SCHEMA_MAPS + ("dependencies",)
SCHEMA_LIST_KEYWORDS = SCHEMA_LISTS + ("prefixItems", "items")


def check_values(m: Subschema) -> None:
    """Malformed keyword values raise wherever they are, not only where their type is
    possible (``{"type": "integer", "minLength": -1}`` is still a bad schema)."""
    s = m.schema
    if CHECKED.isdisjoint(s):  # most positions: ``type`` and annotations, nothing to check
        return
    for kw in COUNTS:
        if kw in s:
            count(s[kw], m, kw)
    if "$schema" in s and not isinstance(s["$schema"], str):
        raise GrammarError("$schema must be a string (the URI of a dialect)",
                           pointer(m, "$schema"))
    for kw in ("$id", "$anchor", "$dynamicAnchor"):
        if kw in s and not isinstance(s[kw], str):
            raise GrammarError(f"{kw} must be a string", pointer(m, kw))
    for kw in NUMBERS + ("exclusiveMinimum", "exclusiveMaximum"):
        v = s.get(kw)
        if kw in s and not is_number(v) and not (isinstance(v, bool) and kw.startswith("excl")):
            raise GrammarError(f"{kw} must be a number", pointer(m, kw))
        if isinstance(v, float) and not math.isfinite(v):
            raise GrammarError(f"{kw} must be a finite number, not {v!r} (NaN and Infinity "
                               "are not JSON values)", pointer(m, kw))
    for kw, values in (("const", [s.get("const")]), ("enum", s.get("enum"))):
        if kw in s and isinstance(values, list):
            where = _non_finite(values)
            if where is not None:
                at = pointer(m, kw) + "".join(f"/{escape(str(k))}" for k in where[kw == "const":])
                raise GrammarError(f"{kw} holds {_path_value(values, where)!r}, which is not a "
                                   "JSON value (NaN and Infinity are not JSON numbers)", at)
    if "multipleOf" in s and s["multipleOf"] <= 0:
        raise GrammarError("multipleOf must be > 0", pointer(m, "multipleOf"))
    if "required" in s and not (isinstance(s["required"], list) and all(
            isinstance(k, str) for k in s["required"])):
        raise GrammarError("required must be an array of strings", pointer(m, "required"))
    for kw in SCHEMA_MAPS:
        if kw in s and not isinstance(s[kw], dict):
            raise GrammarError(f"{kw} must be an object", pointer(m, kw))
    for kw in SCHEMA_LISTS:
        if kw in s and not (isinstance(s[kw], list) and s[kw]):
            raise GrammarError(f"{kw} must be a non-empty array", pointer(m, kw))
    if "prefixItems" in s and not isinstance(s["prefixItems"], list):
        raise GrammarError("prefixItems must be an array", pointer(m, "prefixItems"))
    for kw in ("pattern", "format"):
        if kw in s and not isinstance(s[kw], str):
            raise GrammarError(f"{kw} must be a string", pointer(m, kw))
    if "enum" in s and not isinstance(s["enum"], list):
        raise GrammarError("enum must be an array", pointer(m, "enum"))
    if "uniqueItems" in s and not isinstance(s["uniqueItems"], bool):
        raise GrammarError("uniqueItems must be a boolean", pointer(m, "uniqueItems"))


#: every keyword check_values reads
CHECKED = frozenset(COUNTS + NUMBERS + SCHEMA_MAPS + SCHEMA_LISTS + (
    "$schema", "$id", "$anchor", "$dynamicAnchor", "exclusiveMinimum", "exclusiveMaximum",
    "const", "enum", "required", "prefixItems", "pattern", "format", "uniqueItems"))


def _non_finite(values: list) -> list | None:
    """The path (indices and keys) to the first NaN or infinite float in ``values``, or
    None (iterative: values nest up to the document's depth bound)."""
    todo: list[tuple[object, list]] = [(values, [])]
    while todo:
        v, path = todo.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                return path
        elif isinstance(v, list):
            for i in range(len(v) - 1, -1, -1):
                todo.append((v[i], path + [i]))
        elif isinstance(v, dict):
            keys = list(v)
            for j in range(len(keys) - 1, -1, -1):
                todo.append((v[keys[j]], path + [keys[j]]))
    return None


def _path_value(value, path: list):
    for k in path:
        value = value[k]
    return value


def subschemas(s: dict, pointer: str) -> list[tuple[str, dict]]:
    """The (pointer, schema object) pairs directly below ``s`` in known keywords."""
    out = []
    for kw, v in s.items():
        at = f"{pointer}/{escape(kw)}"
        if kw in SUBSCHEMA and isinstance(v, dict):
            out.append((at, v))
        elif kw in SCHEMA_MAP_KEYWORDS and isinstance(v, dict):
            out += [(f"{at}/{escape(k)}", x) for k, x in v.items() if isinstance(x, dict)]
        elif kw in SCHEMA_LIST_KEYWORDS and isinstance(v, list):
            out += [(f"{at}/{i}", x) for i, x in enumerate(v) if isinstance(x, dict)]
    return out


def check_document(schema, base: str) -> None:
    """:func:`check_values` at every schema position of the document, compiled or not."""
    todo = [("", schema)]
    while todo:
        pointer, s = todo.pop()
        try:
            check_time()
        except LimitExceeded as e:  # where the check had got to
            raise LimitExceeded(e.message, "#" + pointer) from None
        if isinstance(s, dict):
            check_values(Subschema(base + "#" + pointer, s, base))
            todo += subschemas(s, pointer)
