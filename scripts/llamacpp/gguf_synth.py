#!/usr/bin/env python3
"""gguf_synth.py: a horizon-bench synthetic checkpoint -> the llama.cpp peer's GGUF.

Purpose
    The llama.cpp peer numbers (docs/peers.md) must run on the same synthetic shapes as our
    runtime. `horizon-bench synth` writes a Hugging Face layout checkpoint (config.json, BF16
    safetensors, a synthetic byte-level tokenizer.json). This script turns it into:
      1. an F16 GGUF, written by llama.cpp's own converter (the `conversion` package that
         convert_hf_to_gguf.py uses, with gguf-py), imported as a module from an unpacked llama.cpp
         source tree. Only the vocab step is ours: the stock converter identifies a BPE
         pre-tokenizer by hashing the tokenizer's output on a probe text and refuses one it does not
         know, and ours is synthetic. We write the tokenizer.json vocab as a "gpt2" (BPE) vocab with
         the default pre-tokenizer; llama-bench feeds token ids, so the tokenizer does not enter the
         timings.
      2. optionally, a GGUF with only the routed experts (ffn_{gate,up,down}_exps) in Q4_0 and
         every other matrix in F16 (token embedding and output included), made by the built
         llama-quantize with its per-tensor overrides. 1-D tensors (norms, biases) and the router
         (ffn_gate_inp, never quantized by llama-quantize) stay as the converter wrote them (F32).
      3. a check of the result's tensor types with gguf-py's reader (--verify alone does only this).

Usage
    gguf_synth.py --llama-src SRC --checkpoint CKPT --f16 OUT-f16.gguf
                  [--quantize LLAMA_QUANTIZE --q4 OUT-q4e.gguf [--threads N] [--drop-f16]]
                  [--drop-checkpoint]
                  [--summary OUT.json]
    gguf_synth.py --llama-src SRC --f16 MADE-f16.gguf --quantize LLAMA_QUANTIZE --q4 OUT-q4e.gguf
                  [--threads N] [--drop-f16] [--summary OUT.json]
                  (quantizes an F16 GGUF converted earlier, e.g. beside the llama.cpp build)
    gguf_synth.py --llama-src SRC --verify FILE.gguf [--expect-q4-experts] [--summary OUT.json]

    SRC is the unpacked llama.cpp tree (convert_hf_to_gguf.py, conversion/, gguf-py/ inside).
    Exit status: 0 when every step ran and the types are as expected, 1 otherwise (one-line error).

Needs numpy and torch (any version the converter imports; for an old torch without the float8
dtypes, e.g. Debian 12's 1.13, placeholder attributes are set so the converter's dtype tables load).
transformers is optional: without it the converter reads config.json itself (its own fallback).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

EXPERT_SUFFIXES = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def die(msg: str) -> None:
    print(f"gguf_synth: {msg}", file=sys.stderr)
    sys.exit(1)


def import_llamacpp(src: Path):
    """Put llama.cpp's converter and gguf-py on sys.path and import them."""
    if not (src / "conversion").is_dir() or not (src / "gguf-py" / "gguf").is_dir():
        die(f"{src} is not an unpacked llama.cpp tree (no conversion/ or gguf-py/gguf/)")
    sys.path.insert(0, str(src / "gguf-py"))
    sys.path.insert(0, str(src))
    try:
        import transformers  # noqa: F401
    except ImportError:
        # The converter imports AutoConfig at module level and falls back to reading config.json
        # when AutoConfig.from_pretrained raises; a stand-in that always raises takes that path.
        stub = types.ModuleType("transformers")

        class AutoConfig:  # noqa: D401 - stand-in
            @staticmethod
            def from_pretrained(*_a, **_k):
                raise RuntimeError("transformers is not installed")

        stub.AutoConfig = AutoConfig  # type: ignore[attr-defined]
        sys.modules["transformers"] = stub
    import torch

    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, f"<no torch.{name}>")
    import gguf  # noqa: F401
    import conversion

    return conversion


def synthetic_vocab(ckpt: Path, hparams: dict) -> dict:
    """The tokenizer.json vocab laid out as llama.cpp's token list, types and special ids."""
    import gguf

    with open(ckpt / "tokenizer.json", encoding="utf-8") as f:
        tok = json.load(f)
    model = tok.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        die(f"{ckpt}/tokenizer.json: expected a BPE model with a vocab map")
    n_vocab = int(hparams["vocab_size"])
    text: dict[int, str] = {int(i): t for t, i in model["vocab"].items()}
    kind: dict[int, int] = {}
    for a in tok.get("added_tokens") or []:
        text[int(a["id"])] = a["content"]
        kind[int(a["id"])] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    if max(text) >= n_vocab:
        die(f"tokenizer id {max(text)} is outside vocab_size {n_vocab}")
    tokens, toktypes = [], []
    for i in range(n_vocab):
        if i in text:
            tokens.append(text[i])
            toktypes.append(kind.get(i, gguf.TokenType.NORMAL))
        else:
            tokens.append(f"[PAD{i}]")
            toktypes.append(gguf.TokenType.UNUSED)
    # llama.cpp's BPE loader requires a merges array; the synthetic tokenizer has none, so one
    # merge of two byte tokens stands in. Its product is no token, so text still splits to bytes.
    space = "\u0120"  # the byte-level alphabet's letter for 0x20
    if space not in model["vocab"]:
        die("tokenizer.json has no byte-level space token (U+0120)")
    return {"tokens": tokens, "toktypes": toktypes, "merges": [f"{space} {space}"]}


def convert(conversion, ckpt: Path, out: Path, arch_name: str) -> None:
    import gguf
    import torch

    hparams = conversion.ModelBase.load_hparams(ckpt, False)
    architecture = conversion.get_model_architecture(hparams, conversion.ModelType.TEXT)
    base = conversion.get_model_class(architecture, mmproj=False)
    vocab = synthetic_vocab(ckpt, hparams)

    class Synthetic(base):  # type: ignore[misc, valid-type]
        model_arch = base.model_arch  # the converter wants each model class to name it

        def set_vocab(self):
            w = self.gguf_writer
            w.add_tokenizer_model("gpt2")
            w.add_tokenizer_pre("default")
            w.add_token_list(vocab["tokens"])
            w.add_token_types(vocab["toktypes"])
            w.add_token_merges(vocab["merges"])
            for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                             ("pad_token_id", w.add_pad_token_id)):
                if isinstance(hparams.get(key), int):
                    add(hparams[key])
            w.add_add_bos_token(False)

    Synthetic.__name__ = f"Synthetic{base.__name__}"
    logging.getLogger().info(f"gguf_synth: {architecture} -> {base.__name__} with the synthetic vocab")
    with torch.inference_mode():
        m = Synthetic(ckpt, gguf.LlamaFileType.MOSTLY_F16, out, model_name=f"horizon-synth-{arch_name}")
        m.write()


def quantize(binary: str, src: Path, dst: Path, threads: int, log: Path) -> None:
    args = [binary, "--pure", "--token-embedding-type", "f16", "--output-tensor-type", "f16",
            # first match wins: the routed experts to Q4_0, every other quantizable matrix to F16
            "--tensor-type", r"_exps\.weight=q4_0", "--tensor-type", ".=f16",
            str(src), str(dst), "Q4_0", str(threads)]
    with open(log, "w") as f:
        f.write(" ".join(args) + "\n")
        f.flush()
        rc = subprocess.run(args, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        die(f"llama-quantize exited {rc}; see {log}")


def verify(path: Path, expect_q4: bool) -> dict:
    """Tensor types of a GGUF; with expect_q4, fail unless experts are Q4_0 and other matrices F16."""
    import gguf

    r = gguf.GGUFReader(str(path))
    by_type: dict[str, dict[str, int]] = {}
    bad: list[str] = []
    for t in r.tensors:
        ty = t.tensor_type.name
        s = by_type.setdefault(ty, {"tensors": 0, "bytes": 0})
        s["tensors"] += 1
        s["bytes"] += int(t.n_bytes)
        is_expert = t.name.endswith(EXPERT_SUFFIXES)
        matrix = len(t.shape) >= 2 and "ffn_gate_inp.weight" not in t.name  # llama-quantize's rule
        if expect_q4:
            if is_expert and ty != "Q4_0":
                bad.append(f"{t.name}={ty} (want Q4_0)")
            elif not is_expert and matrix and ty != "F16":
                bad.append(f"{t.name}={ty} (want F16)")
            elif not is_expert and ty not in ("F16", "F32"):
                bad.append(f"{t.name}={ty} (want F16 or F32)")
    arch = r.get_field("general.architecture")
    info = {
        "file": str(path),
        "bytes": path.stat().st_size,
        "architecture": arch.contents() if arch is not None else None,
        "tensors": len(r.tensors),
        "types": by_type,
        "mismatches": bad,
    }
    return info


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llama-src", type=Path, required=True)
    p.add_argument("--checkpoint", type=Path)
    p.add_argument("--arch", default="", help="name for general.name (default: the checkpoint's horizon-synth.json arch)")
    p.add_argument("--f16", type=Path, help="F16 GGUF to write")
    p.add_argument("--quantize", help="llama-quantize binary")
    p.add_argument("--q4", type=Path, help="experts-Q4_0 GGUF to write")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--drop-f16", action="store_true", help="remove the F16 GGUF once the Q4 one is verified")
    p.add_argument("--drop-checkpoint", action="store_true",
                   help="remove the checkpoint folder once the F16 GGUF is written (so that the checkpoint, "
                        "the F16 and the Q4 GGUF are never all on disk at once)")
    p.add_argument("--verify", type=Path, help="only report (and check) this GGUF's tensor types")
    p.add_argument("--expect-q4-experts", action="store_true")
    p.add_argument("--summary", type=Path, help="write the type report(s) here as JSON")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    conversion = import_llamacpp(a.llama_src)
    reports = []
    if a.verify:
        reports.append(verify(a.verify, a.expect_q4_experts))
    else:
        if not a.f16:
            die("--f16 is required (or --verify FILE)")
        if bool(a.quantize) != bool(a.q4):
            die("--quantize and --q4 go together")
        if not a.checkpoint and not (a.quantize and a.f16.is_file()):
            die("--checkpoint is required, unless --quantize turns an existing --f16 GGUF into --q4")
        if a.checkpoint:
            arch = a.arch
            if not arch:
                try:
                    arch = json.loads((a.checkpoint / "horizon-synth.json").read_text()).get("arch", "")
                except (OSError, ValueError):
                    arch = ""
            arch = arch or a.checkpoint.name
            t0 = time.monotonic()
            convert(conversion, a.checkpoint, a.f16, arch)
            print(f"gguf_synth: F16 GGUF {a.f16} ({a.f16.stat().st_size} bytes) in {time.monotonic() - t0:.1f} s")
            if a.drop_checkpoint:
                shutil.rmtree(a.checkpoint)
        else:
            print(f"gguf_synth: F16 GGUF {a.f16} ({a.f16.stat().st_size} bytes) made before (no --checkpoint)")
        reports.append(verify(a.f16, False))
        if a.quantize:
            t0 = time.monotonic()
            quantize(a.quantize, a.f16, a.q4, a.threads, a.q4.with_suffix(".quantize.log"))
            print(f"gguf_synth: experts-Q4_0 GGUF {a.q4} ({a.q4.stat().st_size} bytes) in {time.monotonic() - t0:.1f} s")
            reports.append(verify(a.q4, True))
    for rep in reports:
        types_s = ", ".join(f"{k}: {v['tensors']} tensors {v['bytes']} B" for k, v in sorted(rep["types"].items()))
        print(f"gguf_synth: {rep['file']}: {rep['architecture']}, {rep['tensors']} tensors; {types_s}")
    if a.summary:
        a.summary.write_text(json.dumps(reports, indent=1) + "\n")
    bad = [m for rep in reports for m in rep["mismatches"]]
    if bad:
        die(f"{len(bad)} tensors of the wrong type, e.g. {bad[:4]}")
    if a.drop_f16 and a.q4 and a.f16:
        a.f16.unlink()


if __name__ == "__main__":
    main()
