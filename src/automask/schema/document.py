"""The schema document as input: JSON text or a Python value, checked before compiling.

A schema arrives as JSON text (``str`` or bytes) or as a Python value that
should be a JSON document. Before the compiler (whose passes walk subschemas
recursively) sees it, :func:`load_document` makes sure it is one, in one
iterative walk, and raises a typed error with a JSON pointer otherwise:

* bytes that are not UTF-8, text that is not JSON (:class:`GrammarError`,
  ``line L, col C``);
* an object or array that contains itself (a cycle in a Python value), a
  dict key that is not a string, a value that is not JSON (``object()``, a
  set, a tuple), a string or key with a lone surrogate (it has no UTF-8
  form) (:class:`GrammarError`, at its pointer);
* nesting deeper than :data:`MAX_DEPTH` objects and arrays, or JSON pointers
  (a schema position's name in the compiler, and the work done per level)
  adding up to more than :data:`MAX_POINTER_CHARS` characters over the
  document (:class:`LimitExceeded`, at the pointer where the bound was
  crossed).

Values reached twice (a Python value that shares a subtree; no cycle) are
walked at each position: the compiler treats every position on its own, and
the pointer budget counts each.
"""

from __future__ import annotations

import json
import re
from typing import Any

from automask.budget import check_time
from automask.errors import GrammarError, LimitExceeded

MAX_DEPTH = 256  # objects and arrays nested in one another (real schemas: under 70)
MAX_POINTER_CHARS = 1 << 25  # the pointers of all objects and arrays, together
_LONG_POINTER = 2_000  # error locations longer than this are shortened in the middle

_SURROGATE = re.compile(f"[{chr(0xD800)}-{chr(0xDFFF)}]")
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_NUMBERS = (int, float, bool, type(None))


def load_document(schema):
    """``schema`` as a checked JSON value: JSON text (``str``, ``bytes``,
    ``bytearray``) is parsed; a dict or bool is walked as it is."""
    if isinstance(schema, (str, bytes, bytearray)):
        schema = _parse(schema)
    if not isinstance(schema, (dict, bool)):
        raise GrammarError(f"a schema is an object or a boolean, not {type(schema).__name__}",
                           "#")
    check_value(schema)
    return schema


def _parse(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise GrammarError(f"schema is not valid JSON: {e.msg}",
                           f"line {e.lineno}, col {e.colno}") from None
    except UnicodeDecodeError as e:
        data = bytes(text)
        head = data[:e.start]
        line_start = head.rfind(b"\n") + 1
        col = len(head[line_start:].decode(e.encoding, "replace")) + 1
        line = head.count(b"\n") + 1
        raise GrammarError(f"schema is not valid {e.encoding.upper()}: byte "
                           f"{data[e.start]:#04x} at offset {e.start} ({e.reason})",
                           f"line {line}, col {col}") from None
    except RecursionError:
        raise _too_deep(_deep_location(text)) from None


def _too_deep(location: str) -> LimitExceeded:
    return LimitExceeded(f"the schema is nested more than {MAX_DEPTH} levels deep "
                         "(objects and arrays)", location)


def _deep_location(text) -> str:
    """``line L, col C`` of the bracket that opens level ``MAX_DEPTH + 1`` of JSON text."""
    if not isinstance(text, str):
        text = bytes(text).decode(json.detect_encoding(text), "replace")
    depth = 0
    for match in _BRACKETS.finditer(text):
        c = match.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                pos = match.start()
                line_start = text.rfind("\n", 0, pos) + 1
                return f"line {text.count(chr(10), 0, pos) + 1}, col {pos - line_start + 1}"
        elif c in "]}":
            depth -= 1
    return "line 1, col 1"


def check_value(root) -> None:
    """Raise unless ``root`` is a JSON value within the bounds (see the module docstring)."""
    if not isinstance(root, (dict, list)):
        _check_scalar(root, None, None)
        return
    # Iterative (no depth limit of Python's is reached, whatever the input). A frame is
    # (container, key, parent frame, depth, pointer length): the parent links give the
    # pointer of an error, and show a cycle (which always ends as nesting too deep).
    total = 1
    stack: list[tuple[Any, Any, Any, int, int]] = [(root, None, None, 1, 1)]
    while stack:
        frame = stack.pop()
        container, _, _, depth, length = frame
        items: Any = container.items() if isinstance(container, dict) else enumerate(container)
        in_object = isinstance(container, dict)
        for key, value in items:
            if in_object and not (type(key) is str and key.isascii()):
                _check_key(key, frame)
            kind = type(value)
            if kind is str:
                if not value.isascii():
                    _check_scalar(value, frame, key)
            elif kind is dict or kind is list or isinstance(value, (dict, list)):
                try:
                    check_time()
                except LimitExceeded as e:  # where the check had got to
                    raise LimitExceeded(e.message, _location(frame, key)) from None
                if depth >= MAX_DEPTH:
                    _too_deep_at(value, frame, key)
                size = length + 1 + (len(key) if in_object else len(str(key)))
                total += size
                if total > MAX_POINTER_CHARS:
                    raise LimitExceeded(
                        f"the schema's JSON pointers add up to more than "
                        f"{MAX_POINTER_CHARS:,} characters (deep nesting under long keys)",
                        _location(frame, key))
                stack.append((value, key, frame, depth + 1, size))
            elif kind not in _NUMBERS:
                _check_scalar(value, frame, key)


def _too_deep_at(value, frame, key):
    """Raise for ``value`` (below ``frame``, at ``key``) one level too deep: a cycle if
    an object on its path is its own ancestor, else nesting past :data:`MAX_DEPTH`."""
    containers, keys = [value], [key]
    while frame is not None:
        containers.append(frame[0])
        keys.append(frame[1])
        frame = frame[2]
    containers.reverse()  # the root first; keys[i] leads to containers[i]
    keys.reverse()
    seen: dict[int, int] = {}
    for i, c in enumerate(containers):
        first = seen.setdefault(id(c), i)
        if first != i:
            raise GrammarError(
                "the schema contains itself (a Python object inside its own value: a "
                "cycle, which no JSON document has); it is the value at "
                f"{_pointer(keys[1:first + 1])}", _pointer(keys[1:i + 1]))
    raise _too_deep(_pointer(keys[1:]))


def _check_key(key, frame) -> None:
    if not isinstance(key, str):
        raise GrammarError(f"object keys must be strings, not {type(key).__name__} ({key!r})",
                           _location(frame, None))
    found = _SURROGATE.search(key)
    if found:
        raise GrammarError(f"the key {_show(key)} has a lone surrogate U+{ord(found.group()):04X}"
                           ", which has no UTF-8 form", _location(frame, key))


def _check_scalar(value, frame, key) -> None:
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        if found:
            raise GrammarError(f"the string {_show(value)} has a lone surrogate "
                               f"U+{ord(found.group()):04X}, which has no UTF-8 form",
                               _location(frame, key))
        return
    if isinstance(value, (int, float)) or value is None:
        return  # (NaN and Infinity are refused where they mean something: enum, const)
    raise GrammarError(f"a value of type {type(value).__name__!r} is not JSON "
                       "(null, boolean, number, string, array or object)", _location(frame, key))


def _show(s: str) -> str:
    return repr(s if len(s) <= 40 else s[:37] + "...")


def _location(frame, key) -> str:
    """The JSON pointer of ``key`` inside the container of ``frame`` (of the container
    itself when ``key`` is None)."""
    keys = [] if key is None else [key]
    while frame is not None and frame[2] is not None:
        keys.append(frame[1])
        frame = frame[2]
    keys.reverse()
    return _pointer(keys)


def _pointer(keys: list) -> str:
    """The JSON pointer of the path ``keys`` (shortened in the middle when very long)."""
    pointer = "#" + "".join(
        "/" + (k.replace("~", "~0").replace("/", "~1") if isinstance(k, str) else str(k))
        for k in keys)
    if not pointer.isascii() and _SURROGATE.search(pointer):  # printable: \ud800
        pointer = pointer.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(pointer) > _LONG_POINTER:
        half = _LONG_POINTER // 2
        pointer = f"{pointer[:half]}...{pointer[-half:]}"
    return pointer
