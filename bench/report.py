"""What the benchmarks share: summaries of repeated runs and the side-by-side table."""
import argparse
import json
import statistics


def at_least_one(text):
    """An argparse type: a count of runs, which must be 1 or more."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def summarize(values):
    """min / median / max of the values that are not None; None when there are none."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def print_table(results, reference, missing="never"):
    """One row per metric, one column per launcher, then each launcher's ratio to ddprun."""
    names = list(results)
    metrics = list(results["ddprun"])
    width = max(len(m) for m in metrics) + 2
    print(f"{'metric (min / median / max)':<{width}}" + "".join(f"{n:>34}" for n in names))
    for m in metrics:
        cells = ""
        for n in names:
            v = results[n].get(m)
            if v:
                cells += f"{v['min']:>10.1f} /{v['median']:>9.1f} /{v['max']:>9.1f}"
            else:
                cells += f"{missing if m in results[n] else 'not run':>34}"
        print(f"{m:<{width}}{cells}")
    # The portable build beside Debian's (docs/packaging.md), then torchrun.
    for other in ("ddprun-portable", reference):
        if other not in results:
            continue
        print(f"\nratios, {other} median / ddprun median:")
        for m in metrics:
            t, d = results[other].get(m), results["ddprun"][m]
            print(f"  {m:<{width}}" + (f"{t['median'] / d['median']:8.2f}x" if t and d else "     n/a"))


def write_json(path, results):
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=2)
