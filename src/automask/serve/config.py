"""What an operator sets for ``automask serve`` (no web dependencies: the CLI reads it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ServerConfig:
    """What an operator sets (see ``automask serve --help``)."""

    model_id: str = "SmolLM2-135M-Instruct"
    max_tokens: int = 1024  # the cap when a request names none
    max_body_bytes: int = 8 * 1024 * 1024
    request_timeout: float = 300.0  # seconds from arrival to the last token
    max_queue: int = 64
    whitespace: str = "compact"  # small models pad flexible JSON with whitespace
    reasoning: tuple[str, str] | None = None
    cache_size: int = 256
