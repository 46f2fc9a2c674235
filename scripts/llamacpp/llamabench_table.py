#!/usr/bin/env python3
"""llamabench_table.py: a plain-text table of llama-bench JSON-lines results (docs/peers.md).

Usage: llamabench_table.py RESULTS.jsonl [...]

Reads every line that is a JSON object (llama-bench -o jsonl writes one per test) and prints one
row per test: the model file, the test (ppN at depth 0, tgN @ dD), tokens/s as mean +- stddev
over the repetitions, the repetition count, and the settings that shape the number (flash
attention, GPU layers, batch/ubatch, KV types). A label, not a claim: see docs/peers.md.
"""
import json
import sys


def rows(paths):
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        yield json.loads(line)
                    except ValueError:
                        print(f"llamabench_table: skipped a malformed line in {path}", file=sys.stderr)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rs = list(rows(sys.argv[1:]))
    if not rs:
        print("llamabench_table: no results", file=sys.stderr)
        return 1
    head = f"{'model':<34} {'test':<16} {'t/s':>22} {'reps':>4}  settings"
    print(head)
    print("-" * len(head))
    for r in rs:
        n_p, n_g, d = int(r.get("n_prompt", 0)), int(r.get("n_gen", 0)), int(r.get("n_depth", 0))
        test = f"pp{n_p}" if n_g == 0 else (f"tg{n_g}" if n_p == 0 else f"pp{n_p}+tg{n_g}")
        if d:
            test += f" @ d{d}"
        reps = len(r.get("samples_ts") or []) or "?"
        ts = f"{float(r.get('avg_ts', 0)):.2f} +- {float(r.get('stddev_ts', 0)):.2f}"
        model = str(r.get("model_filename", "?")).rsplit("/", 1)[-1]
        sett = (f"fa={r.get('flash_attn')} ngl={r.get('n_gpu_layers')} b={r.get('n_batch')}/{r.get('n_ubatch')} "
                f"kv={r.get('type_k')}/{r.get('type_v')}")
        print(f"{model:<34} {test:<16} {ts:>22} {reps:>4}  {sett}")
    first = rs[0]
    print(f"\nbuild {first.get('build_commit')} ({first.get('build_number')}); backends {first.get('backends')}; "
          f"gpu {first.get('gpu_info')}; cpu {first.get('cpu_info')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
