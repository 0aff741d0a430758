"""etkit.backend.utils.tag_partitions: the end every partitioner shares (tags, constants, report); and no
in-tree partitioner or the scaffold's template builds its report by hand any more (issue 21)."""
from __future__ import annotations

import logging
import pathlib
import re

import torch

from etkit.backend import DELEGATION_TAG, DelegationSpec, Rejection
from etkit.backend.utils import propose_partitions, tag_partitions

REPO = pathlib.Path(__file__).resolve().parents[2]


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        a = x + self.w          # delegated
        b = torch.sin(a)        # refused: splits the graph in two groups
        return (b * 2.0).relu()  # delegated


def test_groups_are_tagged_in_order_with_their_constants_and_the_report_lists_refusals_in_graph_order(caplog):
    ep = torch.export.export(_Model(), (torch.randn(3),))
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    sin = next(n for n in calls if n.target is torch.ops.aten.sin.default)
    supported = {n for n in calls if n is not sin}
    spec = DelegationSpec("ToyBackend", [])
    earlier = Rejection("x", "placeholder", "listed by the partitioner itself")
    with caplog.at_level(logging.INFO, logger="toy"):
        result, report = tag_partitions(ep, propose_partitions(ep, supported), spec, backend_id="ToyBackend",
                                        tag_prefix="toy", reasons={sin: "sin is not on this device"},
                                        rejected=[earlier], logger=logging.getLogger("toy"))
    assert result.partition_tags == {"toy_0": spec, "toy_1": spec}
    assert {n.meta.get(DELEGATION_TAG) for n in supported} == {"toy_0", "toy_1"}
    first = next(n for n in calls if n.target is torch.ops.aten.add.Tensor)
    assert first.meta[DELEGATION_TAG] == "toy_0" and DELEGATION_TAG not in sin.meta
    weight = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name.endswith("w"))
    assert weight.meta.get(DELEGATION_TAG) == "toy_0"  # the constant only the first group reads goes with it
    assert report.num_partitions == 2 and report.num_delegated == len(supported)
    assert report.delegated["aten.add.Tensor"] == 1
    assert [r.reason for r in report.rejected] == ["listed by the partitioner itself", "sin is not on this device"]
    assert "ToyBackend: 3 ops delegated in 2 partition(s), 2 left outside" in caplog.text


def test_a_refused_node_that_ends_up_tagged_is_not_reported():
    ep = torch.export.export(_Model(), (torch.randn(3),))
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    _, report = tag_partitions(ep, [calls], DelegationSpec("ToyBackend", []), backend_id="ToyBackend",
                               tag_prefix="toy", reasons={calls[1]: "refused at first"}, take_constant_data=False)
    assert report.rejected == [] and report.num_partitions == 1


def test_partitioners_build_their_reports_through_the_toolkit():
    sources = [p for p in REPO.glob("plugins/*/etkit_*/**/*.py") if "/build/" not in p.as_posix()]
    sources += list(REPO.glob("core/etkit/scaffold/templates/**/*.tmpl"))
    by_hand = re.compile(r"PartitionReport\(|\.meta\[DELEGATION_TAG\]\s*=")
    found = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in sorted(sources) for m in by_hand.finditer(p.read_text())]
    assert not found, "use etkit.backend.utils.tag_partitions:\n" + "\n".join(found)
