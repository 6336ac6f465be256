"""Sweeps point by point (sim/fabric/cluster.py): Ray tasks on a local two-CPU Ray and
resumed studies give the in-process batch's numbers exactly; failed points are retried or
reported with their seeds; bad cluster input exits 2 with one line.

The reference is the in-process batch (``run_sweep`` / ``run_placements``: every point of
a sweep in one numba batch), the method under test runs each point alone in a Ray worker
process and merges. ``test_point_alone_equals_point_in_batch`` checks the property both
rest on against a point simulated alone.
"""

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from fusionfabric.cli import main
from fusionfabric.sim.fabric.cluster import StudyFailed, read_results, run_study
from fusionfabric.sim.fabric.config import load_config
from fusionfabric.sim.fabric.run import run_placements, run_sweep
from fusionfabric.sim.fabric.stats import to_json

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="the [cluster] extra (ray) is not installed")

WALL = ("wall_seconds", "point_cycles_per_second", "port_cycles_per_second", "study")
SWEEP = ["switch.n_ports=8", "run.cycles=2000", "run.loads=0.3,0.6,0.9", "run.seed=7",
         "run.seeds=2"]
MOE = ["switch.n_ports=8", "run.cycles=2000", "run.loads=0.3,0.6", "run.seed=3",
       "traffic.pattern=moe_dispatch", "traffic.experts=16", "traffic.topk=2",
       "traffic.zipf=1.0"]


def numbers(r) -> dict:
    """Every field of a result except wall times (JSON form: NaN compares as null)."""
    d = json.loads(to_json(r))
    for k in WALL:
        d.pop(k, None)
    for p in d.get("placements", []):
        p.pop("wall_seconds")
    return d


def serial_sweep(sets):
    r = run_sweep(load_config(None, sets), progress=False)
    r.pop("fabric")
    return r


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray with two CPUs (two workers), shared by this module's Ray tests."""
    # one point in-process first: numba writes the one-point kernel to its disk cache, so
    # the two workers load it instead of both compiling it (on a fresh clone)
    serial_sweep(["switch.n_ports=4", "run.cycles=50", "run.loads=0.5"])
    import ray
    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    print(f"ray.init: {time.perf_counter() - t0:.1f} s")
    yield
    ray.shutdown()


def test_point_alone_equals_point_in_batch():
    # drain longer than a chunk (2,048 cycles): load 0.9 delivers its sampled packets
    # before load 1.0 does, and the batch runs on for 1.0; the 0.9 point's counters
    # (in_stalls counts at any time) must stop at its own end, as when it runs alone
    sets = ["switch.n_ports=8", "traffic.packet_size=4", "run.cycles=5000", "run.seed=3"]
    batch = serial_sweep(sets + ["run.loads=0.9,1.0"])
    alone = [serial_sweep(sets + [f"run.loads={x}"])["points"][0] for x in (0.9, 1.0)]
    assert batch["points"][0]["end_cycle"] < batch["points"][1]["end_cycle"]
    assert batch["cycles_simulated"] == batch["points"][1]["end_cycle"]
    assert json.loads(json.dumps(batch["points"])) == json.loads(json.dumps(alone))


@needs_ray
def test_ray_sweep_and_placements_identical_to_serial(local_ray):
    cfg = load_config(None, SWEEP)
    r = run_study(cfg, executor="ray", workers=2)
    assert r["study"]["run"] == 6 and len(r["points"]) == 6
    assert numbers(r) == numbers(serial_sweep(SWEEP))
    cfg = load_config(None, MOE)
    serial = run_placements(cfg, 2, progress=False)
    r = run_study(cfg, 2, executor="ray")
    assert r["study"]["run"] == 4
    assert numbers(r) == numbers(serial)
    assert r["placements"][0]["output_bound"] != r["placements"][1]["output_bound"]


@needs_ray
@pytest.mark.parametrize("mode", ["raise", "exit"])
def test_failed_first_attempt_is_retried(local_ray, tmp_path, mode):
    # the first attempt of load 0.6, seed index 1 raises ("raise") or kills its worker
    # process ("exit"); Ray runs it again and the study equals the serial run
    marker = tmp_path / "attempted"
    hook = {"point": (7, 0.6, 1), "mode": mode, "marker": str(marker)}
    r = run_study(load_config(None, SWEEP), executor="ray", retries=1, hook=hook)
    assert marker.exists()
    assert numbers(r) == numbers(serial_sweep(SWEEP))


@needs_ray
def test_exhausted_retries_and_timeout_are_reported(local_ray, tmp_path):
    res = tmp_path / "res.jsonl"
    hook = {"point": (7, 0.3, 0), "mode": "always", "marker": str(tmp_path / "m")}
    with pytest.raises(StudyFailed) as ei:
        run_study(load_config(None, SWEEP), executor="ray", retries=1, hook=hook,
                  results=res)
    assert len(ei.value.failures) == 1, "\n".join(map(str, ei.value.failures))
    (f,) = ei.value.failures
    assert (f.load, f.seed_index, f.placement_seed, f.seed, f.attempts) == (0.3, 0, 7, 7, 2)
    assert "RuntimeError: injected failure (test hook) on every attempt" in str(f)
    assert len(res.read_text().splitlines()) == 5          # the other points are kept
    # a point that never returns is cancelled after its timeout, not waited for; the
    # timeout counts from submission, so it leaves room for a replacement worker to start
    # on a loaded machine (a point takes well under a second once its worker is up; 4 s
    # timed out a second point once when the CI ran beside a place-and-route job)
    hook = {"point": (7, 0.9, 1), "mode": "hang", "marker": str(tmp_path / "h")}
    t0 = time.perf_counter()
    with pytest.raises(StudyFailed) as ei:
        run_study(load_config(None, SWEEP), executor="ray", point_timeout=15, hook=hook)
    assert time.perf_counter() - t0 < 60
    assert len(ei.value.failures) == 1, "\n".join(map(str, ei.value.failures))
    (f,) = ei.value.failures
    assert (f.load, f.seed_index) == (0.9, 1) and "timeout" in f.error


@needs_ray
def test_cli_reports_a_failed_point_and_the_rerun_completes(local_ray, tmp_path, capsys,
                                                             monkeypatch):
    res = tmp_path / "cli.jsonl"
    argv = ["sweep", "--ports", "8", "--cycles", "2000", "--loads", "0.3,0.6,0.9",
            "--seed", "7", "--set", "run.seeds=2", "--csv"]
    assert main(argv) == 0
    serial = capsys.readouterr().out
    monkeypatch.setenv("FUSIONFABRIC_TEST_FAIL_POINT", json.dumps(
        {"point": [7, 0.6, 1], "mode": "always", "marker": str(tmp_path / "m")}))
    assert main(argv + ["--ray", "--retries", "1", "--resume", str(res)]) == 1
    out, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.startswith("fusionfabric sweep: ")]
    assert out == "" and lines[-2] == (      # (Ray's own retry notices go to stderr too)
        "fusionfabric sweep: point load 0.6 seed index 1 placement seed 7 (run seed 7) "
        "failed after 2 attempt(s): RuntimeError: injected failure (test hook) on every "
        "attempt")
    assert lines[-1].startswith("fusionfabric sweep: 1 of 6 points failed; the 5 finished")
    monkeypatch.delenv("FUSIONFABRIC_TEST_FAIL_POINT")
    assert main(argv + ["--ray", "--resume", str(res)]) == 0
    out, err = capsys.readouterr()
    assert "1 of 6 points to run, 5 from" in err and out == serial


@needs_ray
def test_resume_runs_only_the_missing_points(local_ray, tmp_path, capsys):
    res = tmp_path / "study.jsonl"
    first = SWEEP[:2] + ["run.loads=0.3,0.9"] + SWEEP[3:]
    run_study(load_config(None, first), executor="ray", results=res)
    assert len(res.read_text().splitlines()) == 4
    # a run killed while writing leaves a truncated line: cut off, its point runs again
    with open(res, "a") as f:
        f.write('{"config_hash": "abc", "lo')
    r = run_study(load_config(None, SWEEP), executor="ray", results=res)
    lines = res.read_text().splitlines()
    assert (r["study"]["run"], r["study"]["reused"], len(lines)) == (2, 4, 6)
    added = [json.loads(x) for x in lines[4:]]
    assert sorted((x["load"], x["seed_index"]) for x in added) == [(0.6, 0), (0.6, 1)]
    assert numbers(r) == numbers(serial_sweep(SWEEP))
    # the same table as the serial run (its timing line aside), through the CLI
    argv = ["sweep", "--ports", "8", "--cycles", "2000", "--loads", "0.3,0.6,0.9",
            "--seed", "7", "--set", "run.seeds=2"]
    assert main(argv) == 0
    serial = capsys.readouterr().out
    assert main(argv + ["--resume", str(res), "--ray"]) == 0
    out, err = capsys.readouterr()
    assert "0 of 6 points to run, 6 from" in err
    strip = lambda t: [x for x in t.splitlines() if not x.startswith("# sample")]  # noqa
    assert strip(out) == strip(serial) and len(strip(out)) == 11
    assert len(read_results(res)) == 6


def test_local_resume_without_ray(tmp_path):
    res = tmp_path / "local.jsonl"
    run_study(load_config(None, MOE[:2] + ["run.loads=0.6"] + MOE[3:]), 2, results=res)
    r = run_study(load_config(None, MOE), 2, results=res)
    assert (r["study"]["run"], r["study"]["reused"]) == (2, 2)
    assert numbers(r) == numbers(run_placements(load_config(None, MOE), 2, progress=False))
    # another configuration (sample period) shares no point with the file
    r = run_study(load_config(None, MOE + ["run.cycles=1999"]), 1, results=res)
    assert (r["study"]["run"], r["study"]["reused"]) == (2, 0)
    assert len(res.read_text().splitlines()) == 6


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("argv, fragment", [
    (["--cluster", "127.0.0.1:{port}"], "--cluster 127.0.0.1:{port}: Ray head not reachable"),
    (["--cluster", "nohost"], "--cluster 'nohost' is not HOST:PORT"),
    (["--cluster", "ray://h:10001"], "Ray Client addresses (ray://) are not supported"),
    (["--ray", "--workers", "0"], "--workers 0 must be at least 1"),
    (["--workers", "2"], "--workers needs --ray or --cluster"),
    (["--ray", "--point-timeout", "0"], "--point-timeout 0.0 must be positive"),
])
def test_bad_cluster_input_exits_2_with_one_line(capsys, argv, fragment):
    port = _closed_port()
    argv = [a.format(port=port) for a in argv]
    t0 = time.perf_counter()
    rc = main(["sweep", "--ports", "4", "--cycles", "200", "--loads", "0.5", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and time.perf_counter() - t0 < 10
    assert fragment.format(port=port) in err[-1] and err[-1].startswith("fusionfabric: error")
    assert len([x for x in err if "error" in x]) == 1


def test_ray_missing_names_the_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)       # import ray raises ImportError
    rc = main(["sweep", "--ports", "4", "--cycles", "200", "--loads", "0.5", "--ray"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "pip install 'fusionfabric[cluster]'" in err[-1]
    assert err[-1].startswith("fusionfabric: error: sweep: Ray is not installed")


@needs_ray
@pytest.mark.soak
def test_cli_ray_starts_its_own_two_worker_ray(tmp_path):
    argv = ["sweep", "--ports", "8", "--cycles", "3000", "--loads", "0.2:1.0:0.2",
            "--seed", "11", "--json"]
    serial = subprocess.run([sys.executable, "-m", "fusionfabric.cli", *argv],
                            capture_output=True, text=True, check=True).stdout
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "fusionfabric.cli", *argv, "--ray",
                          "--workers", "2"], capture_output=True, text=True, check=True,
                         timeout=300).stdout
    assert time.perf_counter() - t0 < 300
    assert numbers(json.loads(out)) == numbers(json.loads(serial))


@needs_ray
@pytest.mark.soak
def test_cli_cluster_joins_a_ray_head(tmp_path):
    """--cluster HOST:PORT against a head started here with ``ray start --head`` (token
    authentication off for this local head and its driver, RAY_AUTH_MODE=disabled)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    head = subprocess.Popen([ray_bin, "start", "--head", f"--port={port}", "--num-cpus=2",
                             "--include-dashboard=false", "--block"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        argv = ["sweep", "--ports", "8", "--cycles", "3000", "--loads", "0.2:1.0:0.2",
                "--seed", "12", "--placements", "2", "--pattern", "moe_dispatch", "--json"]
        serial = subprocess.run([sys.executable, "-m", "fusionfabric.cli", *argv],
                                capture_output=True, text=True, check=True).stdout
        for _ in range(60):                      # the head's GCS answers after a few s
            r = subprocess.run([sys.executable, "-m", "fusionfabric.cli", *argv,
                                "--cluster", f"127.0.0.1:{port}"], env=env,
                               capture_output=True, text=True, timeout=300)
            if r.returncode == 0 or "not reachable" not in r.stderr:
                break
            time.sleep(1)
        assert r.returncode == 0, r.stderr
        assert numbers(json.loads(r.stdout)) == numbers(json.loads(serial))
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=120)
        mark = "/tmp/ray/ray_current_cluster"      # ray start's pointer to this head
        if os.path.exists(mark) and open(mark).read().strip().endswith(f":{port}"):
            os.remove(mark)


@needs_ray
@pytest.mark.soak
def test_ray_clos_sweep_identical_to_serial(local_ray):
    sets = ["topology.kind=clos", "topology.radix=8", "topology.endpoints=16",
            "topology.endpoints_per_leaf=4", "topology.spines=4", "run.loads=0.3,0.6,0.9",
            "run.cycles=3000", "run.seed=3", "run.seeds=2"]
    r = run_study(load_config(None, sets), executor="ray")
    assert r["study"]["run"] == 6 and r["topology"]["leaves"] == 4
    assert numbers(r) == numbers(serial_sweep(sets))


@needs_ray
@pytest.mark.soak
def test_cluster_address_with_a_non_ray_http2_server_exits_2_quickly():
    """Something that answers the HTTP/2 hello but is no Ray head: ray.init's own tries are
    bounded (JOIN_TRIES), the exit is 2 with one line naming the address."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        conns = []
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            c.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))     # an empty SETTINGS frame
            conns.append(c)
        for c in conns:
            c.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        t0 = time.perf_counter()      # a new process: no Ray session open in it
        r = subprocess.run([sys.executable, "-m", "fusionfabric.cli", "sweep", "--ports",
                            "4", "--cycles", "200", "--loads", "0.5", "--cluster",
                            f"127.0.0.1:{port}"], capture_output=True, text=True,
                           timeout=120)
        took = time.perf_counter() - t0
    finally:
        stop.set()
        th.join()
        srv.close()
    err = [x for x in r.stderr.splitlines() if "error" in x]
    assert r.returncode == 2 and took < 16 and len(err) == 1, (took, r.stderr)
    assert err[0].startswith(f"fusionfabric: error: sweep: --cluster 127.0.0.1:{port}: ")
