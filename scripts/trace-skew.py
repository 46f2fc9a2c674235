#!/usr/bin/env python3
"""trace-skew.py EDITION_DIR CONFIG:EXPERTS:TOP [CONFIG:EXPERTS:TOP ...]

How concentrated the routing is: for each layer of each configuration, the share of the measured
requests' routed lookups (raw records' routing_trace lease events, eviction-trace-v1) that go to the
layer's TOP most used experts, against TOP/EXPERTS for uniform routing, the most and least used
expert's count over the mean, and the experts never used. Markdown on stdout.
"""
import base64
import collections
import glob
import json
import sys


def events(data):
    b = base64.b64decode(data)
    i = 0
    while i < len(b):
        kind, layer, n = b[i], b[i + 1], b[i + 2]
        yield kind, layer, list(b[i + 3:i + 3 + n])
        i += 3 + n


def main():
    ed = sys.argv[1]
    for spec in sys.argv[2:]:
        cfg, E, C = spec.split(":")
        E, C = int(E), int(C)
        cnt = collections.defaultdict(collections.Counter)
        for f in sorted(glob.glob(f"{ed}/raw/{cfg}/block-*.json")):
            d = json.load(open(f))
            for r in d["requests"]:
                for kind, layer, ids in events(r["routing_trace"]["data"]):
                    if kind == 1:  # lease: a routed group
                        cnt[layer].update(ids)
        print(f"**{cfg}** ({E} experts): share of measured lookups that go to each layer's {C} most used experts\n")
        print(f"| layer | lookups | top-{C} share | uniform would be | max / mean | min / mean | experts never used |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for layer in sorted(cnt):
            c = cnt[layer]
            tot = sum(c.values())
            vals = sorted((c.get(e, 0) for e in range(E)), reverse=True)
            mean = tot / E
            print(f"| {layer} | {tot} | {sum(vals[:C]) / tot:.1%} | {C / E:.1%} | {vals[0] / mean:.2f} | {vals[-1] / mean:.2f} | {sum(1 for v in vals if v == 0)} |")
        print()


if __name__ == "__main__":
    main()
