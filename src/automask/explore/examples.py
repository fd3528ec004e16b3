"""The examples one click away on the page: the repository's ``examples/*.schema.json`` and
a few built in, one of each other constraint kind.

Why both: the JSON Schemas under ``examples/`` are the ones the README uses
(the person example is the explorer's default), but they sit beside the
package, not inside it, so an installed wheel finds them only when run from a
checkout; the built-in ones (a schema among them) are always there, so every
kind has an example whatever the install.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: prompts for the repository's schemas, by file stem (others get a generic one)
PROMPTS = {
    "person": "Describe a fictional software engineer.",
    "product": "Review a pair of headphones you bought last month.",
}
GENERIC_PROMPT = "Answer with an example that fits the format."


@dataclass(frozen=True)
class Example:
    """A named constraint with a prompt that suits it."""

    name: str
    kind: str
    text: str
    prompt: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "text": self.text, "prompt": self.prompt}


BUILT_IN = (
    Example("city", "schema", json.dumps({
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30},
                       "country": {"type": "string", "maxLength": 30},
                       "population": {"type": "integer", "minimum": 0}},
        "required": ["city", "country", "population"]}, indent=2),
        "Name a big city, its country and its population."),
    Example("email", "regex", r"[a-z]{2,12}\.[a-z]{2,12}@(mail|web)\.(com|org)",
            "Write an email address for Ada Lovelace."),
    Example("arithmetic", "gbnf", "\n".join([
        'root   ::= expr " = " number',
        'expr   ::= term (("+" | "-") term)*',
        'term   ::= number | "(" expr ")"',
        "number ::= [0-9]{1,4}",
    ]), "Write a small sum of whole numbers and its result."),
    Example("settings", "lark", "\n".join([
        'start: pair ("; " pair)*',
        'pair: KEY "=" VALUE',
        "KEY: /[a-z_]{1,16}/",
        "VALUE: /[0-9]{1,6}/",
    ]), "List three settings of a web server as key=value pairs."),
    Example("sentiment", "choices", "positive\nneutral\nnegative",
            "Is this review positive, neutral or negative? "
            "\"The battery died after one day.\""),
)


def examples_folder() -> Path | None:
    """The repository's ``examples/`` folder: under the working directory, or beside the
    source tree this package was loaded from (an editable install); None if neither."""
    here = Path(__file__).resolve()
    for folder in (Path.cwd() / "examples", here.parents[3] / "examples"):
        if (folder / "person.schema.json").is_file():
            return folder
    return None


def all_examples(folder: Path | None = None) -> list[Example]:
    """The repository's schemas (when found) first, then the built-in examples."""
    folder = folder if folder is not None else examples_folder()
    found: list[Example] = []
    if folder is not None:
        for path in sorted(folder.glob("*.schema.json")):
            stem = path.name[: -len(".schema.json")]
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeError):
                continue
            found.append(Example(stem, "schema", text, PROMPTS.get(stem, GENERIC_PROMPT)))
    names = {e.name for e in found}
    return found + [e for e in BUILT_IN if e.name not in names]
