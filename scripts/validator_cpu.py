#!/usr/bin/env python3
"""What a payments committee's validators spend per certified payment.

Runs a `walras payments bench ... --json` command (its validators are child processes), samples
every `payments validator` process's CPU time (utime + stime, /proc) every 100 ms, and prints one
JSON line: the validators' CPU seconds (last sample per process; startup and genesis included),
the bench's certified count, goodput and latency, microseconds of validator CPU per certified
payment, and the machine's steal share over the run (/proc/stat: on a shared VM the hypervisor's
steal moves goodput, not CPU per payment).

Usage: scripts/validator_cpu.py WALRAS payments bench --validators 4 --shards 4 --scheme merkle \\
         --rate 3000 --seconds 5 --json
"""
import json
import os
import subprocess
import sys
import time


def cpu_stat():
    with open('/proc/stat') as stat:
        return [int(x) for x in stat.readline().split()[1:]]


def validator_cpu_seconds(tick):
    seen = {}
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as cmdline:
                words = cmdline.read().split(b'\0')
            if b'payments' not in words or b'validator' not in words:
                continue
            with open(f'/proc/{pid}/stat') as stat:
                fields = stat.read().rsplit(')', 1)[1].split()
            seen[pid] = (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass  # the process ended between listing and reading
    return seen


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tick = os.sysconf('SC_CLK_TCK')
    before = cpu_stat()
    bench = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    last = {}
    while bench.poll() is None:
        last.update(validator_cpu_seconds(tick))
        time.sleep(0.1)
    after = cpu_stat()
    output = bench.stdout.read()
    if bench.returncode != 0:
        sys.exit(f'the bench failed (exit {bench.returncode})')
    report = json.loads(output)
    delta = [b - a for a, b in zip(before, after)]
    cpu = sum(last.values())
    certified = report['certified']
    print(json.dumps({
        'validators_cpu_s': round(cpu, 2),
        'validator_processes': len(last),
        'certified': certified,
        'goodput_tx_per_s': report['goodput_tx_per_s'],
        'p50_ms': report['latency_ms']['p50'],
        'p99_ms': report['latency_ms']['p99'],
        'validator_us_per_certified': round(cpu / max(1, certified) * 1e6, 1),
        'steal': round(delta[7] / max(1, sum(delta)), 3),
    }))


if __name__ == '__main__':
    main()
