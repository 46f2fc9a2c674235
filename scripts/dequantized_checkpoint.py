#!/usr/bin/env python3
"""Write the Hugging Face checkpoint a prepared INT4 artifact computes with.

A qpack-int4-b256-v1 artifact (horizon-bench prepare --experts int4) stores
each routed expert matrix as 4-bit codes u with one FP16 scale s per row and
256-column block: the weight is (u - 8) * s. This script writes a checkpoint
whose routed expert weights are exactly those values (FP32) and whose other
tensors are the artifact's FP16 non-routed tensors (as FP32), beside the
artifact's config.json, generation_config.json and tokenizer.json. So
transformers run on it in FP32 computes what our INT4 path should compute,
and the oracle (scripts/oracle_hf.py) can hold the INT4 path, and the FP16
expert activations that apply to INT4 experts only, to transformers.

It needs no numpy or safetensors package: the pure-Python path (struct,
array) runs and is tested on the build machine (make dequantize-check).
Where numpy is installed (the GPU machine) it dequantizes with numpy, after
checking that numpy gives the pure path's bits on the first routed matrix,
so the full shapes take seconds, not hours; their FP32 copy is ~4 bytes a
parameter (~26 GB for OLMoE-1B-7B).

Usage:
  python3 scripts/dequantized_checkpoint.py ARTIFACT_DIR OUT_DIR
"""
import array
import json
import os
import shutil
import struct
import sys

BLOCK = 256  # columns a scale covers (qpack.BlockSize)
COPIED = ("config.json", "generation_config.json", "tokenizer.json")

# byte -> (low nibble - 8, high nibble - 8): column 2i is the low nibble.
_PAIRS = [((b & 15) - 8, (b >> 4) - 8) for b in range(256)]


def dequantize(raw, rows, cols, cols_padded):
    """The FP32 values [rows * cols] of one stored INT4 matrix (raw: its bytes)."""
    row_bytes = cols_padded // 2
    blocks = cols_padded // BLOCK
    scales = struct.unpack_from("<%de" % (rows * blocks), raw, rows * row_bytes)
    out = array.array("f", bytes(4 * rows * cols))
    for r in range(rows):
        packed = raw[r * row_bytes:(r + 1) * row_bytes]
        base = r * cols
        for b in range(blocks):
            s = scales[r * blocks + b]
            c0, c1 = b * BLOCK, min((b + 1) * BLOCK, cols)
            for c in range(c0, c1, 2):
                lo, hi = _PAIRS[packed[c // 2]]
                out[base + c] = lo * s
                if c + 1 < c1:
                    out[base + c + 1] = hi * s
    return out


def dequantize_np(np, raw, rows, cols, cols_padded):
    """dequantize with numpy: the same values, as a flat float32 array."""
    row_bytes = cols_padded // 2
    blocks = cols_padded // BLOCK
    codes = np.frombuffer(raw, dtype=np.uint8, count=rows * row_bytes).reshape(rows, row_bytes)
    vals = np.empty((rows, cols_padded), dtype=np.float32)
    vals[:, 0::2] = (codes & 15).astype(np.float32) - 8
    vals[:, 1::2] = (codes >> 4).astype(np.float32) - 8
    scales = np.frombuffer(raw, dtype="<f2", count=rows * blocks, offset=rows * row_bytes).astype(np.float32)
    vals *= np.repeat(scales.reshape(rows, blocks), BLOCK, axis=1)
    return np.ascontiguousarray(vals[:, :cols]).reshape(-1)


def _f16_to_f32(raw):
    n = len(raw) // 2
    return array.array("f", struct.unpack("<%de" % n, raw))


def write_safetensors(path, tensors):
    """tensors: (name, shape, values) triples, values a function that returns
    the tensor's values (array('f') or a numpy float32 array), called one at
    a time while writing, so at most one tensor is held. Written as F32."""
    header, off = {}, 0
    for name, shape, _ in tensors:
        n = 4
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt", "source": "horizon dequantized_checkpoint.py"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, _, values in tensors:
            vals = values()
            b0, b1 = header[name]["data_offsets"]
            if len(vals) * 4 != b1 - b0:
                raise SystemExit(f"{name}: {len(vals)} values for {(b1 - b0) // 4}")
            if isinstance(vals, array.array) and sys.byteorder != "little":
                vals = array.array("f", vals)
                vals.byteswap()
            f.write(vals.tobytes())  # numpy float32 on the little-endian GPU machine
    os.replace(tmp, path)


def _numpy():
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def write(artifact, out, use_numpy=True):
    """Write the checkpoint of artifact into out; returns the tensor count."""
    np = _numpy() if use_numpy else None
    meta = json.load(open(os.path.join(artifact, "artifact.json")))
    scheme = meta["dtypes"]["routed_scheme"]
    if scheme != "qpack-int4-b256-v1":
        raise SystemExit(f"{artifact}: routed experts are {scheme}; this writes the checkpoint of INT4 (qpack-int4-b256-v1) experts")
    files = {}
    checked = []

    def read(name, offset, n):
        if name not in files:
            files[name] = open(os.path.join(artifact, name), "rb")
        f = files[name]
        f.seek(offset)
        b = f.read(n)
        if len(b) != n:
            raise SystemExit(f"{artifact}/{name}: {n} bytes at {offset}: short read")
        return b

    def values(t):
        def get():
            raw = read(t["file"], t["offset"], t["bytes"])
            shape = t["shape"]
            if t["kind"] == "routed":
                if np is None:
                    return dequantize(raw, shape[0], shape[1], t["cols_padded"])
                vals = dequantize_np(np, raw, shape[0], shape[1], t["cols_padded"])
                if not checked:  # numpy must give the reference path's bits
                    if vals.tobytes() != dequantize(raw, shape[0], shape[1], t["cols_padded"]).tobytes():
                        raise SystemExit(f"{t['name']}: numpy's dequantization differs from the reference path's")
                    checked.append(t["name"])
                return vals
            return _f16_to_f32(raw) if np is None else np.frombuffer(raw, dtype="<f2").astype("<f4")
        return get

    tensors = []
    for t in meta["tensors"]:
        if t["kind"] == "routed" and len(t["shape"]) != 2:
            raise SystemExit(f"{t['name']}: shape {t['shape']}, want a matrix")
        if t["kind"] != "routed" and t["stored"] != "FP16":
            raise SystemExit(f"{t['name']}: stored {t['stored']}; want FP16 or {scheme}")
        tensors.append((t["name"], t["shape"], values(t)))
    os.makedirs(out, exist_ok=True)
    for name in COPIED:
        src = os.path.join(artifact, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(out, name))
    try:  # last, so that model.safetensors exists only when the checkpoint is whole
        write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    finally:
        for f in files.values():
            f.close()
    return len(tensors)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    n = write(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[2]}: {n} tensors (routed experts dequantized from {sys.argv[1]})")
