"""pixie-server on SQLite and PostgreSQL, on one node and on two, in one run (scripts/bench-nodes.sh runs this).

    bench_nodes.py PIXIE_SERVER POSTGRES_URL

For each deployment in turn (SQLite, one node; PostgreSQL, one node; PostgreSQL, two nodes on the same database
with the same keys), it starts the nodes, prepares an account and pending phone verifications through the first
(scripts/pixie_bench_prepare.py; once per database, the PostgreSQL half kept for the two-node run), and runs wrk
with the Lua scripts in scripts/wrk/ (after 2 s of unmeasured health checks) against GET /healthz (the anchor), POST /v1/discovery/own and
POST /v1/phone/verifications/check. One node gets one wrk of 2 threads and CONNECTIONS connections; two nodes get
one wrk each, of one thread and half the connections, run at once, whose requests/s add up and whose p50/p99 are
the worse node's.

Beside each figure, where the machine's time went: core-microseconds per request spent by the pixie-server nodes,
by PostgreSQL's processes, by wrk, and by the rest (the kernel's softirqs, everything else), from /proc before and
after each run. On two cores that is what says where the bottleneck is and how the deployment would scale.

Environment: SECONDS_PER_RUN (default 10), CONNECTIONS (default 16), VERIFICATIONS (default 40000 per run).
Prints Markdown tables on standard output, progress on standard error.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS = os.sysconf("SC_CLK_TCK")
SECONDS = int(os.environ.get("SECONDS_PER_RUN", "10"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "16"))
VERIFICATIONS = int(os.environ.get("VERIFICATIONS", "40000"))
ENDPOINTS = [
    ("healthz", "GET /healthz", "/healthz", "healthz.lua"),
    ("discovery", "POST /v1/discovery/own", "/v1/discovery/own", "discovery.lua"),
    ("otp-check", "POST /v1/phone/verifications/check", "/v1/phone/verifications/check", "otp-check.lua"),
]


def say(line):
    print(f"bench-nodes: {line}", file=sys.stderr, flush=True)


class Node:
    """One pixie-server process (every service) on a data directory of its own."""

    def __init__(self, binary, data_dir, database):
        self.data_dir = data_dir
        os.makedirs(data_dir, exist_ok=True)
        self.log_path = os.path.join(data_dir, "..", os.path.basename(data_dir) + ".log")
        arguments = [binary, "--data-dir", data_dir, "--port", "0", "--codes-per-number-per-hour", "100000000",
                     "--client-requests-per-minute", "100000000"]
        if database:
            arguments += ["--database", database]
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 30
        self.url = None
        while self.url is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"bench-nodes: pixie-server did not start:\n{open(self.log_path).read()}")
            with open(self.log_path) as log:
                found = re.search(r'"address":"(http:[^"]*)".*"msg":"listening"', log.read())
            self.url = found.group(1) if found else None
            time.sleep(0.1)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def process_ticks(pid):
    """utime + stime of one process, in clock ticks (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (FileNotFoundError, ProcessLookupError):
        return 0


def postgres_ticks():
    """Every process named postgres: the postmaster, its backends (one per pooled connection) and its workers."""
    total = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as comm:
                    if comm.read().strip() == "postgres":
                        total[entry] = process_ticks(entry)
            except OSError:
                pass
    return total


def busy_ticks():
    """The machine's busy time, every core, in ticks (idle and iowait left out)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]


def wrk(url, path, script, threads, connections, environment, seconds=SECONDS):
    arguments = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "-s",
                 os.path.join(ROOT, "scripts", "wrk", script), url + path]
    return subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **environment})


def milliseconds(text):
    value = re.match(r"([\d.]+)(us|ms|s)$", text)
    number, unit = float(value.group(1)), value.group(2)
    return number / 1000 if unit == "us" else number if unit == "ms" else number * 1000


def parse(output):
    rps = float(re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M).group(1))
    p50 = milliseconds(re.search(r"^\s+50%\s+(\S+)", output, re.M).group(1))
    p99 = milliseconds(re.search(r"^\s+99%\s+(\S+)", output, re.M).group(1))
    statuses = {}
    line = re.search(r"^statuses: (.*)$", output, re.M)
    for part in (line.group(1).split() if line else []):
        status, count = part.split("=")
        statuses[status] = int(count)
    return rps, p50, p99, statuses


def measure(nodes, endpoint, bench_dir):
    """One endpoint, wrk against every node at once; the figures and the core time per request by component."""
    name, _, path, script = endpoint
    before_nodes = [process_ticks(node.process.pid) for node in nodes]
    before_postgres = postgres_ticks()
    before_busy = busy_ticks()
    runs = []
    for index, node in enumerate(nodes):
        environment = {"PIXIE_BENCH_DIR": bench_dir, "PIXIE_BENCH_THREADS": "2", "PIXIE_BENCH_FIRST": str(index)}
        threads = 2 // len(nodes)
        runs.append(wrk(node.url, path, script, threads, CONNECTIONS // len(nodes), environment))
    outputs, wrk_ticks = [], 0
    for run in runs:
        _, status, usage = os.wait4(run.pid, 0)
        run.returncode = os.waitstatus_to_exitcode(status)
        outputs.append(run.stdout.read())
        wrk_ticks += (usage.ru_utime + usage.ru_stime) * TICKS
    busy = busy_ticks() - before_busy
    nodes_ticks = sum(process_ticks(node.process.pid) for node in nodes) - sum(before_nodes)
    after_postgres = postgres_ticks()
    postgres = sum(after_postgres[pid] - before_postgres.get(pid, 0) for pid in after_postgres)
    for output in outputs:
        print(output, file=sys.stderr)
    parsed = [parse(output) for output in outputs]
    requests = sum(rps for rps, _, _, _ in parsed) * SECONDS
    statuses = {}
    for _, _, _, counts in parsed:
        for status, count in counts.items():
            statuses[status] = statuses.get(status, 0) + count

    def per_request(ticks):
        return ticks / TICKS / requests * 1e6

    return {
        "rps": sum(rps for rps, _, _, _ in parsed),
        "p50": max(p50 for _, p50, _, _ in parsed),
        "p99": max(p99 for _, _, p99, _ in parsed),
        "statuses": " ".join(f"{s}={statuses[s]}" for s in sorted(statuses)),
        "nodes": per_request(nodes_ticks),
        "postgres": per_request(postgres),
        "wrk": per_request(wrk_ticks),
        "rest": per_request(max(0, busy - nodes_ticks - postgres - wrk_ticks)),
    }


def warm_up(nodes):
    """Two seconds of health checks on every node, not measured: pools opened, threads started, code paged in."""
    runs = [wrk(node.url, "/healthz", "healthz.lua", 1, CONNECTIONS // len(nodes), {}, seconds=2) for node in nodes]
    for run in runs:
        run.communicate()


def prepare(node, work, verifications):
    """An account and `verifications` pending verifications, through `node`; returns the bench directory."""
    bench_dir = os.path.join(work, "prepared")
    os.makedirs(bench_dir, exist_ok=True)
    started = time.monotonic()
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "pixie_bench_prepare.py"), node.url,
                    node.data_dir, bench_dir, str(verifications)], check=True, stdout=subprocess.DEVNULL)
    say(f"prepared {verifications} verifications in {time.monotonic() - started:.0f} s")
    return bench_dir


def split(bench_dir, parts):
    """The prepared checks dealt into `parts` directories of their own (each with the discovery body)."""
    with open(os.path.join(bench_dir, "checks.jsonl")) as checks:
        lines = checks.readlines()
    size = len(lines) // parts
    directories = []
    for part in range(parts):
        directory = f"{bench_dir}-{part}"
        os.makedirs(directory, exist_ok=True)
        shutil.copy(os.path.join(bench_dir, "discovery.json"), directory)
        with open(os.path.join(directory, "checks.jsonl"), "w") as out:
            out.writelines(lines[part * size:(part + 1) * size])
        directories.append(directory)
    return directories


def main():
    binary, postgres_url = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="bench-nodes-")
    results = []  # (deployment, endpoint label, figures)
    running = []
    try:
        say("SQLite, one node")
        node = Node(binary, os.path.join(work, "sqlite", "a"), None)
        running = [node]
        bench_dir = prepare(node, os.path.join(work, "sqlite"), VERIFICATIONS)
        warm_up([node])
        for endpoint in ENDPOINTS:
            say(f"  {endpoint[1]}")
            results.append(("SQLite, one node", endpoint[1], measure([node], endpoint, bench_dir)))
        node.stop()
        running = []

        say("PostgreSQL, one node")
        first = Node(binary, os.path.join(work, "postgres", "a"), postgres_url)
        running = [first]
        one_dir, two_dir = split(prepare(first, os.path.join(work, "postgres"), 2 * VERIFICATIONS), 2)
        warm_up([first])
        for endpoint in ENDPOINTS:
            say(f"  {endpoint[1]}")
            results.append(("PostgreSQL, one node", endpoint[1], measure([first], endpoint, one_dir)))

        say("PostgreSQL, two nodes")
        second_dir = os.path.join(work, "postgres", "b")
        os.makedirs(second_dir)
        shutil.copytree(os.path.join(first.data_dir, "keys"), os.path.join(second_dir, "keys"))
        second = Node(binary, second_dir, postgres_url)
        running = [first, second]
        warm_up(running)
        for endpoint in ENDPOINTS:
            say(f"  {endpoint[1]}")
            results.append(("PostgreSQL, two nodes", endpoint[1], measure([first, second], endpoint, two_dir)))
    finally:
        for node in running:
            node.stop()
        shutil.rmtree(work, ignore_errors=True)

    anchors = {deployment: figures["rps"] for deployment, label, figures in results if label == "GET /healthz"}
    base = {label: figures["rps"] for deployment, label, figures in results if deployment == "SQLite, one node"}
    print(f"wrk: {SECONDS} s per row, {CONNECTIONS} connections in all, 2 wrk threads in all\n")
    print("| deployment | endpoint | requests/s | p50 (ms) | p99 (ms) | ÷ its /healthz | ÷ SQLite, one node "
          "| core-µs per request: nodes / PostgreSQL / wrk / rest | answers |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    for deployment, label, f in results:
        print(f"| {deployment} | {label} | {f['rps']:.0f} | {f['p50']:.2f} | {f['p99']:.2f} "
              f"| {f['rps'] / anchors[deployment]:.3f} | {f['rps'] / base[label]:.3f} "
              f"| {f['nodes']:.0f} / {f['postgres']:.0f} / {f['wrk']:.0f} / {f['rest']:.0f} | {f['statuses']} |")


if __name__ == "__main__":
    main()
