"""Run one command and measure it: wall time and peak RSS.

    python measure.py --stdout FILE --stderr FILE --timeout S -- CMD [ARG...]

Prints ``{"rc", "seconds", "max_rss_kb", "timed_out"}`` as JSON. This launcher has exactly one
child, so ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` (kilobytes on Linux) is that child's peak RSS
(the largest of it and any grandchild it waited for). No /usr/bin/time needed.
"""

import argparse
import json
import resource
import subprocess
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stdout", required=True)
    ap.add_argument("--stderr", required=True)
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    timed_out = False
    with open(a.stdout, "wb") as out, open(a.stderr, "wb") as err:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        try:
            rc = proc.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            timed_out = True
        seconds = time.monotonic() - started
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"rc": rc, "seconds": round(seconds, 3), "max_rss_kb": rss, "timed_out": timed_out}))


if __name__ == "__main__":
    main()
