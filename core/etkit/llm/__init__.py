"""Language models on etkit: export a decoder-only transformer with a static KV cache and generate text.

    from etkit.llm import LlmConfig, export_llm, TextLLMRunner, GenerationConfig
    export_llm(hf_model, LlmConfig(backend="portable")).write_to_file("model.pte")
    text, stats = TextLLMRunner("model.pte", "tokenizer.json").generate("Hello", GenerationConfig())

Names follow ExecuTorch's LLM flow (seed pages "Exporting LLMs", "Running LLMs with C++"). The names load on
first use, so ``import etkit.llm`` stays light (the CLI, the runner without torch's export machinery).
"""
import importlib

_LAZY = {
    "LlmConfig": "etkit.llm.export",
    "LlmExportError": "etkit.llm.export",
    "export_llm": "etkit.llm.export",
    "load_model": "etkit.llm.export",
    "StaticKVDecoder": "etkit.llm.model",
    "UnsupportedModelError": "etkit.llm.model",
    "GenerationConfig": "etkit.llm.runner",
    "GenerationError": "etkit.llm.runner",
    "Stats": "etkit.llm.runner",
    "TextLLMRunner": "etkit.llm.runner",
    "Tokenizer": "etkit.llm.runner",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'etkit.llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
