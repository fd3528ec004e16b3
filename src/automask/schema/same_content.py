"""Equal schema objects compile once: conjunctions keyed by their members' content.

Conjunctions are memoized by the positions they hold (:mod:`~automask.schema.conjunctions`),
so a schema that writes the same subschema at many positions (``{"type": "string",
"format": "date-time"}`` under forty properties, the same ``items`` in every array of
a large API description) compiled each copy again. A conjunction's language depends
only on what its members say and on where their references resolve, so two
conjunctions whose members are equal objects with the same base URIs are one rule.

What a member says is its JSON value less the keywords that say nothing of the
instance: ``title``, ``description``, ``default``, ``examples`` and the like, and
definitions (``$defs``: a ``$ref`` into them names them by position, which a copy
does not change). Those are left out of every schema object in it, read as the
keywords read it: the subschemas of ``properties``, ``items``, ``anyOf`` and the
others are schema objects, while a property's name (``"description"`` under
``properties``) and every other keyword's value (an ``enum``, a ``const``, an
unknown keyword) are compared whole. Order counts, as it does for the grammar:
members are written in their schema's order (``properties``, a ``const`` object), so
objects are equal only with their keys in the same order. Only the document's own
objects are compared:
a member the compiler wrote (a shape, a copy less some keywords, at a position with
a ``/~`` step) keeps its conjunction to itself, so nothing here holds an object the
compile would have freed, and numbers kept by ``id`` stay right while the compile
holds the document.

Two readings depend on more than content, and the builder turns this off for them:
``unevaluated*`` (annotations tracked by position), and a ``$dynamicAnchor`` declared
twice (the dynamic scope rides in positions).
"""

from __future__ import annotations

import re
from typing import Any

from automask.schema.keywords import SCHEMA_LIST_KEYWORDS, SCHEMA_MAP_KEYWORDS, SUBSCHEMA
from automask.schema.subschema import ANNOTATIONS, Subschema

#: a step of a position the compiler wrote (``/~anyOf``, ``/~neg0``, ``/~``); a JSON
#: pointer escapes a name's "~" as "~0" and its "/" as "~1"
_WRITTEN = re.compile(r"/~(?![01])")

#: Keywords of a schema object that say nothing of the instance: the annotations, less
#: those that say where references resolve or how the document is read (they stay).
SILENT = ANNOTATIONS - {"$id", "$anchor", "$dynamicAnchor", "$schema", "$vocabulary"}
_ONE = frozenset(SUBSCHEMA)  # keywords whose value is a schema
_MAP = frozenset(SCHEMA_MAP_KEYWORDS)  # ... a map of names to schemas
_LIST = frozenset(SCHEMA_LIST_KEYWORDS)  # ... a list of schemas


class SameContent:
    """Content keys of conjunctions, and the rule made for each (one per compile);
    ``enabled`` False: no conjunction has a key (each compiles apart)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        #: a conjunction's content key -> its rule
        self.rules: dict[tuple, str] = {}
        #: conjunctions found under another's rule (an empty language's blame is then
        #: looked for again without this: see schema.compiler)
        self.shared = 0
        self._ids: dict[tuple, int] = {}  # a value's structure -> its number
        self._of_object: dict[int, int] = {}  # id(dict or list) -> its number (whole)
        self._of_schema: dict[int, int] = {}  # id(dict) -> its number as a schema

    def key(self, members: list[Subschema]) -> tuple | None:
        """The content key of the conjunction of ``members``; None where a member is not
        an object of the document, or where sharing is off."""
        if not self.enabled:
            return None
        out: dict[tuple[int, str], None] = {}
        for m in members:
            s = m.schema
            if type(s) is not dict or "/~" in m.uri and _WRITTEN.search(m.uri):
                return None
            out[self._schema(s), m.base] = None
        return tuple(out)  # in order: the members' order is the properties' order

    def _schema(self, value: Any) -> int:
        """The number of a schema object: its keywords less :data:`SILENT`, each value
        read as its keyword reads it (see the module docstring)."""
        if type(value) is not dict:
            return self._number(value)  # (a boolean schema; a malformed one is refused)
        found = self._of_schema.get(id(value))
        if found is None:
            said = []
            for k, v in value.items():
                if k in SILENT:
                    continue
                if k in _LIST and type(v) is list:  # (before _ONE: "items" may be either)
                    said.append((k, self._intern(("list", tuple([self._schema(x) for x in v])))))
                elif k in _ONE:
                    said.append((k, self._schema(v)))
                elif k in _MAP and type(v) is dict:
                    said.append((k, self._intern(("map", tuple(
                        (name, self._schema(x)) for name, x in v.items())))))
                else:
                    said.append((k, self._number(v)))
            found = self._of_schema[id(value)] = self._intern(("schema", tuple(said)))
        return found

    def _number(self, value: Any) -> int:
        """The number of ``value``'s structure: equal JSON values written in the same
        order, equal numbers (a boolean is not the number 0 or 1; types are kept apart)."""
        t = type(value)
        if t is dict or t is list:
            found = self._of_object.get(id(value))
            if found is None:
                if t is dict:
                    structure: tuple = ("object", tuple(
                        (k, self._number(v)) for k, v in value.items()))
                else:
                    structure = ("array", tuple([self._number(v) for v in value]))
                found = self._of_object[id(value)] = self._intern(structure)
            return found
        return self._intern((t.__name__, value))

    def _intern(self, structure: tuple) -> int:
        found = self._ids.get(structure)
        if found is None:
            found = self._ids[structure] = len(self._ids)
        return found
