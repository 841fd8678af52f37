#!/usr/bin/env python3
"""Recording overhead on a cold launch (docs/recording.md, "Measured").

Alternates, round by round, a plain cold launch with a recorded cold launch
by each `appflow` binary given (so that builds can be compared under the
same load). Plain: the app's files (from a first recording) are evicted with
POSIX_FADV_DONTNEED, time from spawn to the first stdout line. Recorded:
`appflow record --cold --dry-run`, whose `launch_ms` is measured the same
way (spawn to the ready line). Prints every launch and the medians.

usage: record_overhead.py ROUNDS PYTHON MODEL_MIB APPFLOW [APPFLOW...]
The app, like an ML app: PYTHON imports json, sqlite3 and numpy, maps a
MODEL_MIB "model" file (written once under /var/tmp, removed at the end) and
reads every page of it, allocates 256 MiB of arrays, then prints "ready".
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CODE = ("import sys, json, sqlite3, numpy; m = numpy.memmap(sys.argv[1], mode='r'); "
        "s = int(m[::4096].sum()); a = numpy.ones(32 << 20); "
        "print('ready', s, flush=True); import time; time.sleep(30)")


def record(appflow, py, state, model):
    out = subprocess.run([appflow, 'record', '--app', 'ovh', '--state-dir', state, '--cold',
                          '--dry-run', '--ready-line', '^ready', '--format', 'json', '--',
                          py, '-c', CODE, model], capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index('{'):])


def evict(paths):
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        except OSError:
            pass


def plain(py, paths, model):
    evict(paths)
    t0 = time.monotonic()
    pr = subprocess.Popen([py, '-c', CODE, model], stdout=subprocess.PIPE, text=True)
    pr.stdout.readline()
    dt = (time.monotonic() - t0) * 1000
    pr.kill()
    pr.wait()
    return dt


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    rounds, py, model_mib, binaries = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    state = tempfile.mkdtemp(prefix='appflow-ovh-')
    model = os.path.join(tempfile.mkdtemp(prefix='appflow-ovh-', dir='/var/tmp'), 'model.bin')
    with open(model, 'wb') as f:
        for _ in range(model_mib):
            f.write(os.urandom(1 << 20))
    try:
        run(rounds, py, model, binaries, state)
    finally:
        os.remove(model)
        os.rmdir(os.path.dirname(model))
        shutil.rmtree(state, ignore_errors=True)


def run(rounds, py, model, binaries, state):
    first = record(binaries[0], py, state, model)
    files = first['observation']['files'] if 'observation' in first else first.get('files', [])
    paths = [f['path'] for f in files]
    if not paths:
        sys.exit(f'no files in the first recording: {sorted(first)}')
    print(f'{len(paths)} files in the launch; {rounds} rounds')
    times = {'plain': []} | {b: [] for b in binaries}
    for i in range(rounds):
        row = [f'{plain(py, paths, model):.1f}']
        times['plain'].append(float(row[0]))
        for b in binaries:
            ms = record(b, py, state, model)['launch_ms']
            times[b].append(ms)
            row.append(str(ms))
        print(f'round {i + 1}: plain {row[0]} ms, recorded ' + ', '.join(row[1:]) + ' ms')
    base = statistics.median(times['plain'])
    print(f'median plain {base:.1f} ms')
    for b in binaries:
        m = statistics.median(times[b])
        print(f'median recorded {m:.1f} ms (+{(m / base - 1) * 100:.0f} %)  {b}')


if __name__ == '__main__':
    main()
