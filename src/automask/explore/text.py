"""Token text made visible: what a chip or a table cell shows for a token's bytes.

Why: a token is bytes, not characters. A leading space, a newline, a tab or
half of a UTF-8 character is exactly what a person debugging a mask needs to
see, and exactly what a browser would swallow. Spaces become ``·``, line
breaks ``↵``, tabs ``→``, other control characters ``␀``-style pictures and
bytes that do not decode ``<0xNN>``.
"""

from __future__ import annotations

_PICTURES = {" ": "·", "\n": "↵", "\r": "␍", "\t": "→"}


def visible(data: bytes) -> str:
    """``data`` with whitespace, control characters and undecodable bytes made visible."""
    out: list[str] = []
    i = 0
    while i < len(data):
        width = _utf8_width(data, i)
        if width == 0:
            out.append(f"<0x{data[i]:02X}>")
            i += 1
            continue
        char = data[i:i + width].decode("utf-8")
        i += width
        if char in _PICTURES:
            out.append(_PICTURES[char])
        elif ord(char) < 0x20:
            out.append(chr(0x2400 + ord(char)))  # the Control Pictures block
        elif ord(char) == 0x7F:
            out.append("␡")
        else:
            out.append(char)
    return "".join(out)


def _utf8_width(data: bytes, i: int) -> int:
    """Length of the complete UTF-8 character starting at ``data[i]``, 0 if there is none."""
    lead = data[i]
    if lead < 0x80:
        return 1
    width = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else \
        4 if 0xF0 <= lead <= 0xF4 else 0
    if width == 0 or i + width > len(data):
        return 0
    try:
        data[i:i + width].decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return width


def byte_name(byte: int) -> str:
    """One byte as a person reads it in an explanation: ```x```, ``a space``, ``0xC3``."""
    names = {0x20: "a space", 0x0A: "a newline", 0x0D: "a carriage return", 0x09: "a tab"}
    if byte in names:
        return names[byte]
    if 0x21 <= byte <= 0x7E:
        return f"`{chr(byte)}`"
    return f"byte 0x{byte:02X}"
