"""Run the benchmark scenarios against an already started moto + counting proxy (see scripts/bench).

For every scenario and tool: build a fresh identical fleet in moto, zero the proxy's counts, run
the tool once (measured: wall time, peak RSS, API calls by operation as seen by the proxy), check
the fleet's tags, then run it again at once (the idempotence run, which must write nothing).
Writes ``<outdir>/results.json`` and prints the side-by-side table (report.py).
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

import fleet as fleetmod
import report

HERE = os.path.dirname(os.path.abspath(__file__))
# Calls that write tags. Anything else that mutates is reported as "other writes".
TAG_WRITES = {
    "ec2:CreateTags", "elasticloadbalancing:AddTags", "s3:PutBucketTagging",
    "iam:TagRole", "iam:TagUser", "tagging:TagResources",
}
MUTATING_PREFIXES = ("Put", "Create", "Delete", "Tag", "Untag", "Add", "Remove", "Modify", "Update")


def proxy(url, path, method="GET"):
    req = urllib.request.Request(url + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def summarise_calls(counts):
    calls = counts["calls"]
    tag_writes = {op: n for op, n in calls.items() if op in TAG_WRITES}
    other = {op: n for op, n in calls.items()
             if op not in TAG_WRITES and op.split(":", 1)[-1].startswith(MUTATING_PREFIXES)}
    return {
        "total": sum(calls.values()), "tag_writes": sum(tag_writes.values()),
        "tag_writes_by_op": tag_writes, "other_writes": other,
        "errors": sum(counts["errors"].values()), "by_op": calls, "errors_by_op": counts["errors"],
        "moto_seconds": round(sum(counts["seconds"].values()), 2), "moto_seconds_by_op": counts["seconds"],
    }


def tool_command(tool, a, fleet, outdir):
    if tool == "tagwarden":
        return [a.tagwarden, "sweep", "--policy", fleet["policy"], "--region", fleetmod.REGION, "--json"]
    return [a.custodian, "run", "--cache-period", "0", "-s", outdir, "--region", fleetmod.REGION,
            os.path.join(HERE, "c7n-policy.yml")]


def tool_report(tool, stdout_file, outdir):
    """What the tool says it did (for the table; the counts come from the proxy)."""
    if tool == "tagwarden":
        try:
            with open(stdout_file) as f:
                s = json.load(f)
        except (OSError, ValueError) as e:
            return {"parse_error": str(e)}
        return {k: s.get(k) for k in ("resources", "owned", "drifted", "written", "failed", "limit_exceeded",
                                       "seconds")} | {"self_reported_calls": sum((s.get("api_calls") or {}).values())}
    matched = {}
    for name in sorted(os.listdir(outdir)) if os.path.isdir(outdir) else []:
        try:
            with open(os.path.join(outdir, name, "resources.json")) as f:
                matched[name] = len(json.load(f))
        except (OSError, ValueError):
            pass
    return {"drifted": sum(matched.values()), "matched_by_policy": matched}


def run_tool(tool, a, fleet, workdir, attempt):
    tag = f"{tool}-run{attempt}"
    outdir = os.path.join(workdir, tag + "-out")
    stdout, stderr = os.path.join(workdir, tag + ".stdout"), os.path.join(workdir, tag + ".stderr")
    proxy(a.proxy, "/__counts/reset", "POST")
    cmd = tool_command(tool, a, fleet, outdir)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if tool == "c7n":  # raises botocore's read timeout for moto's slow DescribeInstances (see there)
        env["PYTHONPATH"] = os.path.join(HERE, "c7n-site")
    m = subprocess.run([sys.executable, os.path.join(HERE, "measure.py"), "--stdout", stdout, "--stderr", stderr,
                        "--timeout", str(a.run_timeout), "--", *cmd], check=True, capture_output=True, text=True,
                       env=env)
    result = json.loads(m.stdout)
    result["calls"] = summarise_calls(proxy(a.proxy, "/__counts"))
    result["tool"] = tool_report(tool, stdout, outdir)
    result["stderr_tail"] = open(stderr, errors="replace").read()[-600:] if result["rc"] else ""
    print(f"  {tag}: rc={result['rc']} {result['seconds']:.2f} s, {result['calls']['total']} calls, "
          f"{result['calls']['tag_writes']} tag writes, moto busy {result['calls']['moto_seconds']:.1f} s, peak RSS {result['max_rss_kb'] / 1024:.0f} MB", flush=True)
    return result


def scenario(a, kind, size, workdir):
    name = f"{kind}-{size}"
    out = {"name": name, "kind": kind, "size": size, "tools": {}}
    for tool in ("tagwarden", "c7n"):
        print(f"{name}: {tool}", flush=True)
        try:
            fleet = fleetmod.build(a.moto, kind, size, a.max_fleet_seconds)
        except TimeoutError as e:
            out["skipped"] = f"{e} ({a.max_fleet_seconds:.0f} s); scenario skipped"
            print(f"  SKIPPED: {out['skipped']}", flush=True)
            return out
        out.update({k: fleet[k] for k in ("owned", "foreign", "drifted", "lower_bound")})
        out.setdefault("build_seconds", {})[tool] = fleet["build_seconds"]
        d = os.path.join(workdir, name)
        os.makedirs(d, exist_ok=True)
        first = run_tool(tool, a, fleet, d, 1)
        started = time.monotonic()
        first["verify"] = fleetmod.verify(a.moto, fleet)
        print(f"  tags after run 1: {'ok' if first['verify']['ok'] else first['verify']['problems']} "
              f"(checked in {time.monotonic() - started:.1f} s)", flush=True)
        second = run_tool(tool, a, fleet, d, 2)
        out["tools"][tool] = {"run1": first, "run2": second}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moto", required=True)
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--tagwarden", required=True)
    ap.add_argument("--custodian", required=True)
    ap.add_argument("--sizes", default="100 1000 10000")
    ap.add_argument("--ec2-only-size", type=int, default=10000)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--commit", default="")
    ap.add_argument("--c7n-version", default="")
    ap.add_argument("--max-fleet-seconds", type=float, default=900)
    ap.add_argument("--run-timeout", type=float, default=3600)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    started = time.monotonic()
    plan = [("mixed", int(s)) for s in a.sizes.split()]
    if a.ec2_only_size > 0:
        plan.append(("ec2-only", a.ec2_only_size))
    results = {"tagwarden_commit": a.commit, "c7n_version": a.c7n_version, "scenarios": []}
    for kind, size in plan:
        results["scenarios"].append(scenario(a, kind, size, a.outdir))
        results["harness_seconds"] = round(time.monotonic() - started, 1)
        with open(os.path.join(a.outdir, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    ok = report.print_report(results)
    print(f"\nresults: {os.path.join(a.outdir, 'results.json')} (harness {results['harness_seconds']:.0f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
