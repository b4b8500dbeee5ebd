"""shardwise.plan and shardwise.search from Python: every kind of model the planner takes,
typed results, and the same numbers as `shardwise plan --json` (where the command is at hand:
SHARDWISE_COMMAND, which CTest sets)."""
import json
import os
import subprocess

import pytest

import shardwise as sw

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPT2 = os.path.join(REPOSITORY, "examples", "models", "gpt2.json")
LLAMA_405B = os.path.join(REPOSITORY, "examples", "models", "llama-3.1-405b.json")
TINY_MANIFEST = os.path.join(REPOSITORY, "examples", "models", "tiny_manifest.json")


def gpt2_config():
    with open(GPT2) as file:
        return json.load(file)


def test_a_model_reads_alike_from_a_dict_a_file_a_folder_and_a_manifest(tmp_path):
    from_dict = sw.manifest_of(gpt2_config())
    assert from_dict.num_parameters == 124439808  # GPT-2 small, tied head
    assert sw.manifest_of(GPT2).num_parameters == from_dict.num_parameters
    (tmp_path / "config.json").write_text(json.dumps(gpt2_config()))
    assert sw.manifest_of(tmp_path).num_parameters == from_dict.num_parameters
    manifest = sw.manifest_of(TINY_MANIFEST)
    assert sw.manifest_of(manifest) is manifest
    assert sw.manifest_of(json.loads(manifest.to_json())).num_parameters == manifest.num_parameters


def test_a_parameter_tree_is_a_model():
    tree = [("embed.weight", (256, 64), ("vocab", "embed")),
            ("layers.0.attn.qkv.weight", (192, 64)),
            ("layers.0.attn.out.weight", (64, 64)),
            ("layers.0.mlp.up.weight", (256, 64)),
            ("layers.0.mlp.down.weight", (64, 256)),
            ("lm_head.weight", (256, 64))]
    manifest = sw.manifest_of(tree)
    assert manifest.num_parameters == sum(a * b for _, (a, b), *rest in tree)
    assert manifest.parameters[0].logical_axes == ["vocab", "embed"]
    as_dict = sw.manifest_of({name: shape for name, shape, *rest in tree})
    assert as_dict.num_parameters == manifest.num_parameters
    whole = sw.plan(tree, heads=4, devices=2, global_batch=8, seq=128, layout="data=2", zero=0)
    halves = sw.plan(tree, heads=4, devices=2, global_batch=8, seq=128, layout="data=2", zero=3)
    assert halves.memory.params < whole.memory.params <= 2 * halves.memory.params


def test_plan_is_typed():
    p = sw.plan(GPT2, devices=8, global_batch=64, seq=1024, layout="data=2,fsdp=4", zero=3)
    assert isinstance(p, sw.Prediction) and p.fits
    assert p.layout.fsdp == 4 and p.layout.zero == 3 and p.layout.microbatches == 8
    assert set(p.comm_bytes_per_step) >= {"fsdp"}
    # ZeRO-3 over 4 fsdp ranks, bf16 with Adam: 16 bytes per parameter, a quarter of each.
    assert p.memory.params + p.memory.grads + p.memory.optimizer == 16 * 124_439_808 // 4
    assert p.memory.total > p.memory.params + p.memory.grads + p.memory.optimizer
    assert 0 < p.mfu < 1 and p.step_time_s > 0
    result = sw.search(LLAMA_405B, devices=16384, global_batch=2048, seq=8192,
                       recompute="full", sequence_parallel=True, top=3)
    assert isinstance(result, sw.SearchResult) and len(result.ranked) == 3
    assert result.ranked[0].why_not_best == "" and result.ranked[1].why_not_best
    assert result.ranked[0].prediction.fits
    assert result.ranked[0].prediction.layout.devices == 16384


@pytest.mark.parametrize("kwargs, field", [
    (dict(devices=0), "devices"),
    (dict(devices=2 ** 40), "devices is 1099511627776"),
    (dict(global_batch=0), "global_batch"),
    (dict(global_batch=2 ** 63), "global_batch"),
    (dict(seq=2 ** 40), "seq"),
    (dict(seq=4096), "context"),
    (dict(efficiency=float("nan")), "compute_efficiency"),
    (dict(overlap=2.0), "overlap"),
    (dict(precision="fp8"), "precision"),
    (dict(layout="data=2,tensor=4"), "layout: axis 'tensor' is not one the training layer knows"),
    (dict(layout="data=4,expert=2"), "the model has no experts to split"),
    (dict(layout={"data": 4, "context": 2}), "layout: axis 'context' is context parallelism"),
    (dict(layout="data=3"), "3, not the 8 devices"),
    (dict(layout="data=2,data=4"), "layout"),
    (dict(layout="data=\u00b2"), "layout"),
    (dict(microbatches=0), "microbatches"),
    (dict(heads=0), "heads"),
    (dict(heads=2 ** 40), "heads"),
    (dict(efficiency=2 ** 1024), "compute_efficiency"),
    (dict(efficiency=True), "compute_efficiency"),
    (dict(device="cpu"), "does not measure"),
    (dict(zero=4), "zero"),
    (dict(device="tpu-v9"), "tpu-v9"),
])
def test_bad_input_names_the_field(kwargs, field):
    args = dict(devices=8, global_batch=64, seq=1024, layout="data=8")
    args.update(kwargs)
    with pytest.raises(sw.InvalidArgument, match=field):
        sw.plan(GPT2, **args)


def test_numpy_numbers_are_numbers():
    numpy = pytest.importorskip("numpy")
    p = sw.plan(GPT2, devices=numpy.int64(8), global_batch=64, seq=1024, layout="data=8",
                efficiency=numpy.float32(0.5))
    assert p.layout.data == 8


def test_the_trainers_own_models_are_refused_not_misread():
    micro = os.path.join(REPOSITORY, "examples", "models", "gpt_micro.json")
    with pytest.raises(sw.InvalidArgument, match="shardwise train` model file.*block_size"):
        sw.manifest_of(micro)
    with open(micro) as file:
        with pytest.raises(sw.InvalidArgument, match="model file"):
            sw.manifest_of(json.load(file))


def test_the_trainers_presets_are_planned_as_their_families_state_them():
    assert "gpt2" in sw.preset_names() and "qwen3-tiny" in sw.preset_names()
    manifest = sw.manifest_of("gpt2")
    # The trainer's own parameters (nanoGPT's names, Q, K and V stacked), not Hugging Face's.
    names = [p.name for p in manifest.parameters]
    assert "transformer.h.0.attn.c_attn.weight" in names
    # Byte tokens: the trainer's gpt2 preset reads 256 of them.
    assert manifest.num_parameters == 86039040
    p = sw.plan("gpt2", devices=8, global_batch=8, seq=64, layout="data=8", precision="fp32")
    # Planned from the trainer's activation table: the same plan as its manifest's, and other
    # than a manifest without the transformer's shape, which the planner reads by names.
    same = sw.plan(manifest, devices=8, global_batch=8, seq=64, layout="data=8", precision="fp32")
    assert p.memory.activations == same.memory.activations
    bare = json.loads(manifest.to_json())
    del bare["transformer"]
    guessed = sw.plan(bare, devices=8, global_batch=8, seq=64, layout="data=8", precision="fp32")
    assert guessed.memory.params == p.memory.params


def test_bad_models_name_what_is_wrong(tmp_path):
    with pytest.raises(sw.InvalidArgument, match="not a readable regular file"):
        sw.manifest_of(str(tmp_path / "missing.json"))
    (tmp_path / "bad.safetensors").write_bytes((2 ** 40).to_bytes(8, "little"))
    with pytest.raises(sw.InvalidArgument, match="header"):
        sw.manifest_of(str(tmp_path / "bad.safetensors"))
    with pytest.raises(sw.InvalidArgument, match="model"):
        sw.manifest_of(42)
    with pytest.raises(sw.ShardwiseError):
        sw.manifest_of({"model_type": "gpt2", "n_layer": -1})
    header = b'{"w\xff": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    (tmp_path / "latin.safetensors").write_bytes(len(header).to_bytes(8, "little") + header +
                                                  bytes(4))
    with pytest.raises(sw.InvalidArgument, match="not UTF-8"):
        sw.manifest_of(str(tmp_path / "latin.safetensors"))
    with pytest.raises(sw.InvalidArgument, match="parameter 'w'.*complex64"):
        numpy = pytest.importorskip("numpy")
        sw.manifest_of({"w": numpy.zeros((2, 2), dtype=numpy.complex64)})
    with pytest.raises(sw.InvalidArgument, match="parameter 'a' is 5"):
        sw.manifest_of([("a", 5)])


def command():
    path = os.environ.get("SHARDWISE_COMMAND")
    if not path:
        pytest.skip("SHARDWISE_COMMAND (the shardwise command) is not set")
    return path


@pytest.mark.parametrize("flags", [
    ["--model", GPT2, "--devices", "8", "--global-batch", "64", "--seq", "1024",
     "--layout", "data=2,fsdp=4", "--zero", "3"],
    ["--model", LLAMA_405B, "--devices", "64", "--global-batch", "64", "--seq", "4096",
     "--layout", "data=2,fsdp=2,model=8,pipeline=2", "--zero", "1", "--schedule", "gpipe",
     "--recompute", "full"],
    ["--model", LLAMA_405B, "--devices", "16384", "--global-batch", "2048", "--seq", "8192",
     "--recompute", "full", "--sequence-parallel", "--top", "4"],
    ["--model", TINY_MANIFEST, "--heads", "4", "--devices", "4", "--global-batch", "16",
     "--seq", "64", "--layout", "data=2,fsdp=2", "--zero", "2"],
    ["--model", TINY_MANIFEST, "--heads", "4", "--devices", "8", "--global-batch", "16",
     "--seq", "64", "--top", "6"],
])
def test_the_same_numbers_as_the_command(flags):
    out = subprocess.run([command(), "plan", *flags, "--json"], check=True, capture_output=True,
                         text=True).stdout
    expected = json.loads(out)["candidates"]
    value = {flag: following for flag, following in zip(flags, flags[1:] + [""])
             if not following.startswith("--")}
    common = dict(devices=int(value["--devices"]), global_batch=int(value["--global-batch"]),
                  seq=int(value["--seq"]), recompute=value.get("--recompute", "none"),
                  sequence_parallel="--sequence-parallel" in flags,
                  heads=int(value["--heads"]) if "--heads" in value else None)
    if "--layout" in value:
        got = [sw.plan(value["--model"], layout=value["--layout"], zero=int(value.get("--zero", 0)),
                       schedule=value.get("--schedule", "1f1b"), **common)]
    else:
        got = [r.prediction for r in
               sw.search(value["--model"], top=int(value["--top"]), **common).ranked]
    assert len(got) == len(expected)
    for prediction, candidate in zip(got, expected):
        layout = candidate["layout"]
        assert (prediction.layout.data, prediction.layout.fsdp, prediction.layout.model,
                prediction.layout.pipeline, prediction.layout.zero,
                prediction.layout.microbatches, prediction.layout.schedule,
                prediction.layout.virtual_stages) == (
            layout["data"], layout["fsdp"], layout["model"], layout["pipeline"], layout["zero"],
            layout["microbatches"], layout["schedule"], layout["virtual_stages"])
        memory = candidate["memory_per_device"]
        for part in ("params", "grads", "optimizer", "activations", "buffers", "total"):
            assert getattr(prediction.memory, part) == memory[part], part
        assert prediction.comm_bytes_per_step == candidate["comm_bytes_per_step"]
        assert prediction.step_time_s == pytest.approx(candidate["step_time_s"], rel=1e-12)
        assert prediction.mfu == pytest.approx(candidate["mfu"], rel=1e-12)
        assert prediction.fits == candidate["fits"]


def test_bf16_counts_the_trainers_copies_and_reductions():
    # shardwise's bf16 keeps float32 masters and bf16 copies; bf16-mixed is the published layout.
    def memory(precision):
        return sw.plan(GPT2, devices=8, global_batch=64, seq=1024, layout="data=2,fsdp=4", zero=3,
                       precision=precision).memory
    fp32, bf16 = memory("fp32"), memory("bf16")
    assert fp32.compute_copies == 0 and bf16.compute_copies > 0
    assert (bf16.params, bf16.grads, bf16.optimizer) == (fp32.params, fp32.grads, fp32.optimizer)
    # Layers keep their arrays in bf16, the residual stream and one working layer in float32.
    assert 0.5 * fp32.activations < bf16.activations < fp32.activations
    halved = sw.plan(GPT2, devices=8, global_batch=64, seq=1024, layout="data=2,fsdp=4", zero=3,
                     precision="bf16", reduce_dtype="bf16")
    command_said = json.loads(subprocess.run(
        [command(), "plan", "--model", GPT2, "--devices", "8", "--global-batch", "64", "--seq",
         "1024", "--layout", "data=2,fsdp=4", "--zero", "3", "--precision", "bf16",
         "--reduce-dtype", "bf16", "--json"], check=True, capture_output=True,
        text=True).stdout)["candidates"][0]
    assert halved.comm_bytes_per_step == command_said["comm_bytes_per_step"]
    setup = sw.TrainingSetup(8, 128, precision="bf16", reduce_dtype="bf16")
    assert (setup.precision, setup.reduce_dtype) == ("bf16", "bf16")
    assert setup != sw.TrainingSetup(8, 128, precision="bf16")
    assert sw.TrainingSetup(8, 128).reduce_dtype is None
