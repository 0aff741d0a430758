"""``TextLLMRunner``: generate text from a ``.pte`` exported by :func:`etkit.llm.export_llm`.

The shape of ExecuTorch's ``TextLLMRunner`` / ``IRunner`` (seed page "Running LLMs with C++"): load
the program and its metadata (constant methods), prefill the prompt, then decode one token per
``forward`` call, sampling greedily or with temperature / top-p, until an EOS id, ``max_new_tokens``
or the end of the KV cache. Tokenizers are ExecuTorch's own (``pytorch-tokenizers``: a Hugging Face
``tokenizer.json``, SentencePiece or tiktoken models).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

#: Constant methods the runner reads (ExecuTorch's names) and the values it assumes when one is missing.
METADATA_DEFAULTS = {
    "get_max_seq_len": 128, "get_max_context_len": 128, "get_vocab_size": -1, "get_bos_id": -1,
    "get_eos_ids": [], "use_kv_cache": True, "use_sdpa_with_kv_cache": False, "enable_dynamic_shape": False,
}


class GenerationError(ValueError):
    """A request the program cannot serve (prompt too long, tokenizer of another vocabulary, ...)."""


@dataclass
class GenerationConfig:
    """Options of :meth:`TextLLMRunner.generate`.

    Attributes:
        max_new_tokens: tokens to generate at most (generation also stops at an EOS id and at the end of
            the KV cache, ``get_max_context_len``).
        temperature: 0 for greedy (argmax) decoding; otherwise logits are divided by it before sampling.
        top_p: nucleus sampling: sample among the most likely tokens whose probabilities sum to ``top_p``.
        seed: seed of the sampler (numpy ``Generator``), for reproducible sampling.
        echo: pass the prompt's text to the token callback before the generated tokens.
        ignore_eos: keep generating after an EOS id (benchmarks: a fixed number of tokens).
        num_bos: how many ``get_bos_id`` tokens to put before the prompt at the start of a conversation
            (0: only what the tokenizer itself adds; ExecuTorch's ``GenerationConfig.num_bos``).
        truncate_prompt: keep the last tokens of a prompt too long for the cache instead of refusing it.
        apply_chat_template: wrap the prompt as one user turn with the tokenizer's chat template (when
            the tokenizer has one; see :class:`TextLLMRunner`).
    """

    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    echo: bool = False
    num_bos: int = 0
    ignore_eos: bool = False
    truncate_prompt: bool = False
    apply_chat_template: bool = False


@dataclass
class Stats:
    """Timings of one :meth:`TextLLMRunner.generate` call (milliseconds, as ExecuTorch's ``Stats``)."""

    load_ms: float = 0.0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    #: from the start of generate() to the first generated token (prefill plus one sampling)
    time_to_first_token_ms: float = 0.0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    stop_reason: str = ""

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / (self.prefill_ms / 1e3) if self.prefill_ms > 0 else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens generated after the first (each one a ``forward`` call) per second of decoding."""
        n = self.generated_tokens - 1
        return n / (self.decode_ms / 1e3) if n > 0 and self.decode_ms > 0 else 0.0

    def line(self) -> str:
        """One line for a terminal."""
        return (f"prompt {self.prompt_tokens} tok, generated {self.generated_tokens} tok | load {self.load_ms:.0f} ms"
                f" | first token {self.time_to_first_token_ms:.0f} ms | prefill {self.prefill_tokens_per_s:.1f} tok/s"
                f" | decode {self.decode_tokens_per_s:.1f} tok/s | stop: {self.stop_reason}")


class Tokenizer:
    """A tokenizer file through ``pytorch-tokenizers`` (ExecuTorch's C++ tokenizers, Python bindings).

    ``.json`` files are Hugging Face tokenizers; other files are tried as SentencePiece, then tiktoken.
    A ``chat_template.jinja`` or ``tokenizer_config.json`` beside a ``tokenizer.json`` (as transformers'
    ``save_pretrained`` writes them) gives the chat template.

    Raises:
        GenerationError: the file is missing or no tokenizer reads it.
    """

    def __init__(self, path: str) -> None:
        import pytorch_tokenizers as pt
        if not os.path.isfile(path):
            raise GenerationError(f"tokenizer file {path!r} does not exist")
        candidates = [pt.CppHFTokenizer] if path.endswith(".json") else [pt.CppSPTokenizer, pt.CppTiktoken]
        errors = []
        for cls in candidates:
            tok = cls()
            try:
                status = tok.load(path)
            except Exception as exc:  # the bindings raise for some formats, return an Error for others
                status = exc
            if tok.is_loaded():
                self._tok = tok
                break
            errors.append(f"{cls.__name__}: {status}")
        else:
            raise GenerationError(f"no tokenizer could read {path!r} ({'; '.join(errors)})")
        self.chat_template = None
        self.path = path
        folder = os.path.dirname(os.path.abspath(path))
        config, jinja = os.path.join(folder, "tokenizer_config.json"), os.path.join(folder, "chat_template.jinja")
        if path.endswith(".json") and os.path.isfile(jinja):
            with open(jinja) as f:
                self.chat_template = f.read()
        elif path.endswith(".json") and os.path.isfile(config):
            with open(config) as f:
                self.chat_template = json.load(f).get("chat_template")

    @property
    def vocab_size(self) -> int:
        return int(self._tok.vocab_size())

    def encode(self, text: str, bos: int = 0, eos: int = 0) -> list:
        return list(self._tok.encode(text, bos, eos))

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of ``tokens``. Byte-level pieces are joined before UTF-8 decoding, so a character split over
        several tokens comes out whole; an incomplete character at the end is left out (it appears once its
        last token is there)."""
        tokens = list(tokens)
        for end in range(len(tokens), max(len(tokens) - 4, 0) - 1, -1):
            try:
                return self._tok.decode_batch(tokens[:end]) if end else ""
            except UnicodeDecodeError:  # the last character's bytes are not all there yet
                continue
        return ""

    def render_chat(self, prompt: str) -> str:
        """``prompt`` as one user turn of the chat template (``add_generation_prompt``): the Jinja template
        when the folder has one, else the prefix and suffix of a ``chat_turn.json`` beside the tokenizer.

        Raises:
            GenerationError: the folder has neither.
        """
        if self.chat_template:
            import jinja2
            env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
            return env.from_string(self.chat_template).render(
                messages=[{"role": "user", "content": prompt}], add_generation_prompt=True, bos_token="",
                eos_token="")
        turn = chat_turn_path(self.path)
        if os.path.isfile(turn):
            prefix, suffix, strip = read_chat_turn(turn)
            return prefix + (prompt.strip(CHAT_TURN_WHITESPACE) if strip else prompt) + suffix
        raise GenerationError("the tokenizer has no chat template (no chat_template.jinja, tokenizer_config.json "
                              f"with 'chat_template' or {CHAT_TURN_FILE} beside {os.path.basename(self.path)})")

    def chat_turn(self) -> "ChatTurn":
        """:class:`ChatTurn` ``(prefix, suffix, strip)``: the text the chat template puts before and after a
        single user prompt (``add_generation_prompt``), and whether it trims the prompt first (Llama 3's
        ``| trim``), so that ``prefix + (prompt.strip() if strip else prompt) + suffix == render_chat(prompt)``
        for any prompt. What a runner without a Jinja engine (``etkit_llm_runner --chat``) needs.

        Raises:
            GenerationError: no chat template, or one whose text around the prompt depends on the prompt
                in another way (it then cannot be reduced to a fixed prefix and suffix).
        """
        marker = "\x00etkit-prompt\x00"
        rendered = self.render_chat(marker)
        if rendered.count(marker) != 1:
            raise GenerationError(f"the chat template shows the prompt {rendered.count(marker)} times, not once: it "
                                  "cannot be reduced to a fixed prefix and suffix")
        prefix, suffix = rendered.split(marker)
        probes = ("Hello", "  two words\n", "\t x \r\n")
        for strip in (False, True):
            if all(self.render_chat(p) == prefix + (p.strip(CHAT_TURN_WHITESPACE) if strip else p) + suffix
                   for p in probes):
                return ChatTurn(prefix, suffix, strip)
        raise GenerationError("the chat template changes the text around the prompt with the prompt itself "
                              f"(tried {probes!r}), other than trimming it: it cannot be reduced to a fixed prefix "
                              "and suffix")

    def write_chat_turn(self) -> str:
        """Writes :meth:`chat_turn` to ``chat_turn.json`` beside the tokenizer file (``{"prefix": ...,
        "suffix": ...}``, plus ``"strip": true`` for a template that trims the prompt; UTF-8), which
        ``etkit_llm_runner --chat`` reads. ``etkit llm export`` calls this.

        Returns:
            the file's path.
        Raises:
            GenerationError: as :meth:`chat_turn`.
        """
        turn = self.chat_turn()
        path = chat_turn_path(self.path)
        data = {"prefix": turn.prefix, "suffix": turn.suffix}
        if turn.strip:
            data["strip"] = True
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
        return path


#: The file beside a tokenizer that holds one user turn of its chat template, pre-rendered.
CHAT_TURN_FILE = "chat_turn.json"
#: What a trimming template strips from the prompt's ends, as the C++ runner does: ASCII whitespace (Jinja's
#: ``trim`` strips Unicode whitespace too; the probes in :meth:`Tokenizer.chat_turn` are ASCII).
CHAT_TURN_WHITESPACE = " \t\n\r\f\v"


class ChatTurn(NamedTuple):
    """One user turn of a chat template: ``prefix + prompt + suffix``, the prompt stripped of whitespace at
    both ends first when ``strip``."""

    prefix: str
    suffix: str
    strip: bool = False


def chat_turn_path(tokenizer_path: str) -> str:
    """Where the ``chat_turn.json`` of ``tokenizer_path`` lives: in the same folder."""
    return os.path.join(os.path.dirname(os.path.abspath(tokenizer_path)), CHAT_TURN_FILE)


def read_chat_turn(path: str) -> ChatTurn:
    """The :class:`ChatTurn` in a ``chat_turn.json``.

    Raises:
        GenerationError: the file is not a JSON object with string ``prefix`` and ``suffix`` (and, when
            present, a boolean ``strip``).
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise GenerationError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("prefix", "suffix")) or \
            not isinstance(data.get("strip", False), bool):
        raise GenerationError(f"{path} must be a JSON object with string 'prefix' and 'suffix' (and boolean 'strip')")
    return ChatTurn(data["prefix"], data["suffix"], data.get("strip", False))


def _sample(logits: np.ndarray, config: GenerationConfig, rng: np.random.Generator) -> int:
    if config.temperature <= 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / config.temperature
    z -= z.max()
    p = np.exp(z)
    p /= p.sum()
    if config.top_p < 1.0:
        order = np.argsort(-p)
        keep = order[: int(np.searchsorted(np.cumsum(p[order]), config.top_p)) + 1]
        q = np.zeros_like(p)
        q[keep] = p[keep]
        p = q / q.sum()
    return int(rng.choice(len(p), p=p))


class TextLLMRunner:
    """Generates text with a ``.pte`` from :func:`etkit.llm.export_llm`.

    Args:
        pte_path: the program (method ``forward(tokens int64 [1, S], input_pos int64 [1]) -> logits``).
        tokenizer_path: a ``tokenizer.json`` (Hugging Face), SentencePiece or tiktoken model.
        data_path: the ``.ptd`` data file holding the weights, for a program exported with
            ``LlmConfig(external_constants=True)`` (ExecuTorch's runners' ``data_path``).
    Raises:
        GenerationError: the tokenizer's vocabulary does not match the program's ``get_vocab_size``.
    """

    def __init__(self, pte_path: str, tokenizer_path: str, data_path: Optional[str] = None) -> None:
        from etkit.runtime import Runtime
        start = time.perf_counter()
        self.tokenizer = Tokenizer(tokenizer_path)
        self._program = Runtime.get().load_program(pte_path, data_path=data_path)
        names = self._program.method_names
        self.metadata = {k: self._constant(k, v) if k in names else v for k, v in METADATA_DEFAULTS.items()}
        self._forward = self._program.load_method("forward")
        self.load_ms = (time.perf_counter() - start) * 1e3
        vocab = self.metadata["get_vocab_size"]
        if vocab > 0 and self.tokenizer.vocab_size > vocab:
            raise GenerationError(f"the tokenizer has {self.tokenizer.vocab_size} tokens but the program's vocabulary "
                                  f"(get_vocab_size) is {vocab}: they belong to different models")
        self._pos = 0

    def _constant(self, name: str, default):
        values = self._program.load_method(name).execute([])
        if isinstance(default, list):
            return [int(v) for v in values]
        return type(default)(values[0])

    @property
    def eos_ids(self) -> list:
        return list(self.metadata["get_eos_ids"])

    def reset(self) -> None:
        """Start a new conversation: the next :meth:`generate` writes the cache from position 0."""
        self._pos = 0

    def _step(self, tokens: Sequence[int]) -> np.ndarray:
        (logits,) = self._forward.execute([np.asarray([list(tokens)], dtype=np.int64),
                                           np.asarray([self._pos], dtype=np.int64)])
        self._pos += len(tokens)
        return logits.reshape(-1, logits.shape[-1])[-1]

    def prefill(self, tokens: Sequence[int]) -> np.ndarray:
        """Runs ``tokens`` through the model (chunks of ``get_max_seq_len``, or one by one for a static
        program) and returns the logits after the last one."""
        chunk = self.metadata["get_max_seq_len"] if self.metadata["enable_dynamic_shape"] else 1
        logits = None
        for i in range(0, len(tokens), chunk):
            logits = self._step(tokens[i:i + chunk])
        return logits

    def generate(self, prompt: str, config: Optional[GenerationConfig] = None,
                 token_callback: Optional[Callable[[str], None]] = None) -> tuple:
        """Generate a continuation of ``prompt``.

        Args:
            prompt: the text (wrapped in the chat template with ``config.apply_chat_template``).
            config: :class:`GenerationConfig`.
            token_callback: called with each new piece of text as it is generated (streaming).
        Returns:
            ``(text, stats)``: the generated text (without the prompt or the EOS token) and :class:`Stats`.
        Raises:
            GenerationError: the prompt does not fit (names its length and ``get_max_context_len``) and
                ``truncate_prompt`` is off, or it is empty.
        """
        config = config or GenerationConfig()
        start = time.perf_counter()
        text = self.tokenizer.render_chat(prompt) if config.apply_chat_template else prompt
        tokens = self.tokenizer.encode(text)
        bos = self.metadata["get_bos_id"]
        if bos >= 0 and self._pos == 0 and config.num_bos > 0:
            tokens = [bos] * config.num_bos + tokens
        if config.echo and token_callback:
            token_callback(text)
        eos = set(self.eos_ids)
        emitted = [""]

        def on_token(generated: list) -> None:
            piece = self.tokenizer.decode([t for t in generated if t not in eos])
            if token_callback and len(piece) > len(emitted[0]):
                token_callback(piece[len(emitted[0]):])
                emitted[0] = piece

        generated, stats = self.generate_tokens(tokens, config, on_token, start=start)
        return self.tokenizer.decode([t for t in generated if t not in eos]), stats

    def generate_tokens(self, tokens: Sequence[int], config: Optional[GenerationConfig] = None,
                        on_token: Optional[Callable[[list], None]] = None, start: Optional[float] = None) -> tuple:
        """Generate from prompt token ids (no tokenizer involved).

        Args:
            tokens: the prompt's token ids, continuing the conversation at the current position.
            config: :class:`GenerationConfig` (``max_new_tokens``, sampling, ``truncate_prompt``).
            on_token: called with the list of tokens generated so far after each new one.
        Returns:
            ``(generated token ids (the EOS included when one ended generation), stats)``.
        Raises:
            GenerationError: the prompt is empty, or too long for the cache and ``truncate_prompt`` is off.
        """
        config = config or GenerationConfig()
        start = time.perf_counter() if start is None else start
        stats = Stats(load_ms=self.load_ms)
        tokens = list(tokens)
        if not tokens:
            raise GenerationError("the prompt is empty: it encodes to no tokens")
        limit = self.metadata["get_max_context_len"]
        room = limit - self._pos - 1
        if len(tokens) > room:
            if not config.truncate_prompt:
                raise GenerationError(f"the prompt is {len(tokens)} tokens but the program's context "
                                      f"(get_max_context_len) is {limit} tokens, {self._pos} already used; shorten it, "
                                      f"pass truncate_prompt=True, or export with a larger max_context_len")
            tokens = tokens[-room:]
        stats.prompt_tokens = len(tokens)
        rng = np.random.default_rng(config.seed)
        logits = self.prefill(tokens)
        stats.prefill_ms = (time.perf_counter() - start) * 1e3
        generated: list = []
        decode_start = None
        eos = set() if config.ignore_eos else set(self.eos_ids)
        stats.stop_reason = "max_new_tokens"
        while len(generated) < config.max_new_tokens:
            token = _sample(logits, config, rng)
            if not generated:
                stats.time_to_first_token_ms = (time.perf_counter() - start) * 1e3
                decode_start = time.perf_counter()
            generated.append(token)
            if token in eos:
                stats.stop_reason = "eos"
                break
            if on_token:
                on_token(generated)
            if len(generated) >= config.max_new_tokens:
                break
            if self._pos >= limit:
                stats.stop_reason = f"context full ({limit} tokens, get_max_context_len)"
                break
            logits = self._step([token])
        if decode_start is not None:
            stats.decode_ms = (time.perf_counter() - decode_start) * 1e3
        stats.generated_tokens = len(generated)
        return generated, stats
