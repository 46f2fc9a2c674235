#!/usr/bin/env python3
"""Peer baseline: Hugging Face transformers on our synthetic checkpoints, under PERF-REAL-v1's
prompts, token count and EOS policy.

For each checkpoint this script runs transformers' OlmoeForCausalLM / Qwen2MoeForCausalLM in
BF16 on the GPU, batch 1, in two modes:
  eager     model.generate with the default dynamic cache and the default experts backend;
  compiled  generation_config.cache_implementation="static" and
            compile_config=CompileConfig(fullgraph=False, mode="reduce-overhead") (the only
            compiled path that worked in transformers 5.17, GPU-NOTES.md).
Each mode runs one excluded warmup request (the contract's warmup prompt, 64 tokens), then the
contract's 12 prompts in order, `--blocks` times (PERF-REAL-v1 has 3).

Prompts are tokenised exactly as Horizon does for synthetic checkpoints: one id per UTF-8 byte.
Greedy (do_sample=False); EOS suppressed with min_new_tokens = max_new_tokens = 128, so
every request yields exactly 128 tokens.

Timing boundaries (this script's own, stated in the output):
  admission   time.perf_counter() just before model.generate is called (after tokenisation,
              inputs already on the GPU);
  token i     the streamer's put() for token i after torch.cuda.synchronize() (the token is on
              the host: generate hands it to the streamer as a tensor we read with .item());
  TTFT        token 0 - admission; decode = token N-1 - token 0; runtime = token N-1 - admission.
Pooled decode tok/s = sum(N-1)/sum(decode), as in PERF-REAL-v1.

Usage (GPU machine, repository root):
  python3 scripts/baseline_hf.py --bin carry/horizon-bench-cuda --arch olmoe-1b-7b --seed 924 \\
      --work /tmp/baseline --blocks 1 --out baseline.json
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
import yaml


class Stamps:
    """A generate() streamer that records when each new token reaches the host."""

    def __init__(self):
        self.times, self.ids, self.prompt_seen = [], [], False

    def put(self, value):
        if not self.prompt_seen:  # generate first puts the prompt
            self.prompt_seen = True
            return
        torch.cuda.synchronize()
        self.ids.append(int(value.reshape(-1)[0].item()))
        self.times.append(time.perf_counter())

    def end(self):
        pass


def run_request(model, ids, tokens, gen_kwargs):
    inp = torch.tensor([ids], device="cuda")
    st = Stamps()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), max_new_tokens=tokens,
                   min_new_tokens=tokens, do_sample=False, streamer=st, **gen_kwargs)
    n = len(st.times)
    return {"n": n, "token_ids": st.ids, "ttft_seconds": st.times[0] - t0,
            "decode_seconds": st.times[-1] - st.times[0], "runtime_seconds": st.times[-1] - t0}


def run_mode(model, mode, contract, blocks):
    import transformers
    gen_kwargs = {}
    if mode == "compiled":
        model.generation_config.cache_implementation = "static"
        gen_kwargs["compile_config"] = transformers.CompileConfig(fullgraph=False, mode="reduce-overhead")
    else:
        model.generation_config.cache_implementation = None
    out = {"mode": mode, "requests": []}
    w = contract["warmup"]
    t = time.perf_counter()
    # The contract's warmup is one 64-token request. A static-cache compiled
    # generate recompiles for a new output length, so compiled mode warms up
    # with the measured length too (twice), or the first measured request
    # would time the compiler.
    warm = [w["output_tokens"]] if mode == "eager" else [w["output_tokens"], contract["output_tokens"], contract["output_tokens"]]
    for n in warm:
        run_request(model, list(w["prompt"]["text"].encode()), n, gen_kwargs)
    out["warmup_requests_excluded"] = warm
    out["warmup_seconds_excluded"] = time.perf_counter() - t
    for b in range(1, blocks + 1):
        for p in contract["prompts"]:
            r = run_request(model, list(p["text"].encode()), contract["output_tokens"], gen_kwargs)
            r.update(block=b, prompt_id=p["id"])
            out["requests"].append(r)
            print(mode, b, p["id"], r["n"], round((r["n"] - 1) / r["decode_seconds"], 1), "tok/s",
                  file=sys.stderr, flush=True)
    rq = out["requests"]
    out["pooled_decode_tok_s"] = sum(r["n"] - 1 for r in rq) / sum(r["decode_seconds"] for r in rq)
    out["overall_output_tok_s"] = sum(r["n"] for r in rq) / sum(r["runtime_seconds"] for r in rq)
    out["ttft_mean_s"] = sum(r["ttft_seconds"] for r in rq) / len(rq)
    out["all_requests_have_n_tokens"] = all(r["n"] == contract["output_tokens"] for r in rq)
    out["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="horizon-bench binary (writes the synthetic checkpoint)")
    ap.add_argument("--arch", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--modes", default="eager,compiled")
    ap.add_argument("--contract", default="contracts/perf-real-v1.yaml")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import transformers
    contract = yaml.safe_load(open(args.contract))
    ckpt = os.path.join(args.work, f"{args.arch}-{args.seed}")
    if not os.path.exists(ckpt):
        subprocess.run([args.bin, "synth", "--arch", args.arch, "--seed", str(args.seed), "--out", ckpt], check=True)
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    cls = {"olmoe": transformers.OlmoeForCausalLM, "qwen2_moe": transformers.Qwen2MoeForCausalLM}[cfg["model_type"]]
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    model = cls.from_pretrained(ckpt, dtype=torch.bfloat16).to("cuda").eval()
    load_s = time.perf_counter() - t
    doc = {"schema": "horizon.baseline-hf", "version": 1, "contract": contract["id"],
           "checkpoint": {"kind": "synthetic", "arch": args.arch, "seed": args.seed},
           "gpu": torch.cuda.get_device_name(0), "transformers": transformers.__version__,
           "torch": torch.__version__, "dtype": "bfloat16", "blocks": args.blocks,
           "boundaries": {"admission": "perf_counter before model.generate, inputs on the GPU",
                          "token": "streamer put() after cuda synchronize, token read to host",
                          "ttft": "token 0 - admission", "decode": "token N-1 - token 0",
                          "runtime": "token N-1 - admission"},
           "eos_policy": "min_new_tokens = max_new_tokens (EOS cannot end a request)",
           "load_seconds": load_s, "modes": []}
    with torch.no_grad():
        for mode in args.modes.split(","):
            doc["modes"].append(run_mode(model, mode, contract, args.blocks))
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps({m["mode"]: round(m["pooled_decode_tok_s"], 1) for m in doc["modes"]}))


if __name__ == "__main__":
    main()
