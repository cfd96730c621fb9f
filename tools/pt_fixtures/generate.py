"""Writes the small PyTorch checkpoints of fixtures/pt/ with torch.save, and what a reader must find
in them (expected.json): every tensor's dtype, shape and values, and the other values of each file.
Also the models spanprobe imports from PyTorch files:
- hf-gpt2-bin/, hf-llama-bin/: the Hugging Face fixtures fixtures/hf/gpt2-f32 and llama-bf16 (made by
  tools/hf_fixtures) loaded with transformers and saved as torch.save(model.state_dict()), the old
  pytorch_model.bin, beside their config.json (and hf-gpt2-bin-sharded/: GPT-2's in two shards with
  pytorch_model.bin.index.json): the import must give the same parameters as from
  model.safetensors (whose logits tools/hf_fixtures checks against transformers).
- nanogpt.pt (bias=True, the causal-mask buffer kept) and nanogpt-nobias-compiled.pt (bias=False,
  every key prefixed "_orig_mod." as torch.compile leaves it): nanoGPT's ckpt.pt layout, with the
  float64 logits of nanoGPT's forward pass (model.py's GPT, written out below) on fixed tokens.

Run in a virtual environment with the pinned torch (requirements.txt, checked by tools/pins.py; CI
never runs this):
    python3 -m venv .venv-ref && .venv-ref/bin/pip install -r tools/pt_fixtures/requirements.txt
    .venv-ref/bin/python tools/pt_fixtures/generate.py fixtures/pt
Deterministic: fixed seeds, fixed values (the archives' serialization ids are random; the tests
read values, never bytes).
"""
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(HERE))
from pins import check_versions  # noqa: E402

PINS = check_versions(os.path.join(HERE, "requirements.txt"), "generate.py") if __name__ == "__main__" else None

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def values(t):
    return [float(v) for v in t.detach().to(torch.float64).flatten().tolist()]


def main(out):
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    expected = {"torch": torch.__version__, "files": {}}

    # a state dict of the dtypes a reader must widen, a non-contiguous view and a scalar
    base = torch.randn(4, 6, generator=g)
    state = {
        "f32": torch.randn(3, 5, generator=g),
        "f16": torch.randn(2, 3, generator=g).to(torch.float16),
        "bf16": torch.randn(2, 2, generator=g).to(torch.bfloat16),
        "f64": torch.randn(3, generator=g).to(torch.float64),
        "transposed": base.t(),            # shares base's storage, strides (1, 6)
        "rows": base[1:3],                 # an offset into the same storage
        "scalar": torch.tensor(2.5),
        "ids": torch.arange(5, dtype=torch.int64),
    }
    torch.save(state, os.path.join(out, "state.pt"))
    expected["files"]["state.pt"] = {
        name: {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "values": values(t)}
        for name, t in state.items()}

    # a nanoGPT-style ckpt.pt: model state dict, model_args, iter_num, best_val_loss (a tensor), config
    model = {
        "transformer.wte.weight": torch.randn(16, 8, generator=g),
        "transformer.h.0.attn.c_attn.weight": torch.randn(24, 8, generator=g),
        "transformer.h.0.attn.c_attn.bias": torch.randn(24, generator=g),
    }
    ckpt = {"model": model, "model_args": {"n_layer": 1, "n_head": 2, "n_embd": 8, "block_size": 32,
                                           "bias": True, "vocab_size": 16, "dropout": 0.0},
            "iter_num": 250, "best_val_loss": torch.tensor(1.875), "config": {"dataset": "shakespeare_char",
                                                                              "learning_rate": 0.001}}
    torch.save(ckpt, os.path.join(out, "ckpt.pt"))
    expected["files"]["ckpt.pt"] = {
        "model": {name: {"dtype": "float32", "shape": list(t.shape), "values": values(t)} for name, t in model.items()},
        "model_args": ckpt["model_args"], "iter_num": 250, "best_val_loss": 1.875}

    hf_bins(out, expected)
    nanogpt_checkpoints(out, expected, g)

    # malicious pickles inside a valid torch zip: each would create its marker file if executed
    for name, payload in malicious_payloads(out).items():
        path = os.path.join(out, name)
        torch.save({"x": torch.zeros(1)}, path)
        replace_pickle(path, payload)
    expected["malicious"] = sorted(malicious_payloads(out))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


def hf_bins(out, expected):
    import shutil
    from transformers import AutoModelForCausalLM
    repo = os.path.dirname(os.path.dirname(HERE))
    for name, source in (("hf-gpt2-bin", "gpt2-f32"), ("hf-llama-bin", "llama-bf16")):
        src, dst = os.path.join(repo, "fixtures", "hf", source), os.path.join(out, name)
        os.makedirs(dst, exist_ok=True)
        shutil.copy(os.path.join(src, "config.json"), dst)
        model = AutoModelForCausalLM.from_pretrained(src, dtype="auto")
        torch.save(model.state_dict(), os.path.join(dst, "pytorch_model.bin"))
        expected["hf_bins"] = expected.get("hf_bins", {})
        expected["hf_bins"][name] = {"same_as": "fixtures/hf/" + source,
                                     "keys": sorted(model.state_dict().keys())}
        if name == "hf-gpt2-bin":  # the same state dict in two shards with their index, as transformers shards it
            sharded = os.path.join(out, "hf-gpt2-bin-sharded")
            os.makedirs(sharded, exist_ok=True)
            shutil.copy(os.path.join(src, "config.json"), sharded)
            sd = model.state_dict()
            keys = sorted(sd)
            shards = {"pytorch_model-00001-of-00002.bin": keys[:len(keys) // 2],
                      "pytorch_model-00002-of-00002.bin": keys[len(keys) // 2:]}
            for shard, names in shards.items():
                torch.save({k: sd[k] for k in names}, os.path.join(sharded, shard))
            index = {"metadata": {"total_size": sum(t.numel() * t.element_size() for t in sd.values())},
                     "weight_map": {k: shard for shard, names in shards.items() for k in names}}
            with open(os.path.join(sharded, "pytorch_model.bin.index.json"), "w") as f:
                json.dump(index, f, indent=2, sort_keys=True)
                f.write("\n")


def nanogpt_forward(sd, args, idx):
    """nanoGPT's GPT.forward (model.py), in float64, from a state dict."""
    p = {k: v.to(torch.float64) for k, v in sd.items()}
    C, H = args["n_embd"], args["n_head"]
    B, T = idx.shape

    def ln(x, name):
        return F.layer_norm(x, (C,), p[name + ".weight"], p.get(name + ".bias"), 1e-5)

    def linear(x, name):
        return F.linear(x, p[name + ".weight"], p.get(name + ".bias"))

    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][torch.arange(T)]
    for layer in range(args["n_layer"]):
        h = f"transformer.h.{layer}."
        q, k, v = linear(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + linear(y.transpose(1, 2).reshape(B, T, C), h + "attn.c_proj")
        x = x + linear(F.gelu(linear(ln(x, h + "ln_2"), h + "mlp.c_fc")), h + "mlp.c_proj")
    return F.linear(ln(x, "transformer.ln_f"), p["transformer.wte.weight"])


def nanogpt_checkpoints(out, expected, g):
    tokens = torch.randint(0, 40, (2, 12), generator=g)
    expected["nanogpt"] = {"tokens": tokens.tolist()}
    for name, bias, prefix in (("nanogpt.pt", True, ""), ("nanogpt-nobias-compiled.pt", False, "_orig_mod.")):
        args = {"n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 16, "bias": bias, "vocab_size": 40,
                "dropout": 0.0}
        C = args["n_embd"]
        sd = {"transformer.wte.weight": torch.randn(40, C, generator=g) * 0.5,
              "transformer.wpe.weight": torch.randn(16, C, generator=g) * 0.2}
        for layer in range(args["n_layer"]):
            h = f"transformer.h.{layer}."
            shapes = {"ln_1": None, "attn.c_attn": (3 * C, C), "attn.c_proj": (C, C), "ln_2": None,
                      "mlp.c_fc": (4 * C, C), "mlp.c_proj": (C, 4 * C)}
            for part, shape in shapes.items():
                rows = C if shape is None else shape[0]
                sd[h + part + ".weight"] = (1 + 0.1 * torch.randn(C, generator=g) if shape is None
                                            else torch.randn(*shape, generator=g) / shape[1] ** 0.5)
                if bias:
                    sd[h + part + ".bias"] = 0.1 * torch.randn(rows, generator=g)
            if bias:  # the causal mask model.py registers where flash attention is missing
                sd[h + "attn.bias"] = torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16)
        sd["transformer.ln_f.weight"] = 1 + 0.1 * torch.randn(C, generator=g)
        if bias:
            sd["transformer.ln_f.bias"] = 0.1 * torch.randn(C, generator=g)
        sd["lm_head.weight"] = sd["transformer.wte.weight"]  # tied, one storage
        logits = nanogpt_forward(sd, args, tokens)
        ckpt = {"model": {prefix + k: v for k, v in sd.items()}, "model_args": args, "iter_num": 5000,
                "best_val_loss": torch.tensor(1.5), "config": {"dataset": "openwebtext"}}
        torch.save(ckpt, os.path.join(out, name))
        expected["nanogpt"][name] = {"logits_shape": list(logits.shape), "logits": values(logits)}


class Call:
    """Pickles as a call of func(*args) (what __reduce__ makes), without running it."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def malicious_payloads(out):
    import builtins
    import subprocess
    marker = "/tmp/spanprobe-pt-marker"
    return {
        "evil_os_system.pt": pickle.dumps({"x": Call(os.system, (f"touch {marker}",))}, protocol=2),
        "evil_eval.pt": pickle.dumps(Call(builtins.eval, (f"open('{marker}', 'w')",)), protocol=2),
        "evil_popen.pt": pickle.dumps([1, {"a": (Call(subprocess.Popen, (["touch", marker],)),)}], protocol=2),
    }


def replace_pickle(path, payload):
    """Rewrites the archive with data.pkl replaced (stored, as torch writes it)."""
    import zipfile
    with zipfile.ZipFile(path) as z:
        entries = [(i, z.read(i.filename)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for info, data in entries:
            z.writestr(info, payload if info.filename.endswith("/data.pkl") else data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fixtures/pt")
