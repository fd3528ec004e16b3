"""A fast path for llama-architecture GGUF files: weights straight into ``LlamaForCausalLM``.

``AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`` reads the whole
GGUF key-value section twice through ``gguf.GGUFReader`` (which builds a numpy
view per vocabulary entry) and rebuilds its tensor-name map once per module:
about 17 s for the 135M SmolLM2 on a 2-core machine, against about 3 s of real
work (dequantising). Here the header is parsed with ``struct`` in one pass,
each tensor is dequantised with ``gguf.quants`` into a model built on the meta
device, and nothing else happens. Only the ``llama`` architecture (Llama,
SmolLM, Mistral-style files) is handled; anything else returns None and the
caller falls back to transformers.

The one non-obvious step: llama.cpp's converter permutes the rows of the Q and
K projections (rotary halves interleaved); they are permuted back here, as
transformers does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9
_BIG_ARRAY = 64  # arrays longer than this (the vocabulary) are skipped, not decoded

_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # numpy order (GGUF lists the fastest dimension first)
    qtype: int
    offset: int  # from the start of the data section


class _Reader:
    def __init__(self, buf: memoryview):
        self.buf, self.pos = buf, 0

    def scalar(self, code: str) -> Any:
        (value,) = struct.unpack_from("<" + code, self.buf, self.pos)
        self.pos += struct.calcsize(code)
        return value

    def string(self) -> str:
        n = self.scalar("Q")
        self.pos += n
        return bytes(self.buf[self.pos - n : self.pos]).decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.scalar("I"), self.scalar("Q")
            if etype in _SCALARS:
                size = struct.calcsize(_SCALARS[etype])
                if count > _BIG_ARRAY:
                    self.pos += size * count
                    return None
                out = list(struct.unpack_from(f"<{count}{_SCALARS[etype]}", self.buf, self.pos))
                self.pos += size * count
                return out
            items = [self.value(etype) for _ in range(count)]
            return None if count > _BIG_ARRAY else items
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_header(buf: memoryview) -> tuple[dict[str, Any], list[TensorInfo], int]:
    """(metadata without the big arrays, tensor infos, start of the data section)."""
    if bytes(buf[:4]) != b"GGUF":
        raise ValueError("no GGUF magic bytes")
    r = _Reader(buf)
    r.pos = 4
    version = r.scalar("I")
    if version < 2 or version > 0xFFFF:
        raise ValueError(f"unsupported GGUF version {version} (or a big-endian file)")
    n_tensors, n_kv = r.scalar("Q"), r.scalar("Q")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.scalar("I"))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.scalar("Q") for _ in range(r.scalar("I"))]
        qtype, offset = r.scalar("I"), r.scalar("Q")
        tensors.append(TensorInfo(name, tuple(reversed(dims)), qtype, offset))
    align = int(meta.get("general.alignment", 32))
    start = (r.pos + align - 1) // align * align
    return meta, tensors, start


def _config(meta: dict[str, Any], tensors: list[TensorInfo]) -> Any:
    from transformers import LlamaConfig

    a = "llama."
    embed = next(t for t in tensors if t.name == "token_embd.weight")
    heads = int(meta[a + "attention.head_count"])
    hidden = int(meta[a + "embedding_length"])
    kwargs: dict[str, Any] = {
        "vocab_size": int(embed.shape[0]),
        "hidden_size": hidden,
        "intermediate_size": int(meta[a + "feed_forward_length"]),
        "num_hidden_layers": int(meta[a + "block_count"]),
        "num_attention_heads": heads,
        "num_key_value_heads": int(meta.get(a + "attention.head_count_kv", heads)),
        "max_position_embeddings": int(meta.get(a + "context_length", 2048)),
        "rms_norm_eps": float(meta.get(a + "attention.layer_norm_rms_epsilon", 1e-5)),
        "rope_theta": float(meta.get(a + "rope.freq_base", 10000.0)),
        "head_dim": int(meta.get(a + "rope.dimension_count", hidden // heads)),
        "tie_word_embeddings": not any(t.name == "output.weight" for t in tensors),
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
    }
    return LlamaConfig(**kwargs)


def _hf_name(gguf_name: str) -> str | None:
    base, _, suffix = gguf_name.rpartition(".")
    parts = base.split(".")
    if parts[0] == "blk" and len(parts) == 3 and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}.{suffix}"
    if base in _TOP_NAMES:
        return f"{_TOP_NAMES[base]}.{suffix}"
    return None


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation (rotary halves interleaved per head)."""
    half = w.shape[0] // n_head // 2
    return w.reshape(n_head, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_llama_gguf(path: str) -> Any | None:
    """A ``LlamaForCausalLM`` with the file's weights (float32), or None if not a llama file."""
    import torch
    from gguf.quants import dequantize
    from transformers import LlamaForCausalLM

    data = np.fromfile(path, dtype=np.uint8)  # one read; tensors are copied out of it
    # an ndarray has the buffer protocol (numpy's stubs declare __buffer__ for 3.12+ only)
    meta, tensors, start = read_header(memoryview(data))  # type: ignore[arg-type]
    if meta.get("general.architecture") != "llama":
        return None
    names = {t.name: _hf_name(t.name) for t in tensors}
    if any(v is None for v in names.values()):
        return None  # a tensor we do not know where to put
    config = _config(meta, tensors)
    state: dict[str, torch.Tensor] = {}
    for t in tensors:
        w = _tensor(data, start, t, dequantize)
        if t.name.endswith("attn_q.weight"):
            w = _unpermute(w, config.num_attention_heads)
        elif t.name.endswith("attn_k.weight"):
            w = _unpermute(w, config.num_key_value_heads)
        # no None in names (checked above)
        state[names[t.name]] = torch.from_numpy(  # type: ignore[index]
            np.array(w, dtype=np.float32, order="C"))
    del data
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    missing = [m for m in missing if not (config.tie_word_embeddings and m == "lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"GGUF tensors do not fit LlamaForCausalLM: missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]}")
    if config.tie_word_embeddings:
        model.tie_weights()
    _materialise_buffers(model, config)
    model.eval()
    return model


def _tensor(data: np.ndarray, start: int, t: TensorInfo, dequantize) -> np.ndarray:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    qtype = GGMLQuantizationType(t.qtype)
    block, size = GGML_QUANT_SIZES[qtype]
    n = int(np.prod(t.shape))
    nbytes = n // block * size
    raw = data[start + t.offset : start + t.offset + nbytes]
    row_bytes = t.shape[-1] // block * size
    raw = raw.reshape(*t.shape[:-1], row_bytes)
    return dequantize(raw, qtype).reshape(t.shape)


def _materialise_buffers(model: Any, config: Any) -> None:
    """Modules whose buffers (rotary inverse frequencies) are still on the meta device are
    built again on the CPU from the config; they hold no weights."""
    for name, module in list(model.named_modules()):
        if name and any(b.is_meta for b in module.buffers(recurse=False)):
            parent, _, leaf = name.rpartition(".")
            fresh = type(module)(config=config)
            setattr(model.get_submodule(parent) if parent else model, leaf, fresh)
    for name, buf in model.named_buffers():
        if buf.is_meta:
            raise ValueError(f"buffer {name} could not be materialised")
