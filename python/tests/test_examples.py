"""examples/python runs as the README shows it and prints the layout shardwise computes."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax.nnx")

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_shard_flax_model():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, os.path.join(REPOSITORY, "examples", "python",
                                                       "shard_flax_model.py")],
                         check=True, capture_output=True, text=True, env=env).stdout
    lines = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert len(lines) == 17  # the embedding, and per block two kernels and two biases
    # FSDP over 'data' and the model axis on the MLP's inner dimension, as the rules say.
    assert "P('data', 'model')" in lines["layers.3.mlp.up.kernel"]
    assert "shard (128, 256)" in lines["layers.3.mlp.up.kernel"]
    assert "P('model', 'data')" in lines["embed.embedding"]
    assert out.splitlines()[-1].startswith("planned on 8 H100s: Layout(")
