#!/usr/bin/env python3
"""Peer baseline: Hugging Face transformers on our synthetic checkpoints, under PERF-REAL-v1's
prompts, token count and EOS policy.

For one checkpoint (OLMoE shape: OlmoeForCausalLM; Qwen1.5-MoE shape: Qwen2MoeForCausalLM, picked
by config.json's model_type) this script runs transformers in BF16 on the GPU, batch 1, in one or
both modes:
  eager     model.generate with the default dynamic cache and the default experts backend;
  compiled  generation_config.cache_implementation="static" and
            compile_config=CompileConfig(fullgraph=False, mode="reduce-overhead"): generate's own
            compile (the only compiled path that worked in transformers 5.17, GPU-NOTES.md).
Each mode runs the contract's excluded warmup request (its warmup prompt, 64 tokens; compiled mode
also two requests at the measured length, or the first measured request would time the
compiler), then the contract's 12 prompts in order, `--blocks` times (PERF-REAL-v1 has 3).

Prompts are tokenised with the checkpoint's tokenizer.json (HF `tokenizers`, no special tokens)
and must give the ids Horizon uses for synthetic checkpoints, one id per UTF-8 byte; the script
stops if they differ. Greedy (do_sample=False); EOS suppressed: eos_token_id is the config's and
min_new_tokens = max_new_tokens = 128, so transformers masks the EOS logits at every step (as
Horizon does) and every request yields exactly 128 tokens.

Timing boundaries (this script's own, stated in the output JSON under "boundaries"):
  admission   time.perf_counter() just before model.generate is called (after tokenisation,
              inputs already on the GPU);
  token i     generate's streamer receives token i: put() runs torch.cuda.synchronize() and reads
              the id to the host (.item()), then takes the time;
  TTFT        token 0 - admission (includes prefill);
  decode      token N-1 - token 0; a request's decode tok/s = (N-1) / decode;
  runtime     token N-1 - admission.
Summary per mode, over the measured requests in order (block, then prompt): pooled decode tok/s =
sum(N-1) / sum(decode) as in PERF-REAL-v1, the median of the per-request decode tok/s, TTFT mean and
median, torch.cuda.max_memory_allocated / max_memory_reserved since the mode started (the weights
are included), and the device-wide used memory peak NVML reports for this GPU, sampled every 50 ms
by a thread through the mode (torch.cuda.device_memory_used, which maps CUDA_VISIBLE_DEVICES to
the NVML device; libnvidia-ml by the GPU's UUID as a fallback; null when neither works).

Usage (GPU machine, repository root):
  # on a checkpoint made with `horizon-bench synth --arch <arch> --seed <s> --out <dir>`
  python3 scripts/baseline_hf.py --checkpoint /tmp/ckpt/qwen15-moe-a27b-1 --blocks 1 \\
      --modes eager --out qwen-eager.json
  # or let it synthesise the checkpoint into --work first (the results/baseline-hf command)
  python3 scripts/baseline_hf.py --bin carry/horizon-bench-cuda --arch olmoe-1b-7b --seed 924 \\
      --work /tmp/baseline --blocks 1 --out baseline.json
  # one document from per-mode runs of the same checkpoint
  python3 scripts/baseline_hf.py --merge baseline.json eager.json compiled.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

SCHEMA, VERSION = "horizon.baseline-hf", 2

BOUNDARIES = {
    "admission": "time.perf_counter() before model.generate, inputs already on the GPU",
    "token": "generate's streamer put() for the token, after torch.cuda.synchronize() and .item()",
    "ttft": "token 0 - admission (includes prefill)",
    "decode": "token N-1 - token 0; per-request decode tok/s = (N-1) / decode",
    "runtime": "token N-1 - admission",
    "pooled_decode_tok_s": "sum(N-1) / sum(decode) over the mode's measured requests (PERF-REAL-v1)",
    "median_decode_tok_s": "median of the per-request decode tok/s",
    "max_memory_allocated_bytes": "torch.cuda.max_memory_allocated() since the mode started (weights included)",
    "nvml_device_used_peak_bytes": "device-wide used memory of this GPU (NVML), peak of 50 ms samples through the mode",
}


class Stamps:
    """A generate() streamer that records when each new token reaches the host."""

    def __init__(self, torch):
        self.torch = torch
        self.times, self.ids, self.prompt_seen = [], [], False

    def put(self, value):
        if not self.prompt_seen:  # generate first puts the prompt
            self.prompt_seen = True
            return
        self.torch.cuda.synchronize()
        self.ids.append(int(value.reshape(-1)[0].item()))
        self.times.append(time.perf_counter())

    def end(self):
        pass


class DeviceMemory:
    """Samples this GPU's device-wide used memory (NVML) on a thread; peak() stops and reports."""

    def __init__(self, torch, interval=0.05):
        self.read, self.source = self._reader(torch)
        self.samples, self.interval = [], interval
        self.stop = threading.Event()
        self.thread = None

    @staticmethod
    def _reader(torch):
        try:
            torch.cuda.device_memory_used(0)
            return (lambda: torch.cuda.device_memory_used(0)), "torch.cuda.device_memory_used"
        except Exception:
            pass
        try:
            # libnvidia-ml directly, the GPU found by the UUID CUDA gives for device 0.
            import ctypes

            class Memory(ctypes.Structure):
                _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            uuid = str(torch.cuda.get_device_properties(0).uuid)
            uuid = uuid if uuid.startswith("GPU-") else "GPU-" + uuid
            handle = ctypes.c_void_p()
            if lib.nvmlInit_v2() != 0 or lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(handle)) != 0:
                raise RuntimeError(f"NVML has no GPU {uuid}")

            def used():
                m = Memory()
                if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(m)) != 0:
                    raise RuntimeError("nvmlDeviceGetMemoryInfo failed")
                return m.used
            used()
            return used, "libnvidia-ml by UUID (ctypes)"
        except Exception as e:
            return None, f"unavailable: {e!r}"[:200]

    def start(self):
        if self.read is None:
            return self
        self.samples = [self.read()]

        def loop():
            while not self.stop.wait(self.interval):
                self.samples.append(self.read())
        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()
        return self

    def peak(self):
        if self.read is None:
            return None
        self.stop.set()
        self.thread.join()
        self.samples.append(self.read())
        return max(self.samples)


def run_request(torch, model, ids, tokens, gen_kwargs):
    inp = torch.tensor([ids], device="cuda")
    st = Stamps(torch)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), max_new_tokens=tokens,
                   min_new_tokens=tokens, do_sample=False, streamer=st, **gen_kwargs)
    n = len(st.times)
    decode = st.times[-1] - st.times[0]
    return {"n": n, "prompt_tokens": len(ids), "token_ids": st.ids, "ttft_seconds": st.times[0] - t0,
            "decode_seconds": decode, "runtime_seconds": st.times[-1] - t0,
            "decode_tok_s": (n - 1) / decode if decode > 0 else None}


def run_mode(torch, transformers, model, mode, contract, prompt_ids, blocks, eos_ids):
    gen_kwargs = {"eos_token_id": eos_ids, "pad_token_id": eos_ids[0]}
    if mode == "compiled":
        model.generation_config.cache_implementation = "static"
        gen_kwargs["compile_config"] = transformers.CompileConfig(fullgraph=False, mode="reduce-overhead")
    elif mode == "eager":
        model.generation_config.cache_implementation = None
    else:
        raise SystemExit(f"unknown mode {mode!r}: eager or compiled")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    mem = DeviceMemory(torch).start()
    out = {"mode": mode, "requests": []}
    w = contract["warmup"]
    t = time.perf_counter()
    # The contract's warmup is one 64-token request. A static-cache compiled generate recompiles
    # for a new output length, so compiled mode warms up at the measured length too (twice), or
    # the first measured request would time the compiler.
    warm = [w["output_tokens"]] if mode == "eager" else [w["output_tokens"], contract["output_tokens"], contract["output_tokens"]]
    for n in warm:
        run_request(torch, model, prompt_ids["warmup"], n, gen_kwargs)
    out["warmup_requests_excluded"] = warm
    out["warmup_seconds_excluded"] = time.perf_counter() - t
    for b in range(1, blocks + 1):
        for p in contract["prompts"]:
            r = run_request(torch, model, prompt_ids[p["id"]], contract["output_tokens"], gen_kwargs)
            r.update(block=b, prompt_id=p["id"])
            out["requests"].append(r)
            print(mode, b, p["id"], r["n"], round(r["decode_tok_s"] or 0, 1), "tok/s",
                  round(r["ttft_seconds"] * 1e3, 1), "ms TTFT", file=sys.stderr, flush=True)
    rq = out["requests"]
    rates = [r["decode_tok_s"] for r in rq if r["decode_tok_s"] is not None]
    out["pooled_decode_tok_s"] = sum(r["n"] - 1 for r in rq) / sum(r["decode_seconds"] for r in rq)
    out["median_decode_tok_s"] = statistics.median(rates) if rates else None
    out["overall_output_tok_s"] = sum(r["n"] for r in rq) / sum(r["runtime_seconds"] for r in rq)
    out["ttft_mean_s"] = statistics.fmean(r["ttft_seconds"] for r in rq)
    out["ttft_median_s"] = statistics.median(r["ttft_seconds"] for r in rq)
    out["all_requests_have_n_tokens"] = all(r["n"] == contract["output_tokens"] for r in rq)
    out["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
    out["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    out["nvml_device_used_peak_bytes"] = mem.peak()
    out["nvml_source"] = mem.source
    return out


def tokenize(ckpt, contract):
    """The contract's prompts as ids of the checkpoint's tokenizer.json, checked against Horizon's
    ids for synthetic checkpoints (one id per UTF-8 byte)."""
    texts = {"warmup": contract["warmup"]["prompt"]["text"]}
    texts.update((p["id"], p["text"]) for p in contract["prompts"])
    ids, info = {}, {"file": "tokenizer.json", "special_tokens": False}
    try:
        import tokenizers
        tok = tokenizers.Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json"))
        info["library"] = "tokenizers " + tokenizers.__version__
        for k, text in texts.items():
            ids[k] = tok.encode(text, add_special_tokens=False).ids
    except ImportError:
        info["library"] = "none (tokenizers not installed): UTF-8 bytes"
        ids = {k: list(t.encode("utf-8")) for k, t in texts.items()}
    bad = [k for k, t in texts.items() if ids[k] != list(t.encode("utf-8"))]
    if bad:
        raise SystemExit(f"{ckpt}/tokenizer.json does not give one id per UTF-8 byte for {bad}: "
                         "not the ids Horizon uses for synthetic checkpoints")
    info["ids_equal_utf8_bytes"] = True
    return ids, info


def load_model(torch, transformers, ckpt):
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    classes = {"olmoe": transformers.OlmoeForCausalLM, "qwen2_moe": transformers.Qwen2MoeForCausalLM}
    if cfg.get("model_type") not in classes:
        raise SystemExit(f"{ckpt}: model_type {cfg.get('model_type')!r}, want one of {sorted(classes)}")
    model, info = classes[cfg["model_type"]].from_pretrained(ckpt, dtype=torch.bfloat16, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")}
    if bad:
        # A silently re-initialised weight would measure another model.
        raise SystemExit(f"transformers did not load {ckpt} cleanly: {str(bad)[:2000]}")
    eos = cfg.get("eos_token_id")
    eos_ids = eos if isinstance(eos, list) else [eos] if eos is not None else []
    if not eos_ids:
        raise SystemExit(f"{ckpt}/config.json names no eos_token_id: EOS suppression would be a no-op")
    return model.to("cuda").eval(), cfg, eos_ids


def merge(out, inputs):
    docs = [json.load(open(p)) for p in inputs]
    keys = ("schema", "version", "contract", "checkpoint", "gpu", "transformers", "torch", "blocks")
    for d, p in zip(docs[1:], inputs[1:]):
        diff = [k for k in keys if d.get(k) != docs[0].get(k)]
        if diff:
            raise SystemExit(f"{p} differs from {inputs[0]} in {diff}: not one baseline")
    doc = dict(docs[0])
    doc["modes"] = [m for d in docs for m in d["modes"]]
    doc["load_seconds"] = [d["load_seconds"] for d in docs]
    doc["merged_from"] = [os.path.basename(p) for p in inputs]
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(summary(doc)))


def summary(doc):
    return {m["mode"]: {"pooled_decode_tok_s": round(m["pooled_decode_tok_s"], 1),
                        "median_decode_tok_s": round(m["median_decode_tok_s"], 1),
                        "ttft_median_ms": round(m["ttft_median_s"] * 1e3, 1),
                        "max_memory_allocated_gib": round(m["max_memory_allocated_bytes"] / 2**30, 2),
                        "nvml_device_used_peak_gib": None if m["nvml_device_used_peak_bytes"] is None
                        else round(m["nvml_device_used_peak_bytes"] / 2**30, 2)} for m in doc["modes"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", help="synthetic checkpoint directory (horizon-bench synth --out)")
    ap.add_argument("--bin", help="horizon-bench binary: synthesise --arch/--seed into --work when --checkpoint is not given")
    ap.add_argument("--arch")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--work")
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--modes", default="eager,compiled", help="comma list of eager, compiled")
    ap.add_argument("--contract", default="contracts/perf-real-v1.yaml")
    ap.add_argument("--out", help="JSON output")
    ap.add_argument("--merge", nargs="+", metavar=("OUT", "IN"), help="write OUT: the modes of the IN documents (one checkpoint) in one document")
    args = ap.parse_args()
    if args.merge:
        if len(args.merge) < 2:
            ap.error("--merge OUT IN [IN...]")
        return merge(args.merge[0], args.merge[1:])
    if not args.out or args.blocks < 1:
        ap.error("--out is required and --blocks must be at least 1")
    ckpt = args.checkpoint
    if ckpt is None:
        if not (args.bin and args.arch and args.seed is not None and args.work):
            ap.error("give --checkpoint, or --bin, --arch, --seed and --work to synthesise one")
        ckpt = os.path.join(args.work, f"{args.arch}-{args.seed}")
        if not os.path.exists(ckpt):
            subprocess.run([args.bin, "synth", "--arch", args.arch, "--seed", str(args.seed), "--out", ckpt], check=True)
    synth = {}
    if os.path.exists(os.path.join(ckpt, "horizon-synth.json")):
        synth = json.load(open(os.path.join(ckpt, "horizon-synth.json")))
    checkpoint = {"kind": "synthetic" if synth else "hf", "dir": os.path.abspath(ckpt),
                  "arch": synth.get("arch", args.arch), "seed": synth.get("seed", args.seed)}

    import torch
    import transformers
    import yaml
    contract = yaml.safe_load(open(args.contract))
    prompt_ids, tok_info = tokenize(ckpt, contract)
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    model, cfg, eos_ids = load_model(torch, transformers, ckpt)
    load_s = time.perf_counter() - t
    doc = {"schema": SCHEMA, "version": VERSION, "contract": contract["id"], "checkpoint": checkpoint,
           "model_class": type(model).__name__, "model_type": cfg["model_type"],
           "gpu": torch.cuda.get_device_name(0), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "transformers": transformers.__version__, "torch": torch.__version__, "dtype": "bfloat16",
           "batch": 1, "blocks": args.blocks, "output_tokens": contract["output_tokens"],
           "tokenizer": tok_info, "boundaries": BOUNDARIES,
           "eos_policy": f"eos_token_id={eos_ids} with min_new_tokens = max_new_tokens: EOS logits masked at every step",
           "warmup_policy": "excluded: the contract's 64-token warmup request; compiled mode also two at the measured length",
           "load_seconds": load_s, "modes": []}
    with torch.no_grad():
        for mode in args.modes.split(","):
            doc["modes"].append(run_mode(torch, transformers, model, mode.strip(), contract, prompt_ids, args.blocks, eos_ids))
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, args.out)
    print(json.dumps(summary(doc)))


if __name__ == "__main__":
    main()
