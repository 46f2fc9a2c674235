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

Pure Python (struct, array): no numpy or safetensors package needed, so it
runs and is tested on the build machine too. Meant for the tiny models; the
full shapes' FP32 copy is ~4 bytes a parameter.

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


def _f16_to_f32(raw):
    n = len(raw) // 2
    return array.array("f", struct.unpack("<%de" % n, raw))


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, array('f')) written as F32."""
    header, off = {}, 0
    for name, shape, vals in tensors:
        n = len(vals) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt", "source": "horizon dequantized_checkpoint.py"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, vals in tensors:
            if sys.byteorder != "little":
                vals = array.array("f", vals)
                vals.byteswap()
            f.write(vals.tobytes())
    os.replace(tmp, path)


def write(artifact, out):
    meta = json.load(open(os.path.join(artifact, "artifact.json")))
    scheme = meta["dtypes"]["routed_scheme"]
    if scheme != "qpack-int4-b256-v1":
        raise SystemExit(f"{artifact}: routed experts are {scheme}; this writes the checkpoint of INT4 (qpack-int4-b256-v1) experts")
    files = {}

    def read(name, offset, n):
        if name not in files:
            files[name] = open(os.path.join(artifact, name), "rb")
        f = files[name]
        f.seek(offset)
        b = f.read(n)
        if len(b) != n:
            raise SystemExit(f"{artifact}/{name}: {n} bytes at {offset}: short read")
        return b

    tensors = []
    for t in meta["tensors"]:
        raw = read(t["file"], t["offset"], t["bytes"])
        shape = t["shape"]
        if t["kind"] == "routed":
            if len(shape) != 2:
                raise SystemExit(f"{t['name']}: shape {shape}, want a matrix")
            vals = dequantize(raw, shape[0], shape[1], t["cols_padded"])
        elif t["stored"] == "FP16":
            vals = _f16_to_f32(raw)
        else:
            raise SystemExit(f"{t['name']}: stored {t['stored']}; want FP16 or {scheme}")
        n = 1
        for d in shape:
            n *= d
        if len(vals) != n:
            raise SystemExit(f"{t['name']}: {len(vals)} values for shape {shape}")
        tensors.append((t["name"], shape, vals))
    for f in files.values():
        f.close()
    os.makedirs(out, exist_ok=True)
    for name in COPIED:
        src = os.path.join(artifact, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(out, name))
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    return len(tensors)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    n = write(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[2]}: {n} tensors (routed experts dequantized from {sys.argv[1]})")
