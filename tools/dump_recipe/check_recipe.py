"""Checks spanprobe.capture (python/spanprobe/dump.py) numerically on tiny random models, and
spanprobe on its dumps.

    python tools/dump_recipe/check_recipe.py [--spanprobe build/spanprobe] [--out DIR]

For a Llama (RMSNorm, SwiGLU), a GPT-2 (LayerNorm, GELU) and a BERT (post-LN: every block has
presums), with random norm gains and biases (as a trained model has, so a final norm changes h_L):
  - h_L equals the input of the final norm (model.norm / ln_f), taken by a separate pre-hook, and
    h_1..h_{L-1} equal output_hidden_states' entries;
  - the FFN latents equal act(gate_proj x) * up_proj x (Llama) and act(c_fc x) (GPT-2), recomputed by
    hand from each MLP's input;
  - BERT's presums: the output LayerNorm of block l applied to sum_z[l] gives h_{l+1}, and sum_a of
    the block left out (present = 0) is NaN;
  - with --spanprobe: `inspect` passes every dump without a warning, warns on the same models written
    the old way (output_hidden_states, h_L after the final norm), and `analyze` reads every dump.
Exits 1 on the first failed check.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch
import transformers
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "python"))
from spanprobe.dump import capture  # noqa: E402

D, LAYERS, VOCAB, BATCH, SEQ = 32, 3, 128, 8, 32


def randomize_norms(model, generator):
    """Gains exp(N(0, 0.5^2)) and biases N(0, 0.5^2) on every norm, like a trained model's."""
    with torch.no_grad():
        for module in model.modules():
            if "Norm" in type(module).__name__ and getattr(module, "weight", None) is not None:
                module.weight.copy_(torch.exp(0.5 * torch.randn(module.weight.shape, generator=generator)))
                if getattr(module, "bias", None) is not None:
                    module.bias.copy_(0.5 * torch.randn(module.bias.shape, generator=generator))
    return model


def models():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=D, intermediate_size=2 * D,
                                         num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=SEQ))
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=D, n_layer=LAYERS, n_head=4, n_positions=SEQ,
                                      bos_token_id=0, eos_token_id=0))
    bert = BertModel(BertConfig(vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=4,
                                intermediate_size=2 * D, max_position_embeddings=SEQ))
    return {name: randomize_norms(model, g).eval() for name, model in
            (("llama", llama), ("gpt2", gpt2), ("bert", bert))}


def expect(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        sys.exit(1)


def close(a, b, what, tol=1e-5):
    err = float(np.max(np.abs(a - b)) / max(1e-30, float(np.max(np.abs(b)))))
    expect(err <= tol, f"{what}: max |diff| / max |ref| = {err:.1e}")


def captured(model, ids, module_of):
    """The first input of module_of(model) on a forward pass, as float32 numpy [rows, width]."""
    kept = []
    handle = module_of(model).register_forward_pre_hook(lambda m, args: kept.append(args[0].detach().float()))
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
    handle.remove()
    return kept[0].reshape(-1, kept[0].shape[-1]), out


def check_llama_gpt2(name, model, ids, path):
    final_norm = {"llama": lambda m: m.model.norm, "gpt2": lambda m: m.transformer.ln_f}[name]
    blocks = {"llama": lambda m: m.model.layers, "gpt2": lambda m: m.transformer.h}[name]
    pre_norm, out = captured(model, ids, final_norm)
    with h5py.File(path, "r") as f:
        hidden, latent = f["hidden/0"][:], f["ffn_latent"][:]
        expect("presum" not in f, f"{name}: no /presum (a pre-norm model has no sums entering its norms)")
    close(hidden[-1], pre_norm.numpy(), f"{name}: h_L = the input of the final norm")
    for layer in range(LAYERS):
        close(hidden[layer], out.hidden_states[layer].reshape(-1, D).numpy(),
              f"{name}: h_{layer} = hidden_states[{layer}]")
    for layer in range(LAYERS):
        x, _ = captured(model, ids, lambda m: blocks(m)[layer].mlp)
        with torch.no_grad():
            mlp = blocks(model)[layer].mlp
            want = mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x) if name == "llama" else mlp.act(mlp.c_fc(x))
        close(latent[layer], want.numpy(), f"{name}: FFN latent {layer} recomputed by hand")


def check_bert(model, ids, path):
    with h5py.File(path, "r") as f:
        hidden, sum_a, sum_z = f["hidden/0"][:], f["presum/sum_a"], f["presum/sum_z"]
        expect(list(sum_a.attrs["present"]) == [1, 0, 1] and sum_a.attrs["present"].dtype == np.int32,
               "bert: /presum/sum_a attr present = int32 [1, 0, 1]")
        expect(bool(np.isnan(sum_a[1]).all()), "bert: sum_a rows of the block without it are NaN")
        for layer in range(LAYERS):
            norm = model.encoder.layer[layer].output.LayerNorm
            with torch.no_grad():
                got = norm(torch.from_numpy(sum_z[layer])).numpy()
            close(got, hidden[layer + 1], f"bert: LayerNorm(sum_z[{layer}]) = h_{layer + 1}")


def write_old_way(path, model, ids):
    """The recipe this one replaces: hidden = output_hidden_states, whose last entry is after the final norm."""
    with torch.no_grad():
        hidden = torch.stack(model(ids, output_hidden_states=True).hidden_states).numpy()
    with h5py.File(path, "w") as f:
        f.attrs["format"], f.attrs["format_version"] = "spanprobe-activations", "1.0"
        config = dict(n_layers=LAYERS, d_model=D, n_streams=1, d_ff=0, vocab_size=VOCAB, batch=BATCH, seq_len=SEQ)
        for key, value in config.items():
            f.require_group("config").attrs[key] = np.int64(value)
        f.create_dataset("tokens", data=ids.numpy().astype(np.int32))
        f.create_dataset("hidden/0", data=hidden.reshape(LAYERS + 1, BATCH * SEQ, D))


def run_spanprobe(binary, *args):
    proc = subprocess.run([binary, *args], capture_output=True, text=True)
    return proc.returncode, proc.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spanprobe", help="the spanprobe binary, to run inspect and analyze on the dumps")
    parser.add_argument("--out", help="directory for the dumps [a temporary one]")
    args = parser.parse_args()
    out_dir = args.out or tempfile.mkdtemp(prefix="dump_recipe.")
    os.makedirs(out_dir, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, h5py {h5py.__version__}; "
          f"dumps in {out_dir}")
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(2))
    for name, model in models().items():
        path = os.path.join(out_dir, f"{name}.h5")
        if name == "bert":  # post-LN: sum_a enters each block's attention LayerNorm, sum_z its output one
            layers = model.encoder.layer  # block 1 left out of sum_a, as a block without that sum
            presum_norms = {"sum_a": [layers[0].attention.output.LayerNorm, None,
                                      layers[2].attention.output.LayerNorm],
                            "sum_z": [layer.output.LayerNorm for layer in layers]}
            capture(model, ids, path, batch_size=3, presum_norms=presum_norms)
            check_bert(model, ids, path)
        else:
            capture(model, ids, path, batch_size=3, logits=True)
            check_llama_gpt2(name, model, ids, path)
        if not args.spanprobe:
            continue
        rc, err = run_spanprobe(args.spanprobe, "inspect", path)
        expect(rc == 0 and "warning" not in err, f"{name}: spanprobe inspect passes, no warning")
        rc, err = run_spanprobe(args.spanprobe, "analyze", path, "--out", os.path.join(out_dir, f"{name}-report.h5"))
        expect(rc == 0, f"{name}: spanprobe analyze reads it" + ("" if rc == 0 else f" (exit {rc}: {err.strip()})"))
        if name != "bert":
            old = os.path.join(out_dir, f"{name}-old.h5")
            write_old_way(old, model, ids)
            rc, err = run_spanprobe(args.spanprobe, "inspect", old)
            expect(rc == 0 and "looks normalized" in err, f"{name}: spanprobe inspect warns on the old-way dump")
    print("all checks passed")


if __name__ == "__main__":
    main()
