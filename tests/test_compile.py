"""``model.compile=true``: every encoding compiles in one graph, trains like eager, and does not recompile.

The per-encoding checks use dynamo with the ``aot_eager`` backend: it runs
dynamo's tracing (graph breaks, guards, recompiles) and AOTAutograd's backward
graph, which is where a compiled step can differ from eager, without inductor's
C++ code generation, which costs tens of CPU-seconds per model. One test (slow)
runs the real inductor path end to end.
"""

import math

import pytest
import torch
import torch._dynamo as dynamo
import torch.nn.functional as F
from conftest import small_vit

from vitpos.encodings import list_encodings
from vitpos.models.compile import CompiledForward, training_forward
from vitpos.models.seq_transformer import SequenceTransformer

IMAGE_ENCODINGS = list_encodings(2)
SEQUENCE_ENCODINGS = [n for n in list_encodings(1) if n != "combo"]  # combo's default parts are 2D


class CountingBackend:
    """A dynamo backend that counts the graphs it is given, then runs aot_eager."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return dynamo.lookup_backend("aot_eager")(gm, example_inputs)


def train_steps(forward, model, batches):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x, y in batches:
        loss = F.cross_entropy(forward(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def batches(n=3, size=16):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, 3, size, size, generator=g), torch.randint(0, 10, (4,), generator=g)) for _ in range(n)]


@pytest.mark.parametrize("name", SEQUENCE_ENCODINGS)
def test_sequence_encoding_compiles_in_one_graph(name):
    torch.manual_seed(0)
    model = SequenceTransformer(encoding=name, vocab_size=16, num_classes=16, max_len=16, dim=32, depth=2, num_heads=2)
    tokens = torch.randint(0, 16, (2, 16))
    padding = torch.zeros(2, 16, dtype=torch.bool)
    padding[1, 12:] = True
    explained = dynamo.explain(model)(tokens, padding)
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]


@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
def test_compiled_training_equals_eager_without_recompiles(name):
    dynamo.reset()
    data = batches(n=2)
    eager = small_vit(name, depth=1).train()  # one block: each hook traced once (the trace time is per block)
    eager_losses = train_steps(eager, eager, data)

    model = small_vit(name, depth=1).train()  # same seed: same initial weights
    backend = CountingBackend()
    compiled = CompiledForward(model, backend=backend)  # fullgraph=True: a graph break raises
    losses = train_steps(compiled, model, data)
    assert losses == pytest.approx(eager_losses, rel=1e-4, abs=1e-5)
    assert backend.graphs == 1, "a step at the same grid recompiled (a cache filled inside the trace?)"


@pytest.mark.parametrize("name", ["learned_1d", "rope_2d"])  # a resized table, a rotation
def test_compiled_model_evaluates_at_another_grid(name):
    dynamo.reset()
    model = small_vit(name).train()
    backend = CountingBackend()
    compiled = CompiledForward(model, backend=backend)
    train_steps(compiled, model, batches(n=1))
    model.eval()
    with torch.no_grad():
        for size in (24, 16):  # a new grid, then the training grid in eval mode: one new graph each
            x = torch.randn(2, 3, size, size)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert backend.graphs == 3


def test_training_forward_adds_nothing_to_the_state_dict():
    model = small_vit("rope_2d")
    holder = torch.nn.Module()
    holder.model = model
    keys = set(holder.state_dict())
    holder.train_forward = training_forward(model, True)
    holder.eager_forward = training_forward(model, False)
    assert set(holder.state_dict()) == keys
    assert isinstance(holder.train_forward, CompiledForward)


def test_priming_leaves_the_rng_and_the_mode_alone():
    model = small_vit("learned_1d", drop_path=0.1).train()
    compiled = CompiledForward(model, backend="eager")
    x = torch.randn(2, 3, 16, 16)
    state = torch.get_rng_state()
    compiled.prime(x)
    assert torch.equal(torch.get_rng_state(), state)
    assert model.training


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rope_2d"])  # every encoding: the aot_eager test above
def test_inductor_training_equals_eager(name):
    """The default backend (inductor): C++ kernels generated on this CPU (~40 s on 2 busy cores)."""
    dynamo.reset()
    data = batches(n=2)
    eager = small_vit(name).train()
    eager_losses = train_steps(eager, eager, data)
    model = small_vit(name).train()
    losses = train_steps(CompiledForward(model), model, data)
    assert losses == pytest.approx(eager_losses, rel=1e-3, abs=1e-4)


@pytest.mark.parametrize("name", ["learned_2d", "rope_2d_mixed", "lookhere"])  # a resized table, a rotation, a bias
def test_multi_resolution_training_compiles_one_graph_per_size(name):
    """data.train_sizes (multi-resolution training): batches of three sizes in turn, twice over, compile exactly three
    graphs (one per size, then cache hits), not one per step."""
    dynamo.reset()
    model = small_vit(name).train()
    backend = CountingBackend()
    compiled = CompiledForward(model, backend=backend)
    gen = torch.Generator().manual_seed(0)
    data = [(torch.randn(4, 3, s, s, generator=gen), torch.randint(0, 10, (4,), generator=gen)) for s in (16, 8, 12)]
    losses = train_steps(compiled, model, data * 2)
    assert all(math.isfinite(v) for v in losses)
    assert backend.graphs == 3, f"{backend.graphs} graphs for 3 sizes over 6 steps"
