"""spanprobe.dump: a spanprobe activation dump (docs/formats.md, "Activation dump") from a PyTorch
model, such as a Hugging Face transformers one, with forward hooks.

Why hooks, not output_hidden_states: the last entry of a Hugging Face model's hidden_states is taken
after the final norm (GPT-2's ln_f, Llama's model.norm, ...), while spanprobe's h_L is the last
block's output *before* it. A normalized h_L silently changes every last-layer metric (on
SmolLM2-135M: cos(h_29, h_30) -0.039 instead of 0.718, RMS growth 15.8 instead of 389).

The hooks capture, on every forward pass:
  h_0          the input of block 0 (after any embedding scaling, positions or embedding norm)
  h_l          the output of block l-1, l = 1..L: h_L is the residual stream before the final norm
  FFN latents  the input of each block's down projection (the activation after the nonlinearity;
               SwiGLU: act(gate) * up)
  presums      post-norm-like blocks only, optional: the sums entering a block's normalizations

    import spanprobe
    spanprobe.capture(model, input_ids, "dump.h5")    # input_ids: LongTensor [batch, seq], no padding

then `spanprobe inspect dump.h5` and `spanprobe analyze dump.h5 --out report.h5`. The blocks are
found for the Hugging Face families spanprobe knows (the ModuleList of num_hidden_layers modules;
the down projection by its name in DOWN_PROJ_NAMES); any other model passes blocks= and
down_projs= explicitly. Batches are written as they are computed (streaming to disk), as float32 or
float16; float16 refuses a batch holding a value beyond its range (or any non-finite value) instead
of storing infinities. Needs torch, numpy and h5py. `python -m spanprobe.dump OUT_DIR
[--float16]` (transformers too) writes demo dumps of a tiny random Llama and GPT-2;
tools/dump_recipe/check_recipe.py checks this module numerically.
"""
import argparse
import os

import h5py
import numpy as np
import torch

# Where common architectures keep the FFN down projection (W_2), relative to a block.
DOWN_PROJ_NAMES = ("mlp.down_proj", "mlp.c_proj", "mlp.dense_4h_to_h", "mlp.fc2", "output.dense")


def find_blocks(model):
    """The transformer blocks: the first ModuleList holding config.num_hidden_layers modules."""
    n_layers = model.config.num_hidden_layers
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n_layers:
            return list(module)
    raise ValueError("no ModuleList of num_hidden_layers blocks found: pass blocks=")


def find_down_proj(block):
    for name in DOWN_PROJ_NAMES:
        try:
            return block.get_submodule(name)
        except AttributeError:
            pass
    raise ValueError(f"no FFN down projection among {DOWN_PROJ_NAMES}: pass down_projs=")


def _cpu(tensor):
    return tensor.detach().float().cpu()


class ActivationHooks:
    """Forward hooks that keep, after each forward pass, hidden[0..L] ([batch, seq, d] each),
    ffn[0..L-1] and presum[name][0..L-1] (None where a block has no such sum), as float32 on the CPU.
    A context manager: the hooks are removed on exit.

    blocks: the L blocks (found by find_blocks when None); down_projs: each block's down projection
    (found by find_down_proj when None; () for no FFN latents); presum_norms: {"sum_a": [...],
    "sum_z": [...]}, per block the normalization module whose input is that sum, None for blocks
    without it (a pre-norm model has none: leave presum_norms out)."""

    def __init__(self, model, blocks=None, down_projs=None, presum_norms=None):
        self.blocks = find_blocks(model) if blocks is None else list(blocks)
        n_layers = len(self.blocks)
        if down_projs is None:
            down_projs = [find_down_proj(block) for block in self.blocks]
        self.hidden = [None] * (n_layers + 1)
        self.ffn = [None] * len(down_projs)
        self.presum = {name: [None] * n_layers for name in (presum_norms or {})}

        def keep_h0(module, args, kwargs):  # h_0: the input of block 0, passed by position or by name
            self.hidden[0] = _cpu(args[0] if args else kwargs["hidden_states"])

        def keep_output(store, index):  # h_l: a block returns a tensor, or (older transformers) a tuple
            def hook(module, args, out):
                store[index] = _cpu(out[0] if isinstance(out, tuple) else out)
            return hook

        def keep_input(store, index):  # FFN latents and presums: the first input of a module
            def hook(module, args):
                store[index] = _cpu(args[0])
            return hook

        try:
            self.handles = [self.blocks[0].register_forward_pre_hook(keep_h0, with_kwargs=True)]
        except TypeError:  # torch before 2.0 (Debian's 1.13): pre-hooks see positional arguments only
            def keep_h0_positional(module, args):
                if not args:
                    raise ValueError("block 0 got its input by keyword: this torch cannot see it (torch >= 2.0 can)")
                self.hidden[0] = _cpu(args[0])
            self.handles = [self.blocks[0].register_forward_pre_hook(keep_h0_positional)]
        for layer, block in enumerate(self.blocks):
            self.handles.append(block.register_forward_hook(keep_output(self.hidden, layer + 1)))
        for layer, proj in enumerate(down_projs):
            self.handles.append(proj.register_forward_pre_hook(keep_input(self.ffn, layer)))
        for name, norms in (presum_norms or {}).items():
            for layer, norm in enumerate(norms):
                if norm is not None:
                    self.handles.append(norm.register_forward_pre_hook(keep_input(self.presum[name], layer)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()


def _create(f, name, n_layers, rows, width, dtype):
    """A [n_layers, rows, width] dataset (n_layers None: [rows, width]) chunked one layer at a time,
    about 1 MiB per chunk, NaN where never written (as spanprobe's own writer does)."""
    chunk_rows = max(1, min(rows, (1 << 18) // width))
    if n_layers is None:
        return f.create_dataset(name, (rows, width), dtype, chunks=(chunk_rows, width), fillvalue=np.nan)
    return f.create_dataset(name, (n_layers, rows, width), dtype, chunks=(1, chunk_rows, width), fillvalue=np.nan)


def _create_arrays(f, hooks, presum_norms, vocab_size, logits, dtype):
    """/config and every array, once the hooks have seen a batch (which gives d_model and d_ff)."""
    n_layers, d_model = len(hooks.blocks), hooks.hidden[0].shape[-1]
    d_ff = hooks.ffn[0].shape[-1] if hooks.ffn else 0
    batch, seq = f["tokens"].shape
    rows = batch * seq
    config = dict(n_layers=n_layers, d_model=d_model, n_streams=1, d_ff=d_ff, vocab_size=vocab_size,
                  batch=batch, seq_len=seq)
    for key, value in config.items():
        f.require_group("config").attrs[key] = np.int64(value)
    arrays = {"hidden/0": _create(f, "hidden/0", n_layers + 1, rows, d_model, dtype)}
    if d_ff:
        arrays["ffn_latent"] = _create(f, "ffn_latent", n_layers, rows, d_ff, dtype)
    for name, norms in (presum_norms or {}).items():
        # /presum/<name>: [L, rows, d_model], with the attribute "present" (int32 [L]) on the dataset:
        # 1 for the blocks that have this sum; the other blocks' rows stay NaN and are never read.
        arrays[f"presum/{name}"] = _create(f, f"presum/{name}", n_layers, rows, d_model, dtype)
        arrays[f"presum/{name}"].attrs["present"] = np.array([norm is not None for norm in norms], np.int32)
    if logits:
        arrays["logits"] = _create(f, "logits", None, rows, vocab_size, dtype)
    return arrays


def _rows(tensor):
    return tensor.reshape(-1, tensor.shape[-1]).numpy()


FLOAT16_MAX = 65504.0


def _checked(values, dtype, what):
    """values as dtype; float16 refuses what it cannot hold (the dump would record inf)."""
    if dtype == np.float16:
        bad = ~np.isfinite(values) | (np.abs(values) > FLOAT16_MAX)
        if bad.any():
            worst = float(np.nanmax(np.abs(np.where(np.isfinite(values), values, np.inf))))
            raise ValueError(f"{what}: {int(bad.sum())} values beyond float16's range (max |value| {worst:g} > "
                             f"{FLOAT16_MAX:g}, or not finite): write this dump as float32")
    return values.astype(dtype)


def capture(model, input_ids, path, batch_size=8, dtype=np.float32, logits=False, source=None,
            blocks=None, down_projs=None, presum_norms=None, vocab_size=None):
    """Runs model on input_ids (LongTensor [batch, seq], every sequence the same length) batch_size
    sequences at a time and writes each batch's activations as it goes; atomic (a temporary file
    renamed into place, removed on any failure). dtype: np.float32 or np.float16 (a value beyond
    float16's range is a ValueError naming the array and layer); logits: also write
    model(...).logits; blocks, down_projs, presum_norms: as for ActivationHooks; vocab_size: the
    model's (a Hugging Face model's config says it; any other model passes it)."""
    if vocab_size is None:
        vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
        if vocab_size is None:
            raise ValueError("the model has no config.vocab_size: pass vocab_size=")
    tokens = input_ids.cpu().numpy().astype(np.int32)
    batch, seq = tokens.shape
    model.eval()
    hooks = ActivationHooks(model, blocks, down_projs, presum_norms)
    if source is None:
        source = f"spanprobe.capture: {type(model).__name__}, forward hooks (h_L before the final norm)"
    tmp = path + ".tmp"
    try:
        with hooks, torch.no_grad(), h5py.File(tmp, "w") as f:
            f.attrs["format"] = "spanprobe-activations"
            f.attrs["format_version"] = "1.0"
            f.attrs["source"] = source
            f.create_dataset("tokens", data=tokens)
            arrays = None
            for start in range(0, batch, batch_size):
                out = model(input_ids[start:start + batch_size])
                if arrays is None:
                    arrays = _create_arrays(f, hooks, presum_norms, vocab_size, logits, dtype)
                r0, r1 = start * seq, min(batch, start + batch_size) * seq
                for layer, h in enumerate(hooks.hidden):
                    arrays["hidden/0"][layer, r0:r1] = _checked(_rows(h), dtype, f"h_{layer}")
                for layer, latent in enumerate(hooks.ffn):
                    arrays["ffn_latent"][layer, r0:r1] = _checked(_rows(latent), dtype, f"ffn_latent {layer}")
                for name, sums in hooks.presum.items():
                    for layer, s in enumerate(sums):
                        if s is not None:
                            arrays[f"presum/{name}"][layer, r0:r1] = _checked(_rows(s), dtype, f"{name} {layer}")
                if logits:
                    out = getattr(out, "logits", out)  # a Hugging Face output, or the logits themselves
                    arrays["logits"][r0:r1] = _checked(_rows(out.float().cpu()), dtype, "logits")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def tiny_models(seed=0):
    """A tiny random Llama (RMSNorm, SwiGLU, RoPE) and GPT-2 (LayerNorm, GELU, learned positions)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=8, intermediate_size=16, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64))
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=8, n_inner=16, n_layer=2, n_head=2, n_positions=64,
                                      bos_token_id=0, eos_token_id=0))
    return {"llama": llama, "gpt2": gpt2}


def main():
    parser = argparse.ArgumentParser(description="demo dumps of a tiny random Llama and GPT-2")
    parser.add_argument("out_dir")
    parser.add_argument("--float16", action="store_true", help="store the activations as float16")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=24)
    args = parser.parse_args()
    import transformers  # the demo's models only: write_dump takes any PyTorch model

    os.makedirs(args.out_dir, exist_ok=True)
    ids = torch.randint(0, 64, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    for name, model in tiny_models().items():
        path = os.path.join(args.out_dir, f"{name}.h5")
        capture(model, ids, path, dtype=np.float16 if args.float16 else np.float32,
                source=f"spanprobe.capture demo: tiny random {name}, seed 0; "
                       f"torch {torch.__version__}, transformers {transformers.__version__}")
        print(path)


if __name__ == "__main__":
    main()
