"""Bench helper (bench/soak.py): what a stack that has gone idle must show: the scheduler's gauges at 0, every KV
block and GDN state slot free once the prefix cache is dropped (the scheduler's Load over gRPC, as the gateway's
/v1/capacity reads it), the gateway's in-flight gauge at 0, no TCP connection left open to the gateway's port, and
each process's resident memory (/proc/PID/status VmRSS)."""
from __future__ import annotations

import time
import urllib.request

import grpc
from prometheus_client.parser import text_string_to_metric_families

from proto import pb, pb_grpc

SCHEDULER_GAUGES = ("sparkinfer_num_requests_running", "sparkinfer_num_requests_waiting",
                    "sparkinfer_kv_cache_usage_perc")
IN_FLIGHT = "sparkinfer_gateway_requests_in_flight"
# /proc/net/tcp states that hold a connection open (all but LISTEN 0A, TIME_WAIT 06 and CLOSE 07)
_OPEN_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
                "08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}
PROCESSES = {"gateway": "gateway.app", "scheduler": "scheduler.server", "worker": "worker.server"}


def scrape(url: str) -> dict:
    """Every sample of a /metrics, by name (labels dropped: the first sample of a name wins)."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values.setdefault(sample.name, sample.value)
    return values


def totals(url: str) -> dict:
    """Every sample of a /metrics summed over its labels, by name."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0) + sample.value
    return values


def counter_mismatches(metrics_url: str, gateway_url: str,
                       names=("request_success_total", "prompt_tokens_total", "generation_tokens_total")) -> list:
    """The gateway's counters against the scheduler's (one gateway: they must be equal): choices finished, prompt
    and generated tokens."""
    sched, gate = totals(metrics_url), totals(gateway_url + "/metrics")
    out = []
    for name in names:
        if sched.get("sparkinfer_" + name) != gate.get("sparkinfer_gateway_" + name):
            out.append(f"{name}: scheduler {sched.get('sparkinfer_' + name)}, gateway "
                       f"{gate.get('sparkinfer_gateway_' + name)}")
    return out


def load(grpc_addr: str):
    """The scheduler's LoadResponse."""
    with grpc.insecure_channel(grpc_addr) as channel:
        return pb_grpc.ServingStub(channel).Load(pb.LoadRequest(), timeout=10)


def open_connections(port: int) -> list:
    """States of the TCP connections to local `port` still open (its listening socket and TIME_WAIT left out)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] in _OPEN_STATES:
                found.append(_OPEN_STATES[fields[3]])
    return found


def descendants(pid: int) -> list:
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children", encoding="ascii") as f:
                kids = [int(p) for p in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def process_ids(launcher_pid: int) -> dict:
    """{gateway, scheduler, worker: pid} among the launcher's descendants, by the module each runs."""
    found = {}
    for pid in descendants(launcher_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        for name, module in PROCESSES.items():
            if module.encode() in argv:
                found[name] = pid
    return found


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def settle(metrics_url: str, gateway_url: str, timeout: float = 60.0) -> tuple:
    """Waits until the scheduler's gauges and the gateway's in-flight gauge read 0 (requests cut by their clients
    take a step or two to leave); returns (scheduler samples, gateway samples) as last read."""
    deadline = time.monotonic() + timeout
    while True:
        sched, gate = scrape(metrics_url), scrape(gateway_url + "/metrics")
        if all(sched.get(n) == 0 for n in SCHEDULER_GAUGES) and gate.get(IN_FLIGHT) == 0:
            return sched, gate
        if time.monotonic() > deadline:
            return sched, gate
        time.sleep(0.5)


def idle_leaks(metrics_url: str, gateway_url: str, grpc_addr: str, port: int) -> list:
    """What an idle stack still holds: each a line ([] when nothing). Drops the prefix cache (POST
    /reset_prefix_cache) so that every block and slot must be free."""
    leaks = []
    sched, gate = settle(metrics_url, gateway_url)
    leaks += [f"scheduler {name} = {sched.get(name)}" for name in SCHEDULER_GAUGES if sched.get(name) != 0]
    if gate.get(IN_FLIGHT) != 0:
        leaks.append(f"gateway {IN_FLIGHT} = {gate.get(IN_FLIGHT)}")
    before = load(grpc_addr)
    if before.num_free_blocks + before.num_cached_blocks != before.num_total_blocks:
        leaks.append(f"KV blocks: {before.num_free_blocks} free + {before.num_cached_blocks} cached of "
                     f"{before.num_total_blocks}")
    if before.num_free_slots + before.num_prefix_entries != before.num_total_slots:
        leaks.append(f"state slots: {before.num_free_slots} free + {before.num_prefix_entries} cached of "
                     f"{before.num_total_slots}")
    urllib.request.urlopen(urllib.request.Request(gateway_url + "/reset_prefix_cache", method="POST"), timeout=10)
    after = load(grpc_addr)
    if (after.num_free_blocks, after.num_free_slots) != (after.num_total_blocks, after.num_total_slots):
        leaks.append(f"after the prefix-cache reset: {after.num_free_blocks}/{after.num_total_blocks} blocks, "
                     f"{after.num_free_slots}/{after.num_total_slots} slots free")
    if after.num_running or after.num_waiting:
        leaks.append(f"Load: {after.num_running} running, {after.num_waiting} waiting")
    # the scrapes above were this process's own requests; give their sockets a moment to close
    time.sleep(0.5)
    conns = open_connections(port)
    if conns:
        leaks.append(f"{len(conns)} TCP connections still open to the gateway: {sorted(set(conns))}")
    return leaks
