"""References: ``$id`` bases, anchors, ``$ref`` and ``$dynamicRef`` with its dynamic scope.

:class:`References` indexes the document's resources and anchors, resolves
references to subschemas, and tracks the dynamic scope that ``$dynamicRef`` reads.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard
from urllib.parse import unquote, urldefrag, urljoin

from automask.budget import check_time
from automask.errors import GrammarError, LimitExceeded, UnsupportedFeature
from automask.schema.keywords import subschemas
from automask.schema.subschema import Subschema, pointer


class References:
    """Index, resolution and dynamic scope of one document."""

    def __init__(self, schema, root_base: str):
        self.docs: dict[str, object] = {}       # base URI -> schema
        self.anchors: dict[str, tuple[object, str, str]] = {}
        self.base_of: dict[int, str] = {}  # id(schema object with an $id) -> its base URI
        self.dynamic: dict[str, int] = {}  # $dynamicAnchor name -> how many declare it
        self.dynamic_names: dict[str, list[str]] = {}  # resource -> its $dynamicAnchors
        self.dynamic_anchors: dict[str, tuple[object, str]] = {}  # resource#name -> schema
        self._index(schema, root_base, "")
        # Dynamic scope (only when some $dynamicAnchor is declared twice, so that it can
        # matter): the first resource entered that declares each name, carried as a
        # prefix of subschema URIs so that it reaches every descendant and keys the memo.
        self.scoped = any(n > 1 for n in self.dynamic.values())
        self.scopes: list[tuple[tuple[str, str], ...]] = [()]
        self._scope_ids: dict[tuple[tuple[str, str], ...], int] = {(): 0}

    def _index(self, schema, base: str, pointer: str) -> None:
        if isinstance(schema, dict):
            check_time()  # (a count: 100,000 subschemas are a second or two)
            if not pointer:
                self.docs.setdefault(base, schema)
            if changes_base(schema):
                base = urldefrag(_join(base, schema["$id"]))[0]
                self.docs.setdefault(base, schema)
                self.base_of[id(schema)] = base
            names = [schema.get("$anchor"), schema.get("$dynamicAnchor")]
            if isinstance(schema.get("$dynamicAnchor"), str):
                name = schema["$dynamicAnchor"]
                self.dynamic[name] = self.dynamic.get(name, 0) + 1
                self.dynamic_names.setdefault(base, []).append(name)
                self.dynamic_anchors[base + "#" + name] = (schema, base)
            # draft-06/07 "$id": "#name" and draft-04 "id": "#name" are plain-name anchors
            names += [schema[k][1:] for k in ("$id", "id") if isinstance(schema.get(k), str)
                      and schema[k].startswith("#") and len(schema[k]) > 1]
            for name in names:
                if isinstance(name, str):
                    self.anchors[base + "#" + name] = (schema, base, pointer)
            if base not in self.docs:
                self.docs[base] = schema
            # Only subschemas: an "$id" inside an unknown keyword identifies nothing.
            for at, sub in subschemas(schema, pointer):
                self._index(sub, base, at)

    def resolve(self, ref: str, subschema: Subschema) -> Subschema:
        target = _join(subschema.base, ref)
        doc_uri, fragment = urldefrag(target)
        if target in self.anchors:
            schema, base, _ = self.anchors[target]
            return Subschema(self.scoped_uri(target, self.enter(scope_of(subschema.uri), base)),
                          schema, base)
        doc = self.docs.get(doc_uri)
        if doc is None:
            raise UnsupportedFeature(f"$ref to a schema that is not embedded: {ref!r}",
                                     pointer(subschema))
        node = doc
        base = doc_uri
        if fragment and not fragment.startswith("/"):
            raise GrammarError(f"$ref anchor not found: {ref!r}", pointer(subschema))
        for part in fragment.split("/")[1:] if fragment else []:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise GrammarError(f"$ref target not found: {ref!r}", pointer(subschema))
            if changes_base(node):
                base = self.rebase(base, node)
        return Subschema(self.scoped_uri(doc_uri + "#" + fragment,
                                      self.enter(scope_of(subschema.uri), base)), node, base)

    def enter(self, scope: int, base: str) -> int:
        """The dynamic scope after entering the resource ``base``: names it declares as
        ``$dynamicAnchor`` that no outer resource bound are bound to it."""
        if not self.scoped:
            return 0
        bound = dict(self.scopes[scope])
        for name in self.dynamic_names.get(base, ()):
            bound.setdefault(name, base)
        key = tuple(sorted(bound.items()))
        found = self._scope_ids.get(key)
        if found is None:
            if len(self.scopes) >= 1024:
                raise LimitExceeded("too many dynamic scopes")
            found = self._scope_ids[key] = len(self.scopes)
            self.scopes.append(key)
        return found

    @staticmethod
    def scoped_uri(uri: str, scope: int) -> str:
        return uri if not scope else f"~d{scope}|{uri.split('|', 1)[-1]}"

    def dynamic_target(self, m: Subschema) -> Subschema:
        """Where ``$dynamicRef`` goes: its static target, which is exact unless that
        target's ``$dynamicAnchor`` is declared more than once (then the dynamic scope
        would choose, which is not supported)."""
        ref = m.schema["$dynamicRef"]
        if not isinstance(ref, str):
            raise GrammarError("$dynamicRef must be a string", pointer(m, "$dynamicRef"))
        target = self.resolve(ref, m)
        name = ref.rsplit("#", 1)[-1] if "#" in ref else ""
        if not (name and not name.startswith("/") and isinstance(target.schema, dict)
                and target.schema.get("$dynamicAnchor") == name and self.scoped):
            return target  # a plain $ref (or the only declaration of that anchor)
        resource = dict(self.scopes[scope_of(m.uri)]).get(name)
        if resource is None:
            return target
        schema, base = self.dynamic_anchors[resource + "#" + name]
        return Subschema(self.scoped_uri(f"{resource}#{name}", self.enter(scope_of(m.uri), base)),
                      schema, base)

    def rebase(self, base: str, schema: dict) -> str:
        """The base URI inside ``schema`` (which has an ``$id``) when reached from ``base``:
        the one indexed for that schema object, so that it is applied only once."""
        found = self.base_of.get(id(schema))
        return found if found is not None else urldefrag(_join(base, schema["$id"]))[0]


def scope_of(uri: str) -> int:
    """The dynamic scope carried by a subschema URI (see ``scoped_uri``)."""
    return int(uri[2:uri.index("|")]) if uri.startswith("~d") else 0


def changes_base(schema: Any) -> TypeGuard[dict]:
    """Whether ``schema`` has an ``$id`` that sets a base URI (not a ``#name`` anchor)."""
    return isinstance(schema, dict) and isinstance(schema.get("$id"), str) and \
        not schema["$id"].startswith("#")


def _join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (RFC 3986), URNs included: ``urljoin`` leaves
    a fragment-only reference alone on schemes it does not know."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", ref):
        return ref
    return urljoin(base, ref)
