#!/usr/bin/env python3
"""Cut nvidia-smi samples to BenchmarkDecodeDepth's decode windows (session 28, call 6).

usage: power.py SMI.csv BENCH.log...  -- SMI.csv from
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw.instant,power.limit,temperature.gpu,clocks_event_reasons.active --format=csv,noheader,nounits -lms 50
For each window ("decode window A .. B (n tokens)" lines, each under its benchmark's name) it prints
the samples inside it: SM clock min/median, power median/max against the limit, the hottest
temperature and every clock-event reason seen (0x4 software power cap, 0x8 hardware slowdown,
0x20/0x40 thermal, 0x80 power brake; 0x1 idle).
"""
import re
import statistics
import sys
from datetime import datetime

FMT = "%Y/%m/%d %H:%M:%S.%f"


def num(s):
    try:
        return float(s)
    except ValueError:
        return None


def main():
    rows = []
    for line in open(sys.argv[1]):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 7:
            continue
        try:
            t = datetime.strptime(f[0], FMT)
        except ValueError:
            continue
        rows.append((t, num(f[1]), num(f[3]), num(f[4]), num(f[5]), f[6]))
    for log in sys.argv[2:]:
        name = None
        for line in open(log):
            m = re.match(r"\s*(?:--- BENCH: )?(BenchmarkDecodeDepth\S*)", line)
            if m and "decode window" not in line:
                name = m.group(1)
            w = re.search(r"decode window (\S+ \S+) \.\. (\S+ \S+) \((\d+) tokens\)", line)
            if not w:
                continue
            a, b = datetime.strptime(w.group(1), FMT), datetime.strptime(w.group(2), FMT)
            inside = [r for r in rows if a <= r[0] <= b]
            if not inside:
                print(f"{name}: {w.group(3)} tokens, {(b - a).total_seconds():.2f} s: no samples")
                continue
            clk = [r[1] for r in inside if r[1] is not None]
            pw = [r[2] for r in inside if r[2] is not None]
            lim = max((r[3] for r in inside if r[3] is not None), default=None)
            temp = max((r[4] for r in inside if r[4] is not None), default=None)
            reasons = sorted({r[5] for r in inside})
            print(f"{name}: {w.group(3)} tokens in {(b - a).total_seconds():.2f} s, {len(inside)} samples: "
                  f"SM clock min {min(clk):.0f} median {statistics.median(clk):.0f} MHz; "
                  f"power median {statistics.median(pw):.0f} max {max(pw):.0f} W of {lim}; "
                  f"max {temp} C; reasons {' '.join(reasons)}")


if __name__ == "__main__":
    main()
