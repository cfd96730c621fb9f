/* spanprobe import llama2c MODEL.bin TOKENIZER.bin OUT.h5: a llama2.c checkpoint and its tokenizer
 * as a spanprobe checkpoint (io/llama2c.h has the mapping); spanprobe import hf DIR OUT.h5: a
 * Hugging Face model directory as one (io/hf_dir.h); spanprobe import gguf FILE OUT.h5: a GGUF file
 * (io/gguf_model.h); spanprobe import pt CKPT.pt OUT.h5: nanoGPT's checkpoint (io/nanogpt.h).
 * docs/import.md. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/sha256.h"
#include "io/checkpoint.h"
#include "io/model_source.h"
#include "io/llama2c.h"

static void print_help(void)
{
    printf("usage: spanprobe import llama2c MODEL.bin TOKENIZER.bin OUT.h5\n"
           "       spanprobe import hf DIR OUT.h5\n"
           "       spanprobe import gguf FILE.gguf OUT.h5\n"
           "       spanprobe import pt CKPT.pt OUT.h5\n\n"
           "hf: converts a Hugging Face model directory (config.json, model.safetensors or its shards with\n"
           "model.safetensors.index.json, or pytorch_model.bin; optionally tokenizer.json) into one spanprobe\n"
           "checkpoint. Every\n"
           "command that takes a checkpoint also reads DIR directly; this is for those who want one file.\n"
           "Architectures: GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, Qwen3, OLMo-2, Gemma, Gemma 2, Gemma 3\n"
           "(docs/import.md has the table of config keys and what is rejected).\n\n"
           "gguf: converts a GGUF file (llama.cpp's format, versions 2 and 3) into one spanprobe checkpoint,\n"
           "dequantizing F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and Q2_K..Q6_K tensors into the compute\n"
           "type. Every command that takes a checkpoint also reads FILE.gguf directly. general.architecture:\n"
           "llama (Mistral too), qwen2, qwen3, gemma, gemma2, gemma3, olmo2, gpt2, gptneox (docs/import.md\n"
           "has the keys, llama.cpp's conventions and what is rejected).\n\n"
           "pt: converts nanoGPT's ckpt.pt (torch.save of 'model' and 'model_args') into one spanprobe\n"
           "checkpoint: GPT-2-shaped, with or without biases. The pickle inside is read by a parser that runs\n"
           "nothing: any global but ordered dicts, tensor rebuilds and storage types is refused. Every command\n"
           "that takes a checkpoint also reads CKPT.pt directly.\n\n"
           "llama2c: converts a llama2.c checkpoint (run.c's format: 7 int32 header, float32 tensors) and its\n"
           "tokenizer.bin into a spanprobe checkpoint: variant pre, RMSNorm (eps 1e-5), SwiGLU, RoPE\n"
           "(theta 10000), grouped-query attention, tied or untied head from the sign of vocab_size.\n"
           "The checkpoint records the source files, their sizes and SHA-256 digests as provenance.\n"
           "docs/import.md has the tensor mapping.\n\n"
           "exit codes: 0 ok, 2 usage (OUT.h5 would replace an input), 3 bad model or tokenizer file\n"
           "            (header, size, record, config.json contradicting the tensors, unsupported option),\n"
           "            4 NaN/Inf weights, 5 I/O, 8 out of memory; no output file is left on error\n");
}

/* Appends "<label> FILE (N bytes, sha256 HEX)" to the string in buf (cut at cap). */
static sp_status append_file(char *buf, size_t cap, const char *label, const char *path)
{
    char hex[65];
    int64_t n_bytes = 0;
    SP_TRY(sp_sha256_file(path, hex, &n_bytes));
    size_t used = strlen(buf);
    snprintf(buf + used, cap - used, "%s %s (%lld bytes, sha256 %s)", label, path, (long long)n_bytes, hex);
    return SP_OK;
}

static sp_status import_llama2c(const char *model_path, const char *tok_path, const char *out_path)
{
    SP_TRY(sp_check_outputs(&out_path, 1, (const char *[]){model_path, tok_path}, 2));
    sp_llama2c_weights w;
    SP_TRY(sp_llama2c_read(model_path, &w));
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    sp_model *m = NULL;
    sp_status st = sp_tokenizer_load_llama2c(tok_path, w.cfg.vocab_size, &meta.tokenizer);
    meta.has_tokenizer = st == SP_OK;
    if (st == SP_OK && (st = append_file(meta.source, sizeof meta.source, "import llama2c", model_path)) == SP_OK &&
        (st = append_file(meta.source, sizeof meta.source, " tokenizer", tok_path)) == SP_OK)
        st = sp_llama2c_to_model(&w, sp_backend_cpu(), &m);
    if (st == SP_OK) {
        meta.cfg = w.cfg;
        st = sp_ckpt_write(out_path, m, &meta, NULL, NULL);
    }
    if (st == SP_OK)
        printf("imported %s: %d layers, d_model %d, %d/%d heads, d_ff %d, vocab %d (%s head), %zu weights -> %s\n",
               model_path, w.cfg.n_layers, w.cfg.d_model, w.cfg.n_heads, w.cfg.n_kv_heads, w.cfg.d_ff,
               w.cfg.vocab_size, w.cfg.tie_embeddings ? "tied" : "untied", sp_model_n_weights(m), out_path);
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
    sp_llama2c_free(&w);
    return st;
}

/* A Hugging Face directory, a GGUF file or a nanoGPT checkpoint, through io/model_source.h. */
static sp_status import_source(const char *dir, const char *out_path)
{
    SP_TRY(sp_model_source_check_output(dir, out_path));
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    SP_TRY(sp_model_source_load(dir, sp_backend_cpu(), &m, &meta));
    sp_status st = sp_ckpt_write(out_path, m, &meta, NULL, NULL);
    if (st == SP_OK)
        printf("imported %s: %s, %d layers, d_model %d, %d/%d heads of %d, d_ff %d, vocab %d (%s head), %zu weights%s "
               "-> %s\n",
               dir, sp_variant_names[meta.cfg.variant], meta.cfg.n_layers, meta.cfg.d_model, meta.cfg.n_heads,
               meta.cfg.n_kv_heads, sp_config_head_dim(&meta.cfg), meta.cfg.d_ff, meta.cfg.vocab_size,
               meta.cfg.tie_embeddings ? "tied" : "untied", sp_model_n_weights(m),
               meta.has_tokenizer ? ", tokenizer" : "", out_path);
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
    return st;
}

int sp_cmd_import(int argc, char **argv)
{
    if (sp_cli_wants_help(argc, argv)) {
        print_help();
        return SP_OK;
    }
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--", 2) == 0)
            return sp_cli_usage_error("import", "unknown option %s", argv[i]);
    const sp_model_source_kind kinds[] = {SP_SOURCE_HF_DIR, SP_SOURCE_GGUF, SP_SOURCE_PT};
    const char *const names[] = {"hf", "gguf", "pt"}, *const inputs[] = {"DIR", "FILE.gguf", "CKPT.pt"};
    const char *const expected[] = {"a directory holding config.json", "a file starting with the magic GGUF",
                                    "a ZIP archive, as torch.save writes"};
    for (int k = 0; k < 3; k++) {
        if (argc < 2 || strcmp(argv[1], names[k]) != 0)
            continue;
        if (argc != 4)
            return sp_cli_usage_error("import", "expected %s OUT.h5 after %s (%d given)", inputs[k], names[k],
                                      argc - 2);
        if (sp_model_source_kind_of(argv[2]) != kinds[k])
            return sp_cli_report("import", sp_error(SP_ERR_INPUT, "%s: not a %s (expected %s)", argv[2],
                                                    sp_model_source_kind_name(kinds[k]), expected[k]));
        sp_error_clear();
        return sp_cli_report("import", import_source(argv[2], argv[3]));
    }
    if (argc < 2 || strcmp(argv[1], "llama2c") != 0)
        return sp_cli_usage_error("import", "expected the source format llama2c, hf, gguf or pt, found '%s'",
                                  argc < 2 ? "" : argv[1]);
    if (argc != 5)
        return sp_cli_usage_error("import", "expected MODEL.bin TOKENIZER.bin OUT.h5 after llama2c (%d given)",
                                  argc - 2);
    sp_error_clear();
    return sp_cli_report("import", import_llama2c(argv[2], argv[3], argv[4]));
}
