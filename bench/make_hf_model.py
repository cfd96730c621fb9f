"""Random Hugging Face model directories for the benchmarks of bench/run_hf_analyze_bench.sh.

Writes into OUT (default bench_out/, git-ignored), with save_pretrained and no hub access:
  gpt2-f32/   GPT2LMHeadModel, GPT-2 small's shape (12 layers, n_embd 768, 12 heads, vocab 50257,
              n_positions 1024; 124M parameters), float32 weights
  gpt2-bf16/  the same weights in bfloat16
  llama-bf16/ with --llama: LlamaForCausalLM of similar size (12 layers, hidden 768, 12 heads,
              4 key/value heads, intermediate 2048, vocab 32000), bfloat16
Weights are transformers' own random initialization under torch.manual_seed(--seed), so the same
seed writes the same files. No tokenizer is written: the benchmark feeds token ids (--tokens).
A directory that already holds model.safetensors is kept as it is (delete it to rewrite).

Usage: python bench/make_hf_model.py [--out DIR] [--seed S] [--llama]
"""
import argparse
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def gpt2():
    return GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024))


def llama():
    return LlamaForCausalLM(LlamaConfig(num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                                        num_key_value_heads=4, intermediate_size=2048, vocab_size=32000,
                                        max_position_embeddings=2048, tie_word_embeddings=True))


def save(model, path, dtype):
    if os.path.exists(os.path.join(path, "model.safetensors")):
        print(f"{path}: kept")
        return
    model.to(dtype).save_pretrained(path)  # one model.safetensors below the default 5 GB shard size
    n = sum(p.numel() for p in model.parameters())
    print(f"{path}: {type(model).__name__}, {n / 1e6:.1f}M parameters, {dtype}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--llama", action="store_true", help="also a random Llama-shaped model in bfloat16")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    model = gpt2()
    save(model, os.path.join(args.out, "gpt2-f32"), torch.float32)
    save(model, os.path.join(args.out, "gpt2-bf16"), torch.bfloat16)
    if args.llama:
        torch.manual_seed(args.seed)
        save(llama(), os.path.join(args.out, "llama-bf16"), torch.bfloat16)


if __name__ == "__main__":
    main()
