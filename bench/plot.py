#!/usr/bin/env python3
"""PNG plots from run_all.py's JSON, drawn by gnuplot (Debian's gnuplot-nox).

  restart.png  worker crash -> all replacement workers running: ddprun and torchrun, single
               node and 2 and 4 agents (log scale)
  scale.png    rendezvous round and restart round against N simulated agents, ddprun-master
               and the bare gRPC floor, sessions over 64 connections and one per agent
  torch_restart.png
               a real PyTorch job's crash -> every rank past its first all-reduce, split
               where each rank's steps fall: script running, import torch, process group,
               first all-reduce; ddprun --preload, ddprun and torchrun, 1x8 and 2x2

  bench/plot.py RESULTS_DIR
"""
import json
import os
import statistics
import subprocess
import sys


def load(results, name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def restart_plot(results):
    single, multi = load(results, "single_node.json"), load(results, "multi_node.json")
    if not single or not multi:
        return None
    rows = [("1 node", single, "restart_ms_nproc2"), ("2 agents", multi, "restart_ms_2_agents"),
            ("4 agents", multi, "restart_ms_4_agents")]
    launchers = [l for l in ("ddprun", "torchrun-0.1s", "torchrun-1.13-default") if l in multi]
    data = os.path.join(results, "restart.dat")
    with open(data, "w") as f:
        f.write("# case " + " ".join(launchers) + "\n")
        for label, src, key in rows:
            cells = [f"{src[l][key]['median']:.2f}" if src.get(l, {}).get(key) else "NaN"
                     for l in launchers]
            f.write(f'"{label}" ' + " ".join(cells) + "\n")
    cols = ", ".join(f"'{data}' using {i + 2}:xtic(1) title '{l}'" for i, l in enumerate(launchers))
    return f"""
set terminal pngcairo size 800,480
set output '{os.path.join(results, "restart.png")}'
set title 'Worker crash -> all replacement workers running (median, ms, log scale)'
set style data histograms
set style histogram clustered gap 1
set style fill solid border -1
set logscale y
set yrange [1:*]
set key top left
set grid ytics
plot {cols}
"""


def scale_plot(results):
    scale = load(results, "scale.json")
    if not scale:
        return None
    series = []
    for master in scale:
        if master == "failure-news":  # its own cells: not a round's time
            continue
        for mode in ("shared-64", "one-per-agent"):
            for metric in ("round_ms", "restart_ms"):
                points = []
                for key, r in scale[master].items():
                    m, n = key.split("/")
                    if m != mode or "error" in r:
                        continue
                    v = r[metric]
                    v = statistics.median(v) if isinstance(v, list) else v
                    points.append((int(n), v))
                if points:
                    name = f"{master} {mode} {metric.replace('_ms', '')}"
                    path = os.path.join(results, f"scale-{master}-{mode}-{metric}.dat")
                    with open(path, "w") as f:
                        for n, v in sorted(points):
                            f.write(f"{n} {v:.2f}\n")
                    series.append((path, name))
    plots = ", ".join(f"'{p}' using 1:2 with linespoints title '{t}'" for p, t in series)
    return f"""
set terminal pngcairo size 900,760
set output '{os.path.join(results, "scale.png")}'
set title 'Rendezvous at scale: time for every agent to hold its assignment (ms)'
set logscale xy
set xrange [80:30000]
set xlabel 'simulated agents'
set ylabel 'ms'
# Below the chart, in two columns: beside it, the legend took more room than the data.
set key outside below maxrows 6
set grid
plot {plots}
"""


def torch_restart_plot(results):
    runs = load(results, "torch_restart.json")
    if not runs:
        return None
    # Each bar stacks the medians' steps: the first line, then what each next step added.
    steps = [("first_line_ms", "launcher + interpreter"), ("imported_ms", "import torch"),
             ("grouped_ms", "init_process_group"), ("all_reduce_ms", "first all-reduce")]
    data = os.path.join(results, "torch_restart.dat")
    with open(data, "w") as f:
        f.write("# case " + " ".join(name for _, name in steps) + "\n")
        for shape, by_launcher in runs.items():
            for launcher in ("ddprun --preload", "ddprun", "torchrun"):
                r = by_launcher.get(launcher, {})
                if not all(r.get(key) for key, _ in steps):
                    continue
                marks = [r[key]["median"] for key, _ in steps]
                parts = [marks[0]] + [max(0.0, b - a) for a, b in zip(marks, marks[1:])]
                f.write(f'"{shape} {launcher}" ' + " ".join(f"{v:.1f}" for v in parts) + "\n")
    cols = ", ".join(f"'{data}' using {i + 2}{':xtic(1)' if i == 0 else ''} title '{name}'"
                     for i, (_, name) in enumerate(steps))
    return f"""
set terminal pngcairo size 1000,480 noenhanced
set output '{os.path.join(results, "torch_restart.png")}'
set title 'A PyTorch DDP job: crash -> every rank past each step (median, ms)'
set style data histograms
set style histogram rowstacked
set style fill solid border -1
set boxwidth 0.6
set xtics rotate by -20
set key outside right top
set grid ytics
plot {cols}
"""


def main():
    results = sys.argv[1]
    for script in (restart_plot(results), scale_plot(results), torch_restart_plot(results)):
        if script:
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print("plots in", results)


if __name__ == "__main__":
    main()
