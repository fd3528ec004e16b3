"""``automask bench fuzz``: a small fixed sample of the hostile-input campaign stays clean."""

from __future__ import annotations

import json

from automask.bench import fuzz
from automask.cli import main


def test_fixed_sample_has_no_untyped_errors_or_overruns(shared_data, tmp_path, capsys):
    out = tmp_path / "fuzz.json"
    code = main(["bench", "fuzz", "--cases", "4", "--seed", "0", "--check",
                 "--tokenizer", str(shared_data / "tokenizers" / "llama-3.1" / "tokenizer.json"),
                 "--json", str(out)])
    printed = capsys.readouterr()
    result = json.loads(out.read_text())
    families = {f["family"]: f for f in result["families"]}
    assert set(families) == set(fuzz.FAMILIES)
    for f in families.values():
        assert f["cases"] == 4
        assert f["ok"] + f["typed"] + f["untyped"] + f["overrun"] == 4
        assert f["untyped"] == 0 and f["overrun"] == 0, (f, printed.err)
    assert code == 0, printed.err
    # the campaign does meet errors: hostile inputs are refused, with types
    assert sum(f["typed"] for f in families.values()) >= len(families)


def test_failed_targets_name_the_family():
    result = {"families": [{"family": "regex", "untyped": 1, "overrun": 0},
                           {"family": "gbnf", "untyped": 0, "overrun": 0}]}
    assert fuzz.failed_targets(result) == ["regex: 1 untyped, 0 overruns"]


def test_generators_are_seeded():
    import random

    def first(seed: int) -> list[str]:
        source = fuzz.cases("schema-mutation", random.Random(seed),
                            [{"id": "r", "schema": {"type": "object",
                                                    "properties": {"a": {"type": "string"}}}}],
                            [])
        return [json.dumps(next(source).value, default=repr) for _ in range(5)]

    assert first(1) == first(1)
    assert first(1) != first(2)
