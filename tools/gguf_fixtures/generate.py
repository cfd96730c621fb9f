#!/usr/bin/env python3
"""Writes fixtures/gguf/ with the gguf package (llama.cpp's Python GGUF writer and dequantizer) for
tests/test_gguf.c. See tools/gguf_fixtures/README.md for what each file holds.

Run from the repository root with the pinned versions (requirements.txt beside this file):
    python tools/gguf_fixtures/generate.py [--out DIR]
Deterministic: two runs write byte-identical files.
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys

import numpy as np

PINS = {"gguf": "0.19.0", "numpy": "2.4.6"}


def check_pins():
    for package, pinned in PINS.items():
        found = importlib.metadata.version(package)
        if found != pinned:
            sys.exit(f"generate.py: {package} is {found}, expected {pinned} (tools/gguf_fixtures/requirements.txt)")


check_pins()

import gguf  # noqa: E402  (after the version check)
from gguf import GGMLQuantizationType as Q, GGUFValueType as V  # noqa: E402

SEED = 20240601
QK_K = 256
# numpy shapes (the last axis is the row, ggml's dims[0]): rows of 256 and 512, and a 3-D tensor
TENSORS = [("t256", (3, 256)), ("t512", (2, 512)), ("t3d", (2, 2, 256))]
FLOAT_TYPES = [Q.F32, Q.F16, Q.BF16]
QUANTIZED = [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1]   # gguf.quants.quantize writes these
K_QUANTS = [Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]     # it cannot: random valid blocks instead
ALIGNMENT = 64


def halves(rng, n):
    """n random float16 scales, magnitudes 1e-7..1 (some round to zero or are subnormal), both signs."""
    magnitude = 10.0 ** rng.uniform(-7, 0, n)
    return (rng.choice([-1.0, 1.0], n) * magnitude).astype(np.float16)


def k_quant_blocks(rng, qtype, n):
    """n random super-blocks of qtype, fields in the order of ggml's block_q*_K structs."""
    def u8(k):
        return rng.integers(0, 256, (n, k), dtype=np.uint8)

    def f16():
        return halves(rng, n).reshape(n, 1).view(np.uint8)

    fields = {
        Q.Q2_K: lambda: [u8(QK_K // 16), u8(QK_K // 4), f16(), f16()],              # scales, qs, d, dmin
        Q.Q3_K: lambda: [u8(QK_K // 8), u8(QK_K // 4), u8(12), f16()],              # hmask, qs, scales, d
        Q.Q4_K: lambda: [f16(), f16(), u8(12), u8(QK_K // 2)],                      # d, dmin, scales, qs
        Q.Q5_K: lambda: [f16(), f16(), u8(12), u8(QK_K // 8), u8(QK_K // 2)],       # d, dmin, scales, qh, qs
        Q.Q6_K: lambda: [u8(QK_K // 2), u8(QK_K // 4), u8(QK_K // 16), f16()],      # ql, qh, scales (int8), d
    }[qtype]()
    blocks = np.concatenate(fields, axis=1)
    assert blocks.shape[1] == gguf.GGML_QUANT_SIZES[qtype][1]
    return blocks


def float_values(rng, shape, qtype):
    x = (rng.standard_normal(shape) * 0.5).astype(np.float32)
    if qtype in FLOAT_TYPES:  # specials in the first row: infinities, NaN, -0, subnormals, extremes
        special = [np.inf, -np.inf, np.nan, -0.0, 2.0**-24, 65504.0, 1e-40, -3.0e38]
        x.reshape(-1, shape[-1])[0, :len(special)] = special
    else:  # an all-zero block (its scale is 0, or -0 for Q4_0 and Q5_0)
        x.reshape(-1, shape[-1])[0, :32] = 0.0
    return x


def stored(rng, qtype, shape):
    """The tensor as the writer stores it: float32, float16, or raw block bytes."""
    if qtype in K_QUANTS:
        n_blocks = int(np.prod(shape)) // QK_K
        return k_quant_blocks(rng, qtype, n_blocks).reshape(*shape[:-1], -1)
    with np.errstate(over="ignore"):  # -3e38 becomes -inf in float16, on purpose
        return gguf.quants.quantize(float_values(rng, shape, qtype), qtype)


def expected_values(data, qtype):
    return np.ascontiguousarray(gguf.quants.dequantize(data, qtype), dtype=np.float32)


def write_gguf(path, tensors, kvs=(), alignment=None, name=None):
    """tensors: [(name, stored array, qtype)]; kvs: [(key, value, type, sub_type)]."""
    w = gguf.GGUFWriter(path, "spanprobe-test")
    if name is not None:
        w.add_name(name)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value, vtype, sub_type in kvs:
        w.add_key_value(key, value, vtype, sub_type=sub_type)
    for tname, data, qtype in tensors:
        raw = None if data.dtype in (np.float32, np.float16) else qtype
        w.add_tensor(tname, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_back(path, tensors, expected):
    """The gguf package's reader finds what was written, and dequantizes it to the expected values."""
    r = gguf.GGUFReader(path)
    assert [t.name for t in r.tensors] == [name for name, _, _ in tensors]
    for t, (name, data, qtype), want in zip(r.tensors, tensors, expected):
        assert t.tensor_type == qtype, name
        assert list(t.shape) == list(reversed(want.shape)), name
        assert np.array_equal(np.asarray(t.data).view(np.uint8), data.view(np.uint8)), name
        assert np.array_equal(expected_values(np.asarray(t.data), qtype).view(np.uint32), want.view(np.uint32)), name
    return r


def tensor_files(out, stem, tensors):
    """<stem>.gguf and <stem>.expected.f32 (every tensor's dequantized values, float32, in file order)."""
    path = os.path.join(out, stem + ".gguf")
    write_gguf(path, tensors)
    return describe(out, stem, path, tensors, gguf.GGUFReader(path))


def describe(out, stem, path, tensors, reader):
    expected = [expected_values(data, qtype) for _, data, qtype in tensors]
    read_back(path, tensors, expected)
    flat = np.concatenate([e.ravel() for e in expected]) if expected else np.zeros(0, np.float32)
    expected_file = stem + ".expected.f32"
    with open(os.path.join(out, expected_file), "wb") as f:
        f.write(flat.astype("<f4").tobytes())
    entries, first = [], 0
    for t, want in zip(reader.tensors, expected):
        entries.append({
            "name": t.name, "type": t.tensor_type.name, "dims": [int(d) for d in t.shape],
            "offset": int(t.data_offset - reader.data_offset), "bytes": int(t.n_bytes),
            "expected": {"file": expected_file, "first_element": first, "count": int(want.size),
                         "sha256": hashlib.sha256(want.astype("<f4").tobytes()).hexdigest(),
                         "first_values": [repr(float(v)) for v in want.ravel()[:4]]},
        })
        first += int(want.size)
    return {"file": stem + ".gguf", "version": 3, "alignment": int(reader.alignment),
            "data_offset": int(reader.data_offset), "tensors": entries}


def metadata_kvs():
    """Every value type, arrays of each, of strings, and nested arrays: (key, value, type, element type)."""
    scalars = [
        ("uint8", 200, V.UINT8), ("int8", -100, V.INT8), ("uint16", 60000, V.UINT16), ("int16", -30000, V.INT16),
        ("uint32", 4000000000, V.UINT32), ("int32", -2000000000, V.INT32), ("uint64", 2**64 - 1, V.UINT64),
        ("int64", -2**63, V.INT64), ("float32", 0.1, V.FLOAT32), ("float64", 0.1, V.FLOAT64),
        ("true", True, V.BOOL), ("false", False, V.BOOL), ("string", "héllo, wörld ✓", V.STRING),
        ("empty_string", "", V.STRING), ("nul_string", "a\x00b", V.STRING),
    ]
    arrays = [
        ("uint8", [0, 1, 255], V.UINT8), ("int8", [-128, 0, 127], V.INT8), ("uint16", [0, 65535], V.UINT16),
        ("int16", [-32768, 32767], V.INT16), ("uint32", [0, 4294967295], V.UINT32),
        ("int32", [-2147483648, 2147483647], V.INT32), ("uint64", [0, 2**64 - 1], V.UINT64),
        ("int64", [-2**63, 2**63 - 1], V.INT64), ("float32", [1.5, -0.25, 3.0e38], V.FLOAT32),
        ("float64", [0.1, -1e300], V.FLOAT64), ("bool", [True, False, True], V.BOOL),
        ("string", ["alpha", "", "γάμμα"], V.STRING),
        ("nested", [[1, 2], [3], [4, 5, 6]], V.ARRAY),                  # arrays of INT32
        ("nested_strings", [["a", "b"], ["c"]], V.ARRAY),               # arrays of STRING
        ("deep", [[[1.5]], [[2.5, -3.25]]], V.ARRAY),                   # arrays of arrays of FLOAT32
    ]
    return ([("test." + k, v, t, None) for k, v, t in scalars] +
            [("test.array." + k, v, V.ARRAY, t) for k, v, t in arrays])


def json_value(value):
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return repr(value) if isinstance(value, float) else value


def generate(out):
    rng = np.random.default_rng(SEED)
    manifest = {"generator": "tools/gguf_fixtures/generate.py", "seed": SEED,
                "versions": {"python": sys.version.split()[0], **{p: importlib.metadata.version(p) for p in PINS}},
                "files": []}
    for qtype in FLOAT_TYPES + QUANTIZED + K_QUANTS:
        tensors = [(name, stored(rng, qtype, shape), qtype) for name, shape in TENSORS]
        manifest["files"].append(tensor_files(out, qtype.name.lower(), tensors))

    # version 2: the Q8_0 file with its version field set to 2 (v2 and v3 share the layout)
    with open(os.path.join(out, "q8_0.gguf"), "rb") as f:
        v2 = bytearray(f.read())
    v2[4:8] = (2).to_bytes(4, "little")
    with open(os.path.join(out, "v2.gguf"), "wb") as f:
        f.write(v2)
    assert gguf.GGUFReader(os.path.join(out, "v2.gguf")).fields["GGUF.version"].parts[0][0] == 2
    manifest["files"].append({"file": "v2.gguf", "version": 2, "same_tensors_as": "q8_0.gguf"})

    # alignment 64; the name's length makes the tensor infos end where aligning to 32 would start the
    # data section 32 bytes early (the tensors' offsets, 0 192 512, differ from 32-alignment's anyway)
    tensors = [(f"a{i}", stored(rng, Q.Q4_0, (rows, 256)), Q.Q4_0) for i, rows in enumerate([1, 2, 1])]
    path = os.path.join(out, "align64.gguf")
    for pad in range(64):
        write_gguf(path, tensors, alignment=ALIGNMENT, name="x" * pad)
        r = gguf.GGUFReader(path)
        last = r.tensors[-1].field
        infos_end = last.offset + sum(int(p.nbytes) for p in last.parts)
        if 0 < infos_end % ALIGNMENT <= 32:
            break
    assert [int(t.data_offset - r.data_offset) for t in r.tensors] == [0, 192, 512]
    manifest["files"].append(describe(out, "align64", path, tensors, r))

    kvs = metadata_kvs()
    write_gguf(os.path.join(out, "meta.gguf"), [], kvs)
    r = gguf.GGUFReader(os.path.join(out, "meta.gguf"))
    for key, value, vtype, sub_type in kvs:
        field = r.fields[key]
        assert field.types[0] == vtype and (sub_type is None or field.types[1] == sub_type), key
    manifest["files"].append({"file": "meta.gguf", "version": 3, "tensors": [],
                              "metadata": [{"key": k, "type": t.name, "element_type": s.name if s else None,
                                            "value": json_value(v)} for k, v, t, s in kvs]})

    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="fixtures/gguf")
    out = parser.parse_args().out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    generate(tmp)
    if os.path.isdir(out):
        if not os.path.exists(os.path.join(out, "manifest.json")):
            sys.exit(f"generate.py: {out} exists and holds no manifest.json; not replacing it")
        shutil.rmtree(out)
    os.rename(tmp, out)
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{out}: {len(os.listdir(out))} files, {total} bytes")


if __name__ == "__main__":
    main()
