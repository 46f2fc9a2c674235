#!/usr/bin/env python3
"""c30-ab.py: per-miss time of the c30 batched prefill, from editions' raw records.

For every edition given and every partial-residency configuration in it, per prompt length (mean
over the blocks' requests of that length): the prefill seconds, the misses, the time a miss adds
((prefill - the full-residency configuration's prefill at that length) / misses; the reference
shares the checkpoint, prefill mode, expert format and activation and KV dtypes, from the same
edition, else from --ref EDITION) and the transfer model (record bytes / the
workers' median measured H2D bandwidth). Standard library only.

  python3 results/s42/c30-ab.py editions/c30-prefill-s42 editions/c30-prefill-s42-old
  python3 results/s42/c30-ab.py editions/prefill-v1            # session 40's, for comparison
"""
import glob
import json
import os
import statistics
import sys


def load(ed):
    confs = {}
    for f in sorted(glob.glob(os.path.join(ed, "raw", "*", "block-*.json"))):
        with open(f) as fh:
            r = json.load(fh)
        a, k = r["artifact"], r["checkpoint"]
        key = (k.get("arch"), k.get("seed"), r["setup"].get("prefill"), a.get("expert_format"), a.get("activation_dtype"), a.get("kv_dtype"))
        c = confs.setdefault(r["config_id"], {"setup": r["setup"], "record": a["record_bytes"], "key": key, "h2d": [], "by_len": {}})
        bw = r["observations"].get("h2d_bandwidth_bytes_per_s")
        if isinstance(bw, (int, float)):
            c["h2d"].append(bw)
        for q in r["requests"]:
            if not isinstance(q.get("prefill_seconds"), (int, float)):
                continue
            c["by_len"].setdefault(q["prompt_tokens"], []).append((q["prefill_seconds"], q["cache"]["misses"]))
    return confs


def full_refs(confs):
    """The full-residency configurations by key: the checkpoint, the prefill mode, the expert
    format and the activation and KV dtypes a partial configuration must share with its
    reference."""
    out = {}
    for cid, c in sorted(confs.items()):
        s = c["setup"]
        if s["capacity"] == s["model"]["experts_per_layer"]:
            out.setdefault(c["key"], (cid, {n: statistics.mean(p for p, _ in v) for n, v in c["by_len"].items()}))
    return out


def main(args):
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 2 if not args else 0
    ref_ed = None
    if "--ref" in args:
        i = args.index("--ref")
        ref_ed = args[i + 1]
        args = args[:i] + args[i + 2:]
    fallback = full_refs(load(ref_ed)) if ref_ed else {}
    for ed in args:
        if not os.path.isdir(os.path.join(ed, "raw")):
            print(f"c30-ab: {ed}: no raw/ directory: not an edition", file=sys.stderr)
            return 2
        confs = load(ed)
        refs = full_refs(confs)
        print(f"## {ed}\n")
        print("| configuration | reference | transport | spares | prompt | prefill (ms) | misses | ms a miss | transfer model (ms a miss) |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for cid, c in sorted(confs.items()):
            s = c["setup"]
            if s["capacity"] == s["model"]["experts_per_layer"]:
                continue
            rid, ref = refs.get(c["key"]) or fallback.get(c["key"]) or ("none", {})
            h2d = statistics.median(c["h2d"]) if c["h2d"] else None
            model = f"{1e3 * c['record'] / h2d:.3f}" if h2d else "UNKNOWN"
            for n, v in sorted(c["by_len"].items()):
                pre = statistics.mean(p for p, _ in v)
                miss = statistics.mean(m for _, m in v)
                per = f"{1e3 * (pre - ref[n]) / miss:.3f}" if n in ref and miss > 0 else "UNKNOWN"
                print(f"| {cid} | {rid} | {s.get('transport', '?')} | {s.get('spares', '?')} | {n} | {1e3 * pre:.1f} | {miss:.0f} | {per} | {model} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
