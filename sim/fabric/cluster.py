"""Sweeps and design-space studies point by point: in-process or as Ray tasks, resumable.

A study is a sweep of ``cfg`` (every ``(load, seed index)`` point) for one or ``K`` expert
placements (placement seeds ``s, s+1, ..., s+K-1`` as
:func:`~fusionfabric.sim.fabric.run.run_placements` uses them). :func:`run_study` runs
its points and returns the same result as :func:`~fusionfabric.sim.fabric.run.run_sweep`
(``K = 1``) or ``run_placements`` (``K > 1``): the numbers are identical bit for bit,
because every point owns its random stream (``point_rng(seed, seed index, load)``; the
placement from ``placement_rng(placement seed)``) and
:func:`~fusionfabric.sim.fabric.run.run_sweep` takes each point's statistics at its own
end of run, so a point gives the same result alone, in a batch or in a Ray task. Only
``wall_seconds``, ``point_cycles_per_second`` and the added ``study`` record differ.

Executors:

``"local"``
    the points still to run, one in-process batch per placement (numba threads).
``"ray"``
    one Ray task per point (``num_cpus=1``), at most ``workers`` (default: the cluster's
    CPUs) in flight. A task that raises or whose worker dies is retried by Ray
    (``max_retries=retries``, ``retry_exceptions=True``); a point without a result
    ``point_timeout`` seconds after its submission (all attempts included) is cancelled.
    Failed points are reported together (:class:`StudyFailed`: point, seeds, error) once
    the other points are done; nothing waits forever.

Resume: with ``results=FILE`` every finished point is appended at once to ``FILE`` as
one JSON line (Python's ``json``; a NaN latency is written ``NaN``)::

    {"config_hash": ..., "model": ..., "seed": 1, "placement_seed": 1, "load": 0.3,
     "seed_index": 0, "end_cycle": 4500, "model": ..., "point": {...}, "meta": {...},
     "keys": [...]}

``config_hash`` is the SHA-256 (16 hex digits) of the configuration with ``run.loads``
and ``run.seeds`` left out and the placement seed resolved (plus the trace file's bytes
for a trace), so a study with more loads or seeds reuses the points it shares with an
earlier one. ``model`` hashes the model's source files (:func:`model_hash`): records of
another model version are not reused, and a Ray worker whose model differs from the
driver's fails its point. A rerun skips the points the file holds and gives the same final
result. A truncated last line (a run killed while writing) is cut off and its point run
again; any other unreadable line is a :class:`ClusterError`.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import socket
import sys
import time
from pathlib import Path

from .config import Config, parse_loads
from .traffic import resolve_placement_seed

__all__ = ["ClusterError", "StudyFailed", "PointFailure", "run_study", "connect",
           "config_hash", "model_hash", "read_results", "study_points", "CONNECT_TIMEOUT_S",
           "JOIN_TRIES", "JOIN_TIMEOUT_S"]

#: Seconds to wait for a TCP connection to a Ray head before giving up (Ray's own
#: connection retries take minutes on an address where nothing answers).
CONNECT_TIMEOUT_S = 3.0
#: Tries (about one a second) ray.init makes to reach the head's GCS when joining, unless
#: RAY_gcs_server_port_wait_time_s is set (Ray's default: 20).
JOIN_TRIES = 4
#: Seconds a trial join in a child process may take (:func:`_join_check`).
JOIN_TIMEOUT_S = 12.0
#: Result keys that describe the whole run, not one point (recomputed when merging).
_RUN_KEYS = ("cycles_simulated", "batch", "wall_seconds", "point_cycles_per_second",
             "port_cycles_per_second", "points", "summary", "fabric")


class ClusterError(ValueError):
    """Bad cluster input: Ray missing, a malformed or unreachable address, a bad results
    file (one line naming it; the CLI exits 2)."""


class PointFailure:
    """One point that gave no result: its placement seed, load, seed index, run seed and
    the error (``attempts``: how many were allowed)."""

    def __init__(self, placement_seed, load, seed_index, seed, error, attempts):
        self.placement_seed, self.load, self.seed_index = placement_seed, load, seed_index
        self.seed, self.error, self.attempts = seed, error, attempts

    def __str__(self):
        return (f"point load {self.load} seed index {self.seed_index} placement seed "
                f"{self.placement_seed} (run seed {self.seed}) failed after "
                f"{self.attempts} attempt(s): {self.error}")


class StudyFailed(RuntimeError):
    """Some points gave no result; the others finished (and are in the results file)."""

    def __init__(self, failures: list[PointFailure], done: int, total: int):
        self.failures, self.done, self.total = failures, done, total
        super().__init__(f"{len(failures)} of {total} points failed")


# -- identity of a point ------------------------------------------------------------------

def model_hash() -> str:
    """SHA-256 (16 hex digits) of the model's source files (``sim/fabric/*.py`` except
    this module and the plotting): results of another model version are not reused."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for f in sorted(here.glob("*.py")):
        if f.name in ("cluster.py", "plot.py"):
            continue
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def config_hash(cfg: Config) -> str:
    """SHA-256 (16 hex digits) of ``cfg`` without ``run.loads`` and ``run.seeds`` (they
    choose the points, not what a point is), with the placement seed resolved."""
    d = cfg.as_dict()
    d["run"].pop("loads")
    d["run"].pop("seeds")
    d["traffic"]["placement_seed"] = resolve_placement_seed(cfg.traffic, cfg.run.seed)
    if cfg.traffic.pattern == "trace":
        d["trace_sha256"] = hashlib.sha256(Path(cfg.traffic.trace_file).read_bytes()
                                           ).hexdigest()
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _placement_cfgs(cfg: Config, placements: int) -> list[Config]:
    """One configuration per placement, exactly as run_placements builds them (K = 1: the
    configuration itself, placement seed unresolved, as run_sweep gets it)."""
    if placements == 1:
        return [cfg]
    base = resolve_placement_seed(cfg.traffic, cfg.run.seed)
    out = []
    for j in range(placements):
        c = copy.deepcopy(cfg)
        c.traffic.placement_seed = base + j
        out.append(c)
    return out


def _sweep_points(cfg: Config) -> list[tuple[float, int]]:
    """The points of a sweep in run_sweep's order (seed index outer, load inner)."""
    loads = parse_loads(cfg.run.loads) if cfg.traffic.pattern != "trace" else [1.0]
    return [(load, k) for k in range(cfg.run.seeds) for load in loads]


def study_points(cfg: Config, placements: int = 1) -> list[tuple[int, float, int]]:
    """Every point of a study as ``(placement index, load, seed index)``."""
    return [(j, load, k) for j, c in enumerate(_placement_cfgs(cfg, placements))
            for load, k in _sweep_points(c)]


# -- one point (runs in a Ray worker or in-process) -----------------------------------------

def _apply_hook(hook, key):
    """Test-only failure injection: ``hook = {"point": (placement seed, load, seed index),
    "mode": "raise" | "exit" | "hang" | "always", "marker": path}``. The first attempt
    (the one that creates ``marker``) raises, kills its worker process or sleeps; "always"
    raises on every attempt."""
    if not hook or tuple(hook["point"]) != key:
        return
    if hook["mode"] == "always":
        raise RuntimeError("injected failure (test hook) on every attempt")
    try:
        os.close(os.open(hook["marker"], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    if hook["mode"] == "raise":
        raise RuntimeError("injected failure (test hook) on the first attempt")
    if hook["mode"] == "exit":
        os._exit(17)
    if hook["mode"] == "hang":
        time.sleep(3600)


def _run_points(cfg: Config, points: list[tuple[float, int]], hook=None) -> list[dict]:
    """Simulate ``points`` of ``cfg`` as one batch; one record per point (see the module
    docstring), without the hashes."""
    from .run import run_sweep

    ps = resolve_placement_seed(cfg.traffic, cfg.run.seed)
    for load, k in points:
        _apply_hook(hook, (ps, float(load), int(k)))
    r = run_sweep(cfg, progress=False, points=points)
    keys = list(r)
    meta = {k: v for k, v in r.items() if k not in _RUN_KEYS and k != "config"}
    mh = model_hash()
    return [{"seed": cfg.run.seed, "placement_seed": ps, "load": p["load"],
             "seed_index": p["seed"], "end_cycle": p["end_cycle"], "model": mh, "point": p,
             "meta": meta, "keys": keys} for p in r["points"]]


def _ray_point(cfg: Config, load: float, k: int, hook=None) -> dict:
    """The body of one Ray task: one point alone (its own end of run)."""
    return _run_points(cfg, [(load, k)], hook)[0]


# -- results file ------------------------------------------------------------------------

def read_results(path) -> list[dict]:
    """The records of a results file (missing file: none). A truncated last line is cut
    off the file; another unreadable line raises :class:`ClusterError`."""
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    recs, pos = [], 0
    lines = data.split(b"\n")
    for i, line in enumerate(lines, 1):
        last = i == len(lines)
        if line.strip():
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict) or not {"config_hash", "load", "seed_index",
                                                     "point"} <= rec.keys():
                    raise ValueError("not a point record")
            except ValueError as exc:
                if last:         # no newline after it: a write cut short; run it again
                    with open(p, "r+b") as f:
                        f.truncate(pos)
                    print(f"fusionfabric: {p}: cut off an incomplete last line (its point "
                          f"runs again)", file=sys.stderr, flush=True)
                    break
                raise ClusterError(f"--resume {p}: line {i} is not a point record ({exc})"
                                   ) from None
            recs.append(rec)
        pos += len(line) + 1
    return recs


def _append(f, rec: dict) -> None:
    f.write(json.dumps(rec) + "\n")
    f.flush()
    os.fsync(f.fileno())


# -- Ray -----------------------------------------------------------------------------------

def _parse_address(address: str) -> tuple[str, int]:
    text = str(address).strip()
    if text.startswith("ray://"):
        raise ClusterError(f"--cluster {address}: give the head's GCS address HOST:PORT "
                           f"(default port 6379); Ray Client addresses (ray://) are not "
                           f"supported")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"--cluster {address!r} is not HOST:PORT (the Ray head's GCS "
                           f"address, e.g. 10.0.0.5:6379)")
    return host.strip("[]"), int(port)


#: The HTTP/2 connection preface and an empty SETTINGS frame: a gRPC server (the Ray
#: head's GCS) answers with a SETTINGS frame of its own (frame type 4 in byte 3).
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _probe(address: str) -> None:
    """Check within :data:`CONNECT_TIMEOUT_S` that a gRPC server answers at ``address``
    (ClusterError otherwise): ray.init itself retries for minutes where nothing or
    something else listens."""
    host, port = _parse_address(address)
    t0 = time.perf_counter()
    try:
        s = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ClusterError(f"--cluster {address}: Ray head not reachable ({why} after "
                           f"{time.perf_counter() - t0:.1f} s)") from None
    try:
        s.settimeout(CONNECT_TIMEOUT_S)
        s.sendall(_H2_HELLO)
        head = s.recv(9)
    except OSError:
        head = b""
    finally:
        s.close()
    if len(head) < 4 or head[3] != 4:
        raise ClusterError(f"--cluster {address}: something answers there but not a Ray head "
                           f"(no gRPC reply within {CONNECT_TIMEOUT_S:g} s)")


_JOIN_SCRIPT = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
ray.shutdown()
"""


def _join_check(address: str) -> None:
    """Join the cluster once from a child process, killed after :data:`JOIN_TIMEOUT_S`:
    ray.init in this process cannot be interrupted, and where an HTTP/2 server that is no
    Ray head answers it can wait for minutes. Ray's own tries are bounded too
    (``RAY_gcs_server_port_wait_time_s``, unless set, to :data:`JOIN_TRIES`)."""
    import subprocess

    env = dict(os.environ)
    env.setdefault("RAY_gcs_server_port_wait_time_s", str(JOIN_TRIES))
    try:
        r = subprocess.run([sys.executable, "-c", _JOIN_SCRIPT, str(address).strip()],
                           env=env, capture_output=True, text=True, timeout=JOIN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"--cluster {address}: no Ray head answered within "
                           f"{JOIN_TIMEOUT_S:g} s") from None
    if r.returncode != 0:
        err = [x for x in r.stderr.strip().splitlines() if x.strip()]
        last = err[-1].strip() if err else f"exit status {r.returncode}"
        raise ClusterError(f"--cluster {address}: cannot join the Ray cluster ({last})")


def connect(address: str | None = None, workers: int | None = None) -> bool:
    """Start a local Ray with ``workers`` CPUs (``address=None``) or connect to the head
    at ``address`` (``HOST:PORT``: first a TCP connection and an HTTP/2 hello of at most
    :data:`CONNECT_TIMEOUT_S` each, then a trial join in a child process of at most
    :data:`JOIN_TIMEOUT_S`). Returns whether this call started the session (then the
    caller shuts it down); a session already open in this process is reused."""
    try:
        import ray
    except ImportError:
        raise ClusterError("Ray is not installed: --ray and --cluster need the [cluster] "
                           "extra; install it with: pip install 'fusionfabric[cluster]'"
                           ) from None
    quiet = dict(log_to_driver=False, logging_level="ERROR", configure_logging=True)
    if address is None:
        if ray.is_initialized():
            return False
        # "local": a new Ray here, never one that ``ray start`` left on this machine
        ray.init(address="local", num_cpus=workers, include_dashboard=False, **quiet)
        return True
    _probe(address)
    if ray.is_initialized():
        here = ray.get_runtime_context().gcs_address
        if here == str(address).strip():
            return False
        raise ClusterError(f"--cluster {address}: this process already has a Ray session "
                           f"(with {here}); join from a new process")
    _join_check(address)
    try:
        ray.init(address=str(address).strip(), **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ClusterError(f"--cluster {address}: cannot join the Ray cluster: {first}"
                           ) from None
    return True


def _error_text(exc) -> str:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}".rstrip(": ")


def _run_ray(cfgs, todo, *, workers, retries, point_timeout, hook, on_done, bar):
    """Run ``todo`` = [(placement index, load, k)] as Ray tasks; ``on_done(j, rec)`` for
    each result. Returns the failures."""
    import ray

    task = ray.remote(_ray_point).options(num_cpus=1, max_retries=int(retries),
                                          retry_exceptions=True)
    slots = int(workers) if workers else max(1, int(ray.cluster_resources().get("CPU", 1)))
    queue = list(todo)
    pending: dict = {}
    failures = []
    mh = model_hash()

    def fail(item, error):
        j, load, k = item
        c = cfgs[j]
        failures.append(PointFailure(resolve_placement_seed(c.traffic, c.run.seed), load, k,
                                     c.run.seed, error, int(retries) + 1))

    while queue or pending:
        while queue and len(pending) < slots:
            item = queue.pop(0)
            j, load, k = item
            pending[task.remote(cfgs[j], load, k, hook)] = (item, time.monotonic())
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        for ref in ready:
            item, _t0 = pending.pop(ref)
            try:
                rec = ray.get(ref)
            except Exception as exc:          # RayTaskError, WorkerCrashedError, ...
                fail(item, _error_text(exc))
                continue
            if rec["model"] != mh:
                fail(item, f"the worker's model ({rec['model']}) is not the driver's ({mh}): "
                           f"install the same fusionfabric on every node")
                continue
            on_done(item[0], rec)
            if bar is not None:
                bar.update(1)
        now = time.monotonic()
        for ref, (item, t0) in list(pending.items()):
            if now - t0 > point_timeout:
                ray.cancel(ref, force=True)
                del pending[ref]
                fail(item, f"no result {point_timeout:g} s after submission (timeout)")
    return failures


# -- a study ---------------------------------------------------------------------------------

def _assemble(cfg: Config, recs: dict, wall: float) -> dict:
    """run_sweep's result for ``cfg`` from its point records (``(load, k) -> record``)."""
    from .stats import sweep_summary

    order = _sweep_points(cfg)
    rs = [recs[pt] for pt in order]
    points = [r["point"] for r in rs]
    cycles = max(p["end_cycle"] for p in points)   # = run_sweep's batch end
    meta = rs[0]["meta"]
    summary = sweep_summary(points)
    for v in summary.values():
        v["output_bound"] = meta["output_bound"]
    vals = dict(meta, config=cfg.as_dict(), cycles_simulated=cycles, batch=len(points),
                wall_seconds=wall,
                point_cycles_per_second=len(points) * cycles / wall if wall > 0 else None,
                points=points, summary=summary)
    if "topology" in meta and "switch_ports" in meta["topology"]:     # a Clos domain
        vals["port_cycles_per_second"] = (len(points) * cycles * meta["topology"][
            "switch_ports"] / wall if wall > 0 else None)
    return {k: vals[k] for k in rs[0]["keys"] if k in vals}


def run_study(cfg: Config, placements: int = 1, *, executor: str = "local",
              results: str | Path | None = None, address: str | None = None,
              workers: int | None = None, retries: int = 2, point_timeout: float = 600.0,
              progress: bool | None = None, hook: dict | None = None) -> dict:
    """Run the sweep of ``cfg`` (``placements`` placements) point by point; see the module
    docstring. Returns run_sweep's (``placements == 1``) or run_placements' result with a
    ``study`` record (executor, points run, points reused, failures none). Raises
    :class:`StudyFailed` if points fail and :class:`ClusterError` on bad cluster input."""
    from .run import run_placements

    if executor not in ("local", "ray"):
        raise ValueError(f"executor={executor!r} is not local or ray")
    placements = int(placements)
    if placements < 1:
        raise ValueError(f"placements={placements} must be at least 1")
    cfgs = _placement_cfgs(cfg, placements)
    hashes = [config_hash(c) for c in cfgs]
    mh = model_hash()
    done: list[dict] = [{} for _ in cfgs]         # per placement: (load, k) -> record
    wanted = [set(_sweep_points(c)) for c in cfgs]
    reused = other = 0
    if results is not None:
        for rec in read_results(results):
            key = (float(rec["load"]), int(rec["seed_index"]))
            hit = [j for j, h in enumerate(hashes) if rec["config_hash"] == h
                   and rec.get("model") == mh and key in wanted[j]]
            if not hit:
                other += 1
                continue
            for j in hit:
                if key not in done[j]:
                    done[j][key] = rec
                    reused += 1
    todo = [(j, load, k) for j, load, k in study_points(cfg, placements)
            if (load, k) not in done[j]]
    total = sum(len(w) for w in wanted)
    out = None
    t0 = time.perf_counter()
    owned = False

    def on_done(j, rec):
        rec = dict(rec, config_hash=hashes[j])
        done[j][(float(rec["load"]), int(rec["seed_index"]))] = rec
        if out is not None:
            _append(out, rec)

    # Ray's driver prints task errors and retry notices on stdout: send them to stderr,
    # stdout is for the results
    quiet = contextlib.redirect_stdout(sys.stderr)
    quiet.__enter__()
    try:
        if executor == "ray":
            owned = connect(address, workers)
        if results is not None:
            out = open(results, "a")
            print(f"fusionfabric: {len(todo)} of {total} points to run, {reused} from "
                  f"{results}" + (f" ({other} records of other configurations, model "
                                   f"versions or points not used)" if other else ""),
                  file=sys.stderr, flush=True)
        bar = None
        if (progress if progress is not None else sys.stderr.isatty()) and todo:
            from tqdm import tqdm
            bar = tqdm(total=len(todo), unit="pt", file=sys.stderr, leave=False)
        failures = []
        if executor == "ray" and todo:
            failures = _run_ray(cfgs, todo, workers=workers, retries=retries,
                                point_timeout=point_timeout, hook=hook, on_done=on_done,
                                bar=bar)
        else:
            for j, c in enumerate(cfgs):
                pts = [(load, k) for jj, load, k in todo if jj == j]
                if not pts:
                    continue
                for rec in _run_points(c, pts, hook):
                    on_done(j, rec)
                if bar is not None:
                    bar.update(len(pts))
        if bar is not None:
            bar.close()
    finally:
        if out is not None:
            out.close()
        if owned:
            import ray
            ray.shutdown()
        quiet.__exit__(None, None, None)
    if failures:
        raise StudyFailed(failures, total - len(failures), total)
    wall = time.perf_counter() - t0
    swept = [_assemble(c, done[j], wall / placements) for j, c in enumerate(cfgs)]
    if placements == 1:
        r = swept[0]
    else:
        it = iter(swept)
        r = run_placements(cfg, placements, sweep=lambda c, progress=None: next(it))
        r["wall_seconds"] = wall
    r["study"] = {"executor": executor, "address": address, "workers": workers,
                  "points": total, "run": len(todo), "reused": reused,
                  "results_file": str(results) if results is not None else None}
    return r
