"""The ``cpu_memory`` traffic pattern of the fabric model (a mixed rack: accelerators run a
ring among themselves and send READ/WRITE requests to cpu ports, which answer open loop).

References: the pattern's law computed here from the configuration (rates from the lane
counts, request and response flit sizes, the READ share), counted on long generated
streams within binomial tolerances; end to end, every flit a port was offered at a light
load is delivered, per kind."""

import numpy as np
import pytest

from fusionfabric.cli import main
from fusionfabric.sim.fabric.config import ConfigError, load_config
from fusionfabric.sim.fabric.run import run_sweep
from fusionfabric.sim.fabric.traffic import make_generator

R = 4
# ports 0-3 accelerators of 2 lanes, port 4 a gpu of 4 (twice an accelerator's rate),
# ports 5-6 cpus of 1 lane; a full-rate port has R = 4
PORTS = "accelerator:2x4,gpu:4x1,cpu:1x2"
SIZES = dict(read_request_flits=1, read_response_flits=4, write_flits=3,
             write_response_flits=2)


def cfg(*extra, ports=PORTS):
    return load_config(None, ["n_ports=7", f"phys.lanes={R}", f"link.ports={ports}",
                              "pattern=cpu_memory", *[f"traffic.{k}={v}" for k, v in
                                                      SIZES.items()], *extra])


def stream(c, load, cycles=200_000, seed=11):
    ports = c.port_table()
    rates = np.array([l for _, l in ports], float) / R
    g = make_generator(c.traffic, c.switch.n_ports, load, np.random.default_rng(seed),
                       rates=rates, kinds=[k for k, _ in ports])
    dest, size = g.chunk(0, cycles)
    return g, dest.astype(np.int64), size.astype(np.int64), rates


@pytest.mark.parametrize("load, mf, rf", [(0.6, 0.1, 0.8), (0.3, 0.3, 0.5)])
def test_the_law_counted_on_a_long_stream(load, mf, rf):
    c = cfg(f"traffic.mem_fraction={mf}", f"traffic.read_fraction={rf}",
            "traffic.packet_size=2")
    cycles = 200_000
    g, dest, size, rates = stream(c, load, cycles)
    acc, cpu = [0, 1, 2, 3, 4], [5, 6]
    nxt = {0: 1, 1: 2, 2: 3, 3: 4, 4: 0}
    mreq = rf * 1 + (1 - rf) * 3
    mrsp = rf * 4 + (1 - rf) * 2
    req_rate = {a: load * rates[a] * mf / mreq for a in acc}
    for a in acc:
        sent = dest[:, a] >= 0
        d, s = dest[sent, a], size[sent, a]
        flits = s.sum() / cycles
        sd = np.sqrt(load * rates[a] * 4 / cycles)          # generous: sizes up to 4
        assert abs(flits - load * rates[a]) < 5 * sd, (a, flits)
        to_cpu = np.isin(d, cpu)
        assert set(d[~to_cpu]) == {nxt[a]} and set(s[~to_cpu]) == {2}
        assert set(s[to_cpu]) <= {1, 3}
        mem_flits = s[to_cpu].sum() / s.sum()
        assert abs(mem_flits - mf) < 0.02, (a, mem_flits)
        reads = (s[to_cpu] == 1).mean()
        n_req = to_cpu.sum()
        assert abs(reads - rf) < 5 * np.sqrt(rf * (1 - rf) / n_req) + 1e-9
        assert abs((d[to_cpu] == 5).mean() - 0.5) < 5 * np.sqrt(0.25 / n_req)
    served = sum(req_rate.values()) / len(cpu)               # requests per cycle per cpu
    for c_ in cpu:
        sent = dest[:, c_] >= 0
        d, s = dest[sent, c_], size[sent, c_]
        want = min(served * mrsp, rates[c_])
        assert abs(s.sum() / cycles - want) < 5 * np.sqrt(want * 4 / cycles), c_
        assert set(s) <= {4, 2} and abs((s == 4).mean() - rf) < 0.03
        # requesters in proportion to their request rates: the gpu (port 4) twice an
        # accelerator's
        share = np.bincount(d, minlength=7)[acc] / d.size
        want_share = np.array([req_rate[a] for a in acc]) / sum(req_rate.values())
        assert np.allclose(share, want_share, atol=0.03), share
        assert not np.isin(d, cpu).any()
    assert g.offered == pytest.approx((size.sum() / cycles) / 7, rel=0.03)


def test_a_cpu_answers_at_most_its_own_rate():
    c = cfg("traffic.mem_fraction=0.6", "traffic.read_fraction=1.0")
    g, dest, size, rates = stream(c, 0.9, 50_000)
    for c_ in (5, 6):
        assert size[:, c_].sum() / 50_000 == pytest.approx(rates[c_], rel=0.05)
    assert g.response_flits > rates[5]                      # the cap is what holds it


def test_light_load_is_delivered_per_kind_and_reproducible():
    c = cfg("traffic.mem_fraction=0.2", "loads=0.1", "cycles=4000", "seed=3")
    r = run_sweep(c, progress=False)
    p = r["points"][0]
    assert p["accepted"] == pytest.approx(p["offered"], rel=0.05)
    kinds = p["per_kind"]
    assert set(kinds) == {"accelerator", "gpu", "cpu"}
    # what the cpus received is the requests' flits: mem_fraction of what the others sent
    other_sent = kinds["accelerator"]["sent"] + kinds["gpu"]["sent"]
    assert kinds["cpu"]["received"] == pytest.approx(0.2 * other_sent, rel=0.1)
    # and what they sent (responses) went to the others, none to a cpu
    assert kinds["accelerator"]["received"] + kinds["gpu"]["received"] == pytest.approx(
        0.8 * other_sent + kinds["cpu"]["sent"], rel=0.05)
    again = run_sweep(c, progress=False)["points"][0]
    assert again == p


@pytest.mark.parametrize("ports, word", [("", "needs link.ports"),
                                         ("accelerator:4x6,gpu:4x1", "needs link.ports"),
                                         ("accelerator:4x1,cpu:1x6", "needs link.ports")])
def test_a_rack_without_cpus_or_accelerators_is_one_line(ports, word, capsys):
    with pytest.raises(ConfigError, match=word):
        cfg(ports=ports) if ports else load_config(None, ["n_ports=7", "pattern=cpu_memory"])
    rc = main(["sweep", "--ports", "7", "--pattern", "cpu_memory", "--loads", "0.1",
               "--cycles", "100"] + (["--set", f"link.ports={ports}", "--set",
                                      f"phys.lanes={R}"] if ports else []))
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and word in err
