#!/usr/bin/env python3
"""Builds fixtures/hf: tiny random Hugging Face checkpoints of every architecture spanprobe's importer
reads, saved with transformers' save_pretrained, plus reference outputs (float64 logits, hidden
states, loss and gradient norms from the independent float64 forward in forward64.py, and
transformers' own float32 eager forward as the cross-check). See README.md for the layout.

Deterministic: fixed seeds, one CPU thread; running it twice gives byte-identical output.
Usage: generate.py [--out DIR]   (default: fixtures/hf under the repository root)
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(HERE))
from pins import check_versions  # noqa: E402

PINS = check_versions(os.path.join(HERE, "requirements.txt")) if __name__ == "__main__" else None

import copy  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # tokenizers' BPE trainer: one thread
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

sys.path.insert(0, HERE)
import forward64  # noqa: E402

SEED = 20260501          # base seed; fixture k uses SEED + k (k fixed per fixture in FIXTURES)
TOKENS_SEED = 1234       # the [2, 24] token batch
BATCH, SEQ = 2, 24
TOL_LOGITS = 1e-4        # max|f64 - hf_f32| <= TOL_LOGITS * max|logits|
TOL_LOGITS_F64 = 1e-12   # logits, loss, gradient norms against transformers' modules patched to float64
TOL_GRAD = 1e-3          # relative, per tensor, f64 vs hf_f32 gradient norms
TOL_HIDDEN = 1e-4        # relative to max|h_l|, f64 vs hf_f32 residual stream
SENS_MIN = {"gelu_variant_swapped": 1e-7}  # tanh vs erf GELU differ by < 1e-3 on activations
SHARD_SIZE = "48KB"
QK_GAIN = 1.6            # q/k projections: std = QK_GAIN / sqrt(fan_in) (non-uniform attention)
GAIN = 1.0               # other projections: std = GAIN / sqrt(fan_in)
EMBED_STD = 0.4          # untied token embeddings
TIED_EMBED_GAIN = 1.0    # tied embeddings (also the head): std = TIED_EMBED_GAIN / sqrt(d), O(1) logits
GEMMA_EMBED_STD = 0.2    # Gemma family (tied; times sqrt(d) in the forward)
POS_STD = 0.2            # GPT-2 learned positions
NORM_STD = 0.2           # norm gains 1 + NORM_STD*N(0,1) (Gemma's (1 + w): w = NORM_STD*N(0,1))
QK_NORM_GAIN = 1.6       # q/k norm gains QK_NORM_GAIN + NORM_STD*N(0,1) (Gemma: w = QK_NORM_GAIN - 1 + ...)
BIAS_STD = 0.1

WINDOW_SEMANTICS = ("transformers 5.23 masking_utils.sliding_window_overlay: kv_idx > q_idx - sliding_window, "
                    "with the causal kv_idx <= q_idx: query i sees key j iff 0 <= i - j < W "
                    "(itself and the W-1 previous positions)")

CORPUS = """\
The quick brown fox jumps over the lazy dog. A tiny model reads a tiny text and learns a few merges.
Spanprobe analyzes transformer checkpoints: it reads the weights, runs the model in double precision,
and compares every layer against a reference. The reference is computed twice, once by the library
that saved the checkpoint and once by an independent forward pass written from the equations.
When both agree, the checkpoint is understood; when they differ, one of them has a bug, and the
tests say which. Rotary embeddings rotate pairs of dimensions by an angle that grows with position.
Sliding windows hide keys that are too far back. Soft-capping squashes large scores with tanh.
Norms come in two flavours: layer norm subtracts the mean, RMS norm does not. Some models scale
the embedding by the square root of the width; others learn absolute positions. The head may share
its matrix with the embedding or keep its own. Attention heads may share keys and values in groups.
In the beginning the weights are random, and the logits are only noise; that is fine for a test,
because a test only needs the same noise on both sides. 0123456789 +-*/=<>()[]{} "quoted" 'single'
the the the and and and of of of to to to in in in is is is that that that it it it for for for
"""
SENTENCE = "Spanprobe reads tiny checkpoints and compares them in double precision."


# ------------------------------------------------------------------------------------------------
# fixture definitions


def fixtures():
    """Every model to build: name (directory stem), seed index, transformers config class and kwargs,
    model class, storages, legacy-keys copy, tokenizer, features."""
    T = transformers
    eager = {"attn_implementation": "eager"}
    L = []
    L.append(dict(
        name="gpt2", k=0, config=T.GPT2Config, model=T.GPT2LMHeadModel, tokenizer="gpt2",
        kwargs=dict(n_embd=48, n_layer=2, n_head=4, n_inner=96, n_positions=32, activation_function="gelu_new",
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, summary_first_dropout=0.0,
                    tie_word_embeddings=True),
        storages=["f32", "bf16", "sharded"],
        features=["conv1d_weights_in_out", "fused_qkv_c_attn_q|k|v", "biases_everywhere", "layernorm_with_bias",
                  "gelu_new_tanh", "learned_positions", "tied_head"]))
    L.append(dict(
        name="gpt_neox-parallel", k=1, config=T.GPTNeoXConfig, model=T.GPTNeoXForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    hidden_act="gelu", use_parallel_residual=True, attention_bias=True, tie_word_embeddings=False,
                    max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
        storages=["f32", "bf16"], legacy="gpt_neox",
        features=["parallel_residual", "partial_rotary_0.25", "gelu_exact_erf", "biases", "layernorm_with_bias",
                  "untied_head_embed_out", "fused_qkv_per_head_[H,3,hd]"]))
    L.append(dict(
        name="gpt_neox-sequential", k=2, config=T.GPTNeoXConfig, model=T.GPTNeoXForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    hidden_act="gelu", use_parallel_residual=False, attention_bias=True, tie_word_embeddings=False,
                    max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 20000.0, "partial_rotary_factor": 0.5}),
        storages=["f32"],
        features=["sequential_residual", "partial_rotary_0.5", "rope_theta_20000", "gelu_exact_erf", "biases",
                  "layernorm_with_bias", "untied_head_embed_out", "fused_qkv_per_head_[H,3,hd]"]))
    L.append(dict(
        name="llama", k=3, config=T.LlamaConfig, model=T.LlamaForCausalLM, tokenizer="llama",
        kwargs=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    intermediate_size=64, tie_word_embeddings=False, max_position_embeddings=128,
                    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 64}),
        storages=["f32", "bf16", "sharded"], legacy="llama",
        features=["gqa_4q_2kv", "explicit_head_dim_16_ne_d/H_8", "rope_theta_500000",
                  "llama3_rope_scaling_all_three_regimes", "untied_head", "rmsnorm", "swiglu"]))
    L.append(dict(
        name="llama-mqa-tied", k=4, config=T.LlamaConfig, model=T.LlamaForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                    intermediate_size=64, tie_word_embeddings=True, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        storages=["f32"],
        features=["mqa_1kv", "tied_head", "default_rope", "rmsnorm", "swiglu"]))
    L.append(dict(
        name="mistral", k=5, config=T.MistralConfig, model=T.MistralForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=64, sliding_window=8, tie_word_embeddings=False, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        storages=["f32"],
        features=["sliding_window_8_all_layers", "gqa_4q_2kv", "untied_head", "rmsnorm", "swiglu"]))
    L.append(dict(
        name="qwen2", k=6, config=T.Qwen2Config, model=T.Qwen2ForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=64, tie_word_embeddings=True, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        storages=["f32"],
        features=["qkv_bias_no_o_bias", "gqa_4q_2kv", "tied_head", "rope_theta_1e6", "rmsnorm", "swiglu"]))
    L.append(dict(
        name="qwen3", k=7, config=T.Qwen3Config, model=T.Qwen3ForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=16, intermediate_size=64, tie_word_embeddings=False, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        storages=["f32", "bf16"],
        features=["per_head_qk_rmsnorm", "explicit_head_dim_16_ne_d/H_8", "gqa_4q_2kv", "untied_head", "rmsnorm",
                  "swiglu"]))
    L.append(dict(
        name="olmo2", k=8, config=T.Olmo2Config, model=T.Olmo2ForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=64, tie_word_embeddings=False, max_position_embeddings=64,
                    rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        storages=["f32"],
        features=["qk_rmsnorm_over_whole_projection", "post_attention_and_post_feedforward_norms_only",
                  "no_pre_norms", "gqa_4q_2kv", "untied_head", "swiglu"]))
    L.append(dict(
        name="gemma", k=9, config=T.GemmaConfig, model=T.GemmaForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                    head_dim=16, intermediate_size=64, hidden_act="gelu_pytorch_tanh", tie_word_embeddings=True,
                    max_position_embeddings=64, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        storages=["f32"],
        features=["rmsnorm_1_plus_w", "embedding_times_sqrt_d", "geglu_tanh", "explicit_head_dim_16_ne_d/H_8",
                  "mqa_1kv", "tied_head"]))
    L.append(dict(
        name="gemma2", k=10, config=T.Gemma2Config, model=T.Gemma2ForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=16, intermediate_size=64, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                    max_position_embeddings=64, query_pre_attn_scalar=8, attn_logit_softcapping=5.0,
                    final_logit_softcapping=3.0, sliding_window=6,
                    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        storages=["f32", "bf16"],
        features=["pre_and_post_norms_sandwich", "attn_logit_softcap_5", "final_logit_softcap_3",
                  "query_pre_attn_scalar_8_ne_head_dim_16", "sliding_window_6_alternating", "rmsnorm_1_plus_w",
                  "embedding_times_sqrt_d", "geglu_tanh", "gqa_4q_2kv", "tied_head"]))
    L.append(dict(
        name="gemma3", k=11, config=T.Gemma3TextConfig, model=T.Gemma3ForCausalLM,
        kwargs=dict(vocab_size=128, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=16, intermediate_size=64, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                    max_position_embeddings=64, query_pre_attn_scalar=12, sliding_window=5,
                    layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
                    rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
        storages=["f32"], legacy="gemma3",
        features=["per_head_qk_rmsnorm_1_plus_w", "local_rope_theta_1e4_global_1e6", "linear_rope_factor_4_global_only",
                  "layer_types_S_S_F_S_window_5", "query_pre_attn_scalar_12_ne_head_dim_16",
                  "pre_and_post_norms_sandwich", "rmsnorm_1_plus_w", "embedding_times_sqrt_d", "geglu_tanh",
                  "gqa_4q_2kv", "tied_head"]))
    for f in L:
        f["kwargs"].update(eager)
        f.setdefault("legacy", None)
        f.setdefault("tokenizer", None)
    return L


# ------------------------------------------------------------------------------------------------
# tokenizer


def train_tokenizer(style, vocab_size=320):
    """A byte-level BPE trained on CORPUS: GPT-2 style (one <|endoftext|> special, id 0, no template)
    or Llama style (<s> = 0, </s> = 1, a template that prepends <s>)."""
    specials = ["<|endoftext|>"] if style == "gpt2" else ["<s>", "</s>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS.splitlines(), trainer)
    if style == "gpt2":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        bos = eos = "<|endoftext|>"
    else:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", 0)])
        bos, eos = "<s>", "</s>"
    if tok.get_vocab_size() != vocab_size:
        raise RuntimeError(f"tokenizer trained to {tok.get_vocab_size()} tokens, wanted {vocab_size}")
    return tok, bos, eos


def save_tokenizer(tok, bos, eos, directory):
    tok.save(os.path.join(directory, "tokenizer.json"))
    config = {"bos_token": bos, "eos_token": eos, "model_max_length": SEQ * 2,
              "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
    write_json(os.path.join(directory, "tokenizer_config.json"), config, indent=2)


# ------------------------------------------------------------------------------------------------
# weights


def init_weights(model, seed, gemma_norms):
    """Overwrite every parameter from one seeded generator, in sorted name order: norm gains
    1 + 0.2 N(0,1) (Gemma: w = 0.2 N(0,1) for its (1 + w)), biases 0.1 N(0,1), projections
    N(0, gain^2 / fan_in) with a larger gain on q and k so attention is far from uniform."""
    gen = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())  # tied heads appear once, under the embedding's name
    d = model.config.hidden_size
    for name in sorted(params):
        p = params[name]
        z = torch.randn(p.shape, generator=gen, dtype=torch.float32)
        short = name.rsplit(".", 1)[-1]
        is_norm = ("norm" in name or ".ln_" in name) and p.dim() == 1
        if is_norm and short == "weight":
            center = QK_NORM_GAIN if ("q_norm" in name or "k_norm" in name) else 1.0
            val = center - (1.0 if gemma_norms else 0.0) + NORM_STD * z
        elif short == "bias":
            val = BIAS_STD * z
        elif "wpe" in name:
            val = POS_STD * z
        elif any(s in name for s in ("wte", "embed_tokens", "embed_in")):
            if gemma_norms:
                val = GEMMA_EMBED_STD * z
            elif model.config.tie_word_embeddings:
                val = TIED_EMBED_GAIN / math.sqrt(d) * z
            else:
                val = EMBED_STD * z
        elif "c_attn" in name:  # GPT-2 Conv1D [in, 3d]: columns q | k | v
            val = GAIN / math.sqrt(p.shape[0]) * z
            val[:, : 2 * d] *= QK_GAIN / GAIN
        elif p.dim() == 2 and any(s in name for s in ("c_proj", "c_fc")):  # Conv1D [in, out]
            val = GAIN / math.sqrt(p.shape[0]) * z
        elif "query_key_value" in name:  # NeoX rows [H, 3, hd]
            H = model.config.num_attention_heads
            val = (GAIN / math.sqrt(p.shape[1]) * z).reshape(H, 3, -1, p.shape[1])
            val[:, :2] *= QK_GAIN / GAIN
            val = val.reshape(p.shape)
        elif p.dim() == 2:  # nn.Linear [out, in]
            gain = QK_GAIN if ("q_proj" in name or "k_proj" in name) else GAIN
            val = gain / math.sqrt(p.shape[1]) * z
        else:
            raise RuntimeError(f"no init rule for {name} {tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(val)


# ------------------------------------------------------------------------------------------------
# output helpers


def write_json(path, obj, indent=1):
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=indent, sort_keys=False) + "\n")


def write_raw(path, array, dtype):
    a = np.ascontiguousarray(array.detach().cpu().numpy().astype(dtype))
    a.astype(a.dtype.newbyteorder("<")).tofile(path)


def dir_sizes(path):
    return {name: os.path.getsize(os.path.join(path, name)) for name in sorted(os.listdir(path))}


def hf_saved_name(model_type, name):
    """transformers module parameter name -> name in the saved safetensors (NeoX's head is loaded
    as lm_head but saved as embed_out)."""
    if model_type == "gpt_neox" and name.startswith("lm_head."):
        return "embed_out." + name[len("lm_head."):]
    return name


def decoder_layers(model):
    for path in ("model.layers", "transformer.h", "gpt_neox.layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
            return obj
        except AttributeError:
            continue
    raise RuntimeError("no decoder layers found")


class Float64Everywhere:
    """Context in which transformers' own modules compute in float64: the explicit float32 casts
    (RMSNorm's .to(torch.float32), RoPE's .float(), softmax(dtype=torch.float32)) become float64.
    Used for a second cross-check of forward64 (`rel_logits_f64_vs_hf_f64_patched`), on top of the
    plain float32 one; the patches are undone on exit."""

    def __enter__(self):
        self.saved = (torch.Tensor.to, torch.Tensor.float, torch.nn.functional.softmax, torch.softmax)
        to, _, softmax, _ = self.saved
        f32, f64 = torch.float32, torch.float64

        def to64(t, *args, **kwargs):
            args = tuple(f64 if a is f32 else a for a in args)
            if kwargs.get("dtype") is f32:
                kwargs["dtype"] = f64
            return to(t, *args, **kwargs)

        torch.Tensor.to = to64
        torch.Tensor.float = lambda t, *a, **k: to(t, f64)
        torch.nn.functional.softmax = lambda x, dim=None, _stacklevel=3, dtype=None: softmax(x, dim=dim)
        torch.softmax = lambda x, dim=None, dtype=None: softmax(x, dim=dim)
        return self

    def __exit__(self, *exc):
        torch.Tensor.to, torch.Tensor.float, torch.nn.functional.softmax, torch.softmax = self.saved
        return False


def hf_float64_logits(model_dir, model_class, arch, tokens):
    """transformers' forward with every computation in float64 (see Float64Everywhere); the RoPE
    inverse-frequency buffers, computed in float32 at construction, are replaced by forward64's
    float64 ones and the Gemma embedding scale by the float64 sqrt(d)."""
    hf = model_class.from_pretrained(model_dir, dtype=torch.float64, attn_implementation="eager").eval()
    for mod in hf.modules():
        if "RotaryEmbedding" in type(mod).__name__:
            for lt in set(arch["layer_types"]):
                inv, _ = forward64.inv_freq64(arch["rope"][lt], arch["head_dim"])
                if hasattr(mod, f"{lt}_inv_freq"):
                    setattr(mod, f"{lt}_inv_freq", inv)
                else:
                    mod.inv_freq = inv
        if isinstance(getattr(mod, "embed_scale", None), torch.Tensor):
            mod.embed_scale = torch.tensor(mod.scalar_embed_scale, dtype=torch.float64)
    for module in hf.modules():
        if isinstance(module, torch.nn.Embedding):
            module.padding_idx = None
    with Float64Everywhere():
        out = hf(input_ids=tokens, labels=tokens)
        out.loss.backward()
    if out.logits.dtype != torch.float64 or out.loss.dtype != torch.float64:
        raise RuntimeError(f"{model_dir}: patched transformers forward not in float64")
    grads = {hf_saved_name(arch["model_type"], n): float(p.grad.norm()) for n, p in hf.named_parameters()}
    return out.logits.detach(), float(out.loss.detach()), grads


def relmax(a, b):
    return float((a - b).abs().max() / b.abs().max())


# ------------------------------------------------------------------------------------------------
# references


def reference(model_dir, model_class, tokens, targets):
    """Float64 reference (forward64) and transformers float32 eager cross-check of one saved model."""
    m = forward64.Model(model_dir, requires_grad=True)
    logits64, hidden64, diag = m.forward(tokens)
    loss64 = forward64.cross_entropy(logits64, targets)
    names = sorted(m.W)
    grads = torch.autograd.grad(loss64, [m.W[n] for n in names])
    gn64 = {n: float(g.norm()) for n, g in zip(names, grads)}

    hf, info = model_class.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                           output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        raise RuntimeError(f"{model_dir}: loading problems {problems}")
    hf.eval()
    # nn.Embedding(padding_idx=pad_token_id) zeroes the gradient of that row (the forward reads the
    # stored row as is); the references are the mathematical gradient, so compare against that.
    for module in hf.modules():
        if isinstance(module, torch.nn.Embedding):
            module.padding_idx = None
    captured = []
    hooks = [layer.register_forward_hook(lambda mod, inp, out: captured.append(out[0] if isinstance(out, tuple) else out))
             for layer in decoder_layers(hf)]
    out = hf(input_ids=tokens, labels=tokens, output_hidden_states=True)
    for h in hooks:
        h.remove()
    out.loss.backward()
    gnhf = {}
    for name, p in hf.named_parameters():
        gnhf[hf_saved_name(m.arch["model_type"], name)] = float(p.grad.norm())
    if set(gnhf) != set(gn64):
        raise RuntimeError(f"{model_dir}: parameter sets differ: {sorted(set(gnhf) ^ set(gn64))}")
    gnhf = {n: gnhf[n] for n in names}
    logits_hf = out.logits.detach()
    hidden_hf = torch.stack([out.hidden_states[0].detach()] + [c.detach() for c in captured])

    l64 = logits64.detach()
    agree = {
        "max_abs_diff_logits_f64_vs_hf_f32": float((l64 - logits_hf.double()).abs().max()),
        "max_abs_logit_f64": float(l64.abs().max()),
    }
    agree["rel_logits"] = agree["max_abs_diff_logits_f64_vs_hf_f32"] / agree["max_abs_logit_f64"]
    agree["tolerance_rel_logits"] = TOL_LOGITS
    lhf64, losshf64, gnhf64 = hf_float64_logits(model_dir, model_class, m.arch, tokens)
    agree["rel_logits_f64_vs_hf_f64_patched"] = float((l64 - lhf64).abs().max() / l64.abs().max())
    agree["rel_loss_f64_vs_hf_f64_patched"] = abs(float(loss64.detach()) - losshf64) / float(loss64.detach())
    agree["max_rel_diff_grad_norm_f64_vs_hf_f64_patched"] = max(abs(gn64[n] - gnhf64[n]) / max(gn64[n], 1e-30)
                                                                for n in names)
    agree["tolerance_hf_f64_patched"] = TOL_LOGITS_F64
    agree["abs_diff_loss"] = abs(float(loss64.detach()) - float(out.loss.detach()))
    agree["max_rel_diff_grad_norm"] = max(abs(gn64[n] - gnhf[n]) / max(gn64[n], 1e-30) for n in names)
    agree["tolerance_rel_grad_norm"] = TOL_GRAD
    agree["max_rel_diff_hidden"] = max(relmax(hidden_hf[l].double(), hidden64[l].detach())
                                       for l in range(hidden64.shape[0]))
    if not agree["rel_logits"] <= TOL_LOGITS:
        raise RuntimeError(f"{model_dir}: logits disagree: {agree}")
    if not max(agree["rel_logits_f64_vs_hf_f64_patched"], agree["rel_loss_f64_vs_hf_f64_patched"],
               agree["max_rel_diff_grad_norm_f64_vs_hf_f64_patched"]) <= TOL_LOGITS_F64:
        raise RuntimeError(f"{model_dir}: logits disagree with transformers run in float64: {agree}")
    if not agree["max_rel_diff_grad_norm"] <= TOL_GRAD:
        raise RuntimeError(f"{model_dir}: gradient norms disagree: {agree}")
    if not agree["max_rel_diff_hidden"] <= TOL_HIDDEN:
        raise RuntimeError(f"{model_dir}: hidden states disagree: {agree}")
    if not agree["abs_diff_loss"] <= 1e-4:
        raise RuntimeError(f"{model_dir}: loss disagrees: {agree}")
    return dict(arch=m.arch, logits64=l64, hidden64=hidden64.detach(), loss64=float(loss64.detach()), gn64=gn64,
                logits_hf=logits_hf, loss_hf=float(out.loss.detach()), gnhf=gnhf, agree=agree, diag=diag)


def sensitivity(model_dir, tokens, base):
    """How much the float64 logits move when one feature of the architecture is switched off or
    changed: proof that each feature matters at these sizes (an importer that ignores it fails).
    Returns {variant: max|logits' - logits| / max|logits|}."""
    m = forward64.Model(model_dir)
    m.require_all_used = False
    a0 = m.arch
    variants = {}
    if "sliding_attention" in a0["layer_types"]:
        variants["sliding_window_off"] = lambda a: a.update(layer_types=["full_attention"] * a["n_layers"])
        variants["sliding_window_plus_1"] = lambda a: a.update(sliding_window=a["sliding_window"] + 1)
    if a0.get("attn_logit_softcap") is not None:
        variants["attn_softcap_off"] = lambda a: a.update(attn_logit_softcap=None)
    if a0.get("final_logit_softcap") is not None:
        variants["final_softcap_off"] = lambda a: a.update(final_logit_softcap=None)
    if a0["positions"] == "rope":
        used = {lt: a0["rope"][lt] for lt in set(a0["layer_types"])}
        if any(e["rope_type"] != "default" for e in used.values()):
            variants["rope_scaling_off"] = lambda a: a.update(rope={lt: dict(e, rope_type="default") for lt, e in a["rope"].items()})
        if any(e["partial_rotary_factor"] != 1.0 for e in used.values()):
            variants["full_rotary"] = lambda a: a.update(rope={lt: dict(e, partial_rotary_factor=1.0) for lt, e in a["rope"].items()})
        if len(used) == 2 and used["full_attention"]["rope_theta"] != used["sliding_attention"]["rope_theta"]:
            variants["local_rope_as_global"] = lambda a: a.update(rope=dict(a["rope"], sliding_attention=a["rope"]["full_attention"]))
        variants["rope_interleaved_pairs"] = lambda a: a.update(interleaved_rope=True)
    if a0.get("embed_scale") is not None:
        variants["embed_scale_off"] = lambda a: a.update(embed_scale=None)
    if a0["model_type"] in ("gemma2", "gemma3_text"):
        variants["scale_by_head_dim"] = lambda a: a.update(attn_scale=a["head_dim"] ** -0.5)
    if a0["norm"] == "rmsnorm_1p":
        variants["norm_gain_w_not_1_plus_w"] = lambda a: a.update(norm="rmsnorm")
    if a0["model_type"] == "gpt_neox":
        variants["parallel_residual_toggled"] = lambda a: a.update(block="pre" if a["block"] == "parallel" else "parallel")
    if a0["positions"] == "learned":
        variants["learned_positions_off"] = lambda a: a.update(positions="none")
    if a0["act"] in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
        variants["gelu_variant_swapped"] = lambda a: a.update(act="gelu" if a["act"] != "gelu" else "gelu_new")
    if a0["n_kv_heads"] not in (1, a0["n_heads"]):
        variants["kv_heads_tiled_not_grouped"] = lambda a: a.update(kv_tiled=True)
    out = {}
    with torch.no_grad():
        for name, change in variants.items():
            m.arch = copy.deepcopy(a0)
            change(m.arch)
            logits, _, _ = m.forward(tokens)
            out[name] = float((logits - base).abs().max() / base.abs().max())
    m.arch = a0
    return out


def summary(arch):
    """The architecture description as the ref/manifest record it (JSON-able)."""
    s = dict(arch)
    if arch["positions"] == "rope":
        s["rope"] = {lt: dict(e) for lt, e in arch["rope"].items() if lt in set(arch["layer_types"])}
        for lt, e in s["rope"].items():
            inv, rot = forward64.inv_freq64(e, arch["head_dim"])
            e["rotary_dims"] = rot
            if e["rope_type"] == "llama3":
                e["llama3_regimes"] = forward64.llama3_regimes(e, arch["head_dim"])
    else:
        s.pop("rope", None)
    return s


# ------------------------------------------------------------------------------------------------
# legacy config keys


def legacy_config(cfg, kind):
    """Rewrite a transformers 5 config.json to the older key names most published checkpoints carry."""
    cfg = dict(cfg)
    cfg["torch_dtype"] = cfg.pop("dtype")
    rp = cfg.pop("rope_parameters")
    if kind == "llama":
        cfg["rope_theta"] = rp["rope_theta"]
        cfg["rope_scaling"] = {k: v for k, v in rp.items() if k != "rope_theta"}
    elif kind == "gpt_neox":
        cfg["rotary_emb_base"] = rp["rope_theta"]
        cfg["rotary_pct"] = rp["partial_rotary_factor"]
        cfg["rope_scaling"] = None
    elif kind == "gemma3":
        full, slid = rp["full_attention"], rp["sliding_attention"]
        cfg["rope_theta"] = full["rope_theta"]
        cfg["rope_scaling"] = {k: v for k, v in full.items() if k != "rope_theta"}
        cfg["rope_local_base_freq"] = slid["rope_theta"]
        # layer_types -> the old integer pattern (layer i is global iff (i + 1) % pattern == 0)
        lt = cfg.pop("layer_types")
        cfg.pop("_sliding_window_pattern", None)
        pattern = 3
        assert lt == ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(len(lt))]
        cfg["sliding_window_pattern"] = pattern
    else:
        raise ValueError(kind)
    return dict(sorted(cfg.items()))


# ------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "fixtures", "hf"))
    args = ap.parse_args()
    final = os.path.abspath(args.out)
    if os.path.exists(final) and os.listdir(final) and not os.path.exists(os.path.join(final, "manifest.json")):
        sys.exit(f"generate.py: {final} exists and is not a fixture directory (no manifest.json); not touching it")
    out = final + ".tmp"  # built here, moved into place only when every check has passed
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "ref"))

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    manifest = {
        "generator": "tools/hf_fixtures/generate.py",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "safetensors": safetensors.__version__,
                     "tokenizers": tokenizers.__version__, "numpy": np.__version__},
        "pins": PINS,
        "seed": SEED, "tokens_seed": TOKENS_SEED, "batch": BATCH, "seq": SEQ,
        "window_semantics": WINDOW_SEMANTICS,
        "init": {"norm_gain": f"1 + {NORM_STD}*N(0,1) (Gemma family: w = {NORM_STD}*N(0,1) for 1 + w)",
                 "bias": f"{BIAS_STD}*N(0,1)", "projection": f"N(0, ({GAIN}^2 or {QK_GAIN}^2 for q,k) / fan_in)",
                 "embedding_std_untied": EMBED_STD, "embedding_std_tied": f"{TIED_EMBED_GAIN} / sqrt(d)",
                 "qk_norm_gain": f"{QK_NORM_GAIN} + {NORM_STD}*N(0,1)", "gemma_embedding_std": GEMMA_EMBED_STD, "learned_position_std": POS_STD},
        "fixtures": [],
    }

    for fx in fixtures():
        seed = SEED + fx["k"]
        kwargs = dict(fx["kwargs"])
        tok = None
        if fx["tokenizer"]:
            tok, bos, eos = train_tokenizer(fx["tokenizer"])
            kwargs["vocab_size"] = tok.get_vocab_size()
            kwargs["bos_token_id"] = tok.token_to_id(bos)
            kwargs["eos_token_id"] = tok.token_to_id(eos)
        config = fx["config"](**kwargs)
        torch.manual_seed(seed)
        model = fx["model"](config)
        init_weights(model, seed, gemma_norms=config.model_type in ("gemma", "gemma2", "gemma3_text"))
        model = model.float().eval()

        vocab = config.vocab_size
        gen = torch.Generator().manual_seed(TOKENS_SEED)
        tokens = torch.randint(0, vocab, (BATCH, SEQ), generator=gen)
        targets = torch.cat([tokens[:, 1:], torch.full((BATCH, 1), -100, dtype=tokens.dtype)], dim=1)

        saved = {}
        for storage in fx["storages"]:
            dname = f"{fx['name']}-{storage}"
            path = os.path.join(out, dname)
            if storage == "f32":
                model.save_pretrained(path)
            elif storage == "bf16":
                copy.deepcopy(model).to(torch.bfloat16).save_pretrained(path)
            elif storage == "sharded":
                model.save_pretrained(path, max_shard_size=SHARD_SIZE)
                shards = [n for n in os.listdir(path) if n.startswith("model-") and n.endswith(".safetensors")]
                if len(shards) < 2 or not os.path.exists(os.path.join(path, "model.safetensors.index.json")):
                    raise RuntimeError(f"{dname}: not sharded: {os.listdir(path)}")
            if storage == "f32" and tok is not None:
                save_tokenizer(tok, bos, eos, path)
            saved[storage] = (dname, path)

        if fx["legacy"]:
            src_name, src_path = saved["f32"]
            dname = src_name + "-legacykeys"
            path = os.path.join(out, dname)
            shutil.copytree(src_path, path)
            with open(os.path.join(path, "config.json")) as f:
                cfg = json.load(f)
            write_json(os.path.join(path, "config.json"), legacy_config(cfg, fx["legacy"]), indent=2)
            saved["legacykeys"] = (dname, path)

        results = {}
        for storage, (dname, path) in saved.items():
            r = reference(path, fx["model"], tokens, targets)
            r["sens"] = sensitivity(path, tokens, r["logits64"]) if storage == "f32" else None
            if r["sens"]:
                weak = {k: v for k, v in r["sens"].items() if not v > SENS_MIN.get(k, 1e-3)}
                if weak:
                    raise RuntimeError(f"{dname}: features that barely change the logits: {weak}")
            results[storage] = r
            ref = {
                "fixture": dname, "directory": dname, "hf_class": fx["model"].__name__,
                "model_type": config.model_type, "storage": "f32" if storage == "legacykeys" else storage,
                "features": fx["features"] + (["legacy_config_keys"] if storage == "legacykeys" else []),
                "config_summary": summary(r["arch"]),
                "tokens": tokens.tolist(),
                "targets": targets.tolist(),
                "targets_doc": (f"targets[b][t] = tokens[b][t+1] for t < {SEQ - 1}, targets[b][{SEQ - 1}] = -100 "
                                f"(ignored); loss = mean over the {BATCH}*{SEQ - 1} = {BATCH * (SEQ - 1)} counted positions of "
                                "-log softmax(logits[b][t])[targets[b][t]], natural log (what transformers computes "
                                "with labels=tokens)"),
                "loss_f64": r["loss64"], "loss_hf_f32": r["loss_hf"],
                "logits_f64": None, "logits_hf_f32": None, "hidden_f64": None,
                "grad_norms_f64": r["gn64"], "grad_norms_hf_f32": r["gnhf"],
                "grad_norms_doc": ("L2 norm of d loss_f64 / d tensor for every stored tensor, keyed by its safetensors "
                                   "name; a tied head contributes to the embedding's gradient (one entry)"),
                "agreement": r["agree"],
                "diagnostics": r["diag"],
            }
            if r["sens"]:
                ref["sensitivity"] = r["sens"]
                ref["sensitivity_doc"] = ("max|logits_variant - logits_f64| / max|logits_f64| of the float64 forward "
                                          "with one feature switched off or got wrong (what an importer missing it "
                                          "would produce); every entry > 1e-3 except gelu_variant_swapped (> 1e-7: tanh and erf GELU "
                                          "differ by < 1e-3 on each activation)")
            src = dname if storage != "legacykeys" else saved["f32"][0]
            B, T, V = r["logits64"].shape
            L1, d = r["hidden64"].shape[0], r["hidden64"].shape[-1]
            ref["logits_f64"] = {"file": f"{src}.logits_f64.f64", "dtype": "float64 little-endian",
                                 "shape": [B, T, V], "order": "row-major [batch][position][vocab]"}
            ref["logits_hf_f32"] = {"file": f"{src}.logits_hf_f32.f32", "dtype": "float32 little-endian",
                                    "shape": [B, T, V], "order": "row-major [batch][position][vocab]"}
            ref["hidden_f64"] = {"file": f"{src}.hidden_f64.f64", "dtype": "float64 little-endian",
                                 "shape": [L1, B, T, d], "order": "row-major [layer][batch][position][d_model]",
                                 "doc": "h_0 = embedding output (incl. sqrt(d) scaling or learned positions); "
                                        "h_l = residual stream after block l; no final norm"}
            if storage == "legacykeys":
                base = results["f32"]
                if not torch.equal(r["logits_hf"], base["logits_hf"]):
                    raise RuntimeError(f"{dname}: transformers logits differ from {src}")
                if not torch.equal(r["logits64"], base["logits64"]):
                    raise RuntimeError(f"{dname}: float64 logits differ from {src}")
                ref["legacy_of"] = src
                ref["legacy_check"] = "transformers float32 logits and float64 logits bitwise equal to " + src
            else:
                write_raw(os.path.join(out, "ref", ref["logits_f64"]["file"]), r["logits64"], np.float64)
                write_raw(os.path.join(out, "ref", ref["logits_hf_f32"]["file"]), r["logits_hf"], np.float32)
                write_raw(os.path.join(out, "ref", ref["hidden_f64"]["file"]), r["hidden64"], np.float64)
            if fx["tokenizer"] and storage in ("f32", "legacykeys"):
                enc = tok.encode(SENTENCE)
                auto = transformers.AutoTokenizer.from_pretrained(path)
                auto_ids = auto(SENTENCE)["input_ids"]
                if auto_ids != enc.ids:
                    raise RuntimeError(f"{dname}: AutoTokenizer ids {auto_ids} != tokenizers ids {enc.ids}")
                ref["tokenizer"] = {"sentence": SENTENCE, "ids": enc.ids,
                                    "ids_without_special_tokens": tok.encode(SENTENCE, add_special_tokens=False).ids,
                                    "tokens": enc.tokens, "vocab_size": tok.get_vocab_size(),
                                    "bos_token": bos, "bos_token_id": tok.token_to_id(bos),
                                    "eos_token": eos, "eos_token_id": tok.token_to_id(eos)}
            write_json(os.path.join(out, "ref", f"{dname}.json"), ref)
            refs = sorted(n for n in os.listdir(os.path.join(out, "ref")) if n.startswith(src + ".") or n == dname + ".json")
            manifest["fixtures"].append({
                "directory": dname, "model_type": config.model_type, "hf_class": fx["model"].__name__,
                "storage": ref["storage"], "legacy_config_keys": storage == "legacykeys", "seed": seed,
                "features": ref["features"],
                "dims": {k: r["arch"][k] for k in ("vocab", "d", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff")},
                "agreement": r["agree"],
                "sensitivity": r["sens"],
                "files": dir_sizes(path),
                "ref_files": {n: os.path.getsize(os.path.join(out, "ref", n)) for n in refs},
            })
            print(f"{dname:32s} rel_logits {r['agree']['rel_logits']:.2e}  "
                  f"f64-patched {r['agree']['rel_logits_f64_vs_hf_f64_patched']:.2e} "
                  f"{r['agree']['max_rel_diff_grad_norm_f64_vs_hf_f64_patched']:.2e}  grad {r['agree']['max_rel_diff_grad_norm']:.2e}  "
                  f"hidden {r['agree']['max_rel_diff_hidden']:.2e}  loss {r['loss64']:.4f}  "
                  f"attn-entropy {['%.2f' % e for e in r['diag']['attn_entropy_ratio']]}", flush=True)

    write_json(os.path.join(out, "manifest.json"), manifest)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
    if os.path.exists(final):
        shutil.rmtree(final)
    os.rename(out, final)
    print(f"wrote {final}: {len(manifest['fixtures'])} fixtures, {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
