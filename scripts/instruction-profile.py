#!/usr/bin/env python3
"""instruction-profile.py NODES.csv GRAPHS.csv ARCH HBM_TBS

Maps the kernel nodes of a graph-full decode step (Nsight Compute CSV, one row per kernel and metric)
to the step plan's instructions (runtime/plan; the CUDA stepper issues them in plan order,
runtime/cuda/step_plan.go) and prints, per instruction kind, the kernels, time, DRAM bytes, the time
those bytes take at HBM_TBS TB/s, and the achieved bandwidth, for the last complete step. A kernel
that does not fit the expected sequence stops the mapping with a message naming it.
"""
import collections
import csv
import sys


def rows(path):
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    kernels = collections.OrderedDict()
    for r in csv.DictReader(lines):
        k = kernels.setdefault(r["ID"], {"name": r["Kernel Name"]})
        v = r["Metric Value"].replace(",", "")
        try:
            v = float(v)
        except ValueError:
            continue
        unit = r.get("Metric Unit", "")
        if r["Metric Name"] == "gpu__time_duration.sum":
            k["us"] = v / 1e3 if unit in ("nsecond", "ns", "") else v if unit in ("usecond", "us") else v * 1e3
        elif r["Metric Name"].startswith("dram__bytes"):
            scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}.get(unit, 1)
            k[r["Metric Name"]] = v * scale
    return list(kernels.values())


def steps(ks):
    """Split the kernel list at embed_step: each step is embed .. argmax (graph-full runs the body
    graph, then the head graph)."""
    out, cur = [], None
    for k in ks:
        if k["name"] == "embed_step":
            cur = [k]
            out.append(cur)
        elif cur is not None:
            cur.append(k)
    return [s for s in out if s and s[-1]["name"].startswith("argmax")]


def instructions(step):
    """Yield (instruction, [kernels]) in plan order."""
    i = 0
    n = len(step)

    def take(pred, what):
        nonlocal i
        if i >= n or not pred(step[i]["name"]):
            got = step[i]["name"] if i < n else "end of step"
            raise ValueError(f"kernel {i}: {got}, expected {what}")
        i += 1
        return step[i - 1]

    yield "embed", [take(lambda s: s == "embed_step", "embed_step")]
    while i < n:
        # head: lm_head matvec then argmax
        if i + 1 < n and step[i + 1]["name"].startswith("argmax"):
            yield "head", [take(lambda s: s.startswith("matvec_f16"), "lm_head matvec")]
            yield "select", [take(lambda s: s.startswith("argmax"), "argmax_step")]
            continue
        ks = [take(lambda s: s.startswith("matvec_f16"), "q|k|v matvec")]
        while i < n and step[i]["name"].removesuffix("_kv16") in ("qk_norm_rope_kv_step", "qk_norm_step", "rope_kv_step"):
            ks.append(step[i])
            i += 1
        yield "attn-in", ks
        ks = [take(lambda s: s.startswith("attention"), "attention kernel")]
        while i < n and step[i]["name"].startswith("attention"):  # split: scores, then pv
            ks.append(step[i])
            i += 1
        yield "attention", ks
        yield "attn-out", [take(lambda s: s.startswith("matvec_f16"), "o_proj matvec")]

        def branch():
            """The shared-expert branch (graph-full's default on a model with a shared expert,
            runtime/cuda/step_shared_fork.go): gate|up|mix matvec, silu_mul, down matvec, found
            where the profiler lists the side stream's nodes (before route or after the experts)."""
            nonlocal i
            if (i + 2 < n and step[i]["name"].startswith("matvec_f16") and step[i + 1]["name"].startswith("silu")
                    and step[i + 2]["name"].startswith("matvec_f16")):
                i += 3
                return step[i - 3:i]
            return []

        shared = branch()
        yield "route", [take(lambda s: s.startswith("matvec_f16"), "router matvec"), take(lambda s: s == "route_step", "route_step")]
        ks = []
        while i < n and step[i]["name"].startswith("experts_"):
            ks.append(step[i])
            i += 1
        if not ks:
            raise ValueError(f"kernel {i}: {step[i]['name']}, expected routed expert kernels")
        yield "routed-experts", ks
        if not shared:
            shared = branch()
        if shared:
            # the join: only the gated residual add follows it
            shared.append(take(lambda s: s.startswith("add_gated"), "add_gated_resid_step"))
            yield "shared-expert", shared
        elif i + 1 < n and step[i]["name"].startswith("matvec_f16") and step[i + 1]["name"].startswith("silu"):
            ks = [step[i], step[i + 1]]
            i += 2
            ks.append(take(lambda s: s.startswith("matvec_f16"), "shared down matvec"))
            ks.append(take(lambda s: s.startswith("add_gated"), "add_gated_resid_step"))
            yield "shared-expert", ks
        elif i + 1 < n and step[i]["name"].startswith("matvec_f16") and step[i + 1]["name"].startswith("shared_down"):
            # one shared_down_f16 launch: SiLU·up, the down rows, the gated residual
            yield "shared-expert", [step[i], step[i + 1]]
            i += 2
        if i < n and step[i]["name"] == "add":
            yield "moe-residual", [step[i]]
            i += 1


def main():
    nodes, graphs, arch, tbs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    ks = rows(nodes)
    st = steps(ks)
    if not st:
        print(f"{arch}: no complete step among {len(ks)} kernel nodes")
        return
    step = st[-1]
    agg = collections.OrderedDict()
    try:
        for name, kk in instructions(step):
            a = agg.setdefault(name, {"n": 0, "kernels": 0, "us": 0.0, "bytes": 0.0, "names": collections.Counter()})
            a["n"] += 1
            a["kernels"] += len(kk)
            for k in kk:
                a["us"] += k.get("us", 0.0)
                a["bytes"] += k.get("dram__bytes_read.sum", 0.0) + k.get("dram__bytes_write.sum", 0.0)
                a["names"][k["name"]] += 1
    except ValueError as e:
        print(f"{arch}: mapping stopped: {e}")
        return
    have_bytes = any(a["bytes"] > 0 for a in agg.values())
    tot_us = sum(a["us"] for a in agg.values())
    tot_b = sum(a["bytes"] for a in agg.values())
    print(f"\n{arch}: last complete step of {len(st)}: {len(step)} kernel nodes, {tot_us:.1f} us of kernels"
          + (f", {tot_b / 1e6:.1f} MB DRAM, HBM time {tot_b / (tbs * 1e12) * 1e6:.1f} us at {tbs} TB/s" if have_bytes else ""))
    print(f"| instruction | count | kernels | kernel time (us) | share | DRAM MB | HBM time (us) | achieved GB/s | of HBM | kernels used |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, a in agg.items():
        hbm = a["bytes"] / (tbs * 1e12) * 1e6
        bw = a["bytes"] / (a["us"] * 1e-6) / 1e9 if a["us"] > 0 else 0
        names = ", ".join(f"{k} x{v}" for k, v in a["names"].items())
        print(f"| {name} | {a['n']} | {a['kernels']} | {a['us']:.1f} | {a['us'] / tot_us:.0%} | {a['bytes'] / 1e6:.1f} | {hbm:.1f} | {bw:.0f} | {bw / (tbs * 1e3):.0%} | {names} |")
    g = [k for k in rows(graphs) if "us" in k]
    if g:
        # graph-full: per decode step one body graph and one head graph, in launch order
        last = g[-2:] if len(g) >= 2 else g
        gus = sum(k["us"] for k in last)
        print(f"graph launches: {len(g)}; the last two (body + head) take {gus:.1f} us on the device, "
              f"{gus - tot_us:.1f} us more than their kernels alone ({len(step)} kernels: "
              f"{(gus - tot_us) / max(1, len(step) - 1):.2f} us per boundary)")


if __name__ == "__main__":
    main()
