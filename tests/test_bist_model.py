"""fusionfabric.sim.bist: LFSR, signature filler, generator and checker models (no simulator)."""

import numpy as np
import pytest

from fusionfabric.sim import bist
from fusionfabric.formats.bist import COUNTER_MAX, LFSR_ORDER, SIG_BITS, SIGNATURE, seed_state, splitmix64
from fusionfabric.sim.bist import (TrafficCheckModel, TrafficGenModel, advance_matrix, apply_matrix,
                                   filler_matrix, filler_ref, lfsr_step, make_data,
                                   make_data_array)
from fusionfabric.formats.switch import switch_flit


def _gf2_matpow(a, e):
    result = np.eye(a.shape[0], dtype=np.int64)
    base = a.astype(np.int64)
    while e:
        if e & 1:
            result = (result @ base) & 1
        base = (base @ base) & 1
        e >>= 1
    return result


def test_prbs31_has_maximal_period():
    # x^31 + x^28 + 1 is primitive (ITU-T O.150 PRBS31): the one-step map has order
    # 2^31 - 1, a prime, so A^(2^31-1) = I and A != I prove the full period.
    a = advance_matrix(1)
    assert not np.array_equal(a, np.eye(LFSR_ORDER, dtype=np.uint8))
    assert np.array_equal(_gf2_matpow(a, (1 << 31) - 1), np.eye(LFSR_ORDER, dtype=np.int64))


def test_lfsr_obeys_the_recurrence():
    _, bits = lfsr_step(0x1234567, 400)
    # the state holds the previous 31 bits; after 31 steps the recurrence holds on output
    for t in range(31, 400):
        assert bits[t] == bits[t - 31] ^ bits[t - 28]


@pytest.mark.parametrize("k", [1, 8, 31, 100])
def test_advance_matrix_matches_stepping(k):
    rng = np.random.default_rng(k)
    a = advance_matrix(k)
    for state in rng.integers(1, 1 << 31, size=20):
        assert apply_matrix(a, int(state)) == lfsr_step(int(state), k)[0]


def test_splitmix64_known_answer():
    # SplitMix64 seeded with 0: first output 0xE220A8397B1DCDAF (Steele et al. 2014;
    # the reference value quoted with Vigna's splitmix64.c)
    assert splitmix64(0) == 0xE220A8397B1DCDAF


def test_seed_state_nonzero_and_distinct():
    states = {seed_state(s, p, k) for s in (0, 1, 2**32 - 1) for p in range(4) for k in range(3)}
    assert 0 not in states and len(states) == 36
    with pytest.raises(ValueError, match="seed=-1"):
        seed_state(-1, 0, 0)


@pytest.mark.parametrize("data_width", [40, 41, 64, 100, 256])
def test_filler_matrix_matches_reference(data_width):
    rng = np.random.default_rng(data_width)
    m, c = filler_matrix(data_width)
    assert m.shape == (data_width - SIG_BITS, SIG_BITS)
    for sig in rng.integers(0, 1 << 40, size=30, dtype=np.int64):
        want = filler_ref(data_width, int(sig))
        got = (apply_matrix(m, int(sig)) ^ c) if m.shape[0] else 0
        assert got == want


@pytest.mark.parametrize("data_width", [62, 64, 100, 512])
def test_filler_protects_every_signature_bit(data_width):
    m, _ = filler_matrix(data_width)
    assert m.any(axis=0).all()   # every signature bit changes some filler bit


def test_make_data_vectorized_agrees():
    rng = np.random.default_rng(5)
    n = 50
    src, dest = rng.integers(0, 256, n), rng.integers(0, 256, n)
    seq, beat = rng.integers(0, 1 << 16, n), rng.integers(0, 256, n)
    vec = make_data_array(72, src, dest, seq, beat)
    for i in range(n):
        d = make_data(72, src[i], dest[i], seq[i], beat[i])
        assert d == vec[i]
        sig = SIGNATURE.unpack(d & ((1 << 40) - 1))
        assert (sig["src"], sig["dest"], sig["seq"], sig["beat"]) == (src[i], dest[i], seq[i],
                                                                    beat[i])
        assert d >> 40 == filler_ref(72, d & ((1 << 40) - 1))


def test_generator_model_fields():
    g = TrafficGenModel(data_width=64, n_ports=5, port=2, max_len=6, seed=9)
    pkts = g.packets(3000)
    lengths = np.array([p.length for p in pkts])
    dests = np.array([p.dest for p in pkts])
    assert set(lengths) == set(range(1, 7))
    assert set(dests) == set(range(5))
    counts = np.bincount(dests, minlength=5)
    assert counts.min() > 0.8 * 600 and counts.max() < 1.2 * 600
    seen = {}
    for p in pkts:
        assert p.seq == seen.get(p.dest, 0)
        seen[p.dest] = p.seq + 1
    assert g.next_seq == [seen.get(d, 0) for d in range(5)]


def test_generator_model_permutation_and_framing():
    g = TrafficGenModel(data_width=64, n_ports=4, port=3, max_len=3, pattern="permutation",
                        offset=2, seed=1)
    lay = switch_flit(64)
    words = g.flits(40)
    fields = [lay.unpack(w) for w in words]
    assert all(f["dest"] == 1 and f["src"] == 3 for f in fields)
    assert sum(f["first"] for f in fields) == 40 == sum(f["last"] for f in fields)


@pytest.mark.parametrize("kw, match", [
    ({"data_width": 39}, "data_width=39"), ({"n_ports": 0}, "n_ports=0"),
    ({"port": 4}, "port=4"), ({"max_len": 257}, "max_len=257"),
    ({"pattern": "zipf"}, "pattern='zipf'"),
    ({"pattern": "permutation", "offset": 4}, "offset=4"), ({"offset": -1}, "offset=-1"),
    ({"seed": 1 << 32}, "seed=4294967296"),
])
def test_generator_model_bad_params(kw, match):
    with pytest.raises(ValueError, match=match):
        TrafficGenModel(**{"n_ports": 4, **kw})


# -- checker model: a clean stream and exactly the injected errors --------------------------
N_PORTS, PORT, W = 4, 1, 64


def _traffic(n_packets=60, seed=3):
    """Packets (lists of flits) arriving at PORT from every source: each source's packets
    in order, sources interleaved at random, as a switch output delivers them."""
    gens = [TrafficGenModel(W, N_PORTS, s, max_len=5, seed=seed) for s in range(N_PORTS)]
    queues = [[g.flits_of([p]) for p in g.packets(n_packets) if p.dest == PORT]
              for g in gens]
    rng = np.random.default_rng(seed)
    out = []
    while any(queues):
        live = [q for q in queues if q]
        out.append(live[rng.integers(len(live))].pop(0))
    return out, gens


def _flat(packets):
    return [w for p in packets for w in p]


def test_checker_clean_stream():
    packets, gens = _traffic()
    c = TrafficCheckModel(W, N_PORTS, PORT).feed(_flat(packets))
    assert (c.seq_errors, c.data_errors, c.framing_errors) == (0, 0, 0)
    assert c.packets == len(packets) and c.flits == sum(map(len, packets))
    assert c.expected == [g.next_seq[PORT] for g in gens]


def _with(packets, fn):
    packets = [list(p) for p in packets]
    fn(packets)
    return TrafficCheckModel(W, N_PORTS, PORT).feed(_flat(packets))


def _errors(c):
    return c.seq_errors, c.data_errors, c.framing_errors


def test_checker_counts_dropped_packet():
    packets, _ = _traffic()
    assert _errors(_with(packets, lambda ps: ps.pop(7))) == (1, 0, 0)


def test_checker_counts_duplicated_packet():
    packets, _ = _traffic()
    assert _errors(_with(packets, lambda ps: ps.insert(8, ps[7]))) == (1, 0, 0)


@pytest.mark.parametrize("bit", [0, 12, 30, 39, 41, 63])
def test_checker_counts_flipped_bit(bit):
    packets, _ = _traffic()

    def flip(ps):
        ps[9][-1] ^= 1 << bit
    assert _errors(_with(packets, flip)) == (0, 1, 0)


def test_checker_counts_lost_last_and_lost_first():
    packets, _ = _traffic()
    lay = switch_flit(W)
    last_bit = 1 << lay.offsets["last"]
    first_bit = 1 << lay.offsets["first"]

    def lose_last(ps):
        ps[5][-1] &= ~last_bit

    def lose_first(ps):
        ps[6][0] &= ~first_bit
    assert _errors(_with(packets, lose_last)) == (0, 0, 1)
    assert _errors(_with(packets, lose_first)) == (0, 0, 1)


def test_checker_counts_misrouted_flit():
    packets, _ = _traffic()
    lay = switch_flit(W)

    def misroute(ps):
        f = lay.unpack(ps[4][0])
        f["dest"] = (PORT + 1) % N_PORTS
        ps[4][0] = lay.pack(f)
    c = _with(packets, misroute)
    assert (c.data_errors, c.framing_errors) == (1, 0) and c.seq_errors == 0


def test_checker_bad_params():
    with pytest.raises(ValueError, match="port=4"):
        TrafficCheckModel(64, 4, 4)
    assert COUNTER_MAX == 2**32 - 1


def test_vectors_command_matches_model():
    from fusionfabric.sim.vectors import all_vectors

    doc = all_vectors()["bist-gen"]({"n_ports": "3", "max_len": "5", "port": "1"}, 11, 20)
    want = TrafficGenModel(64, 3, 1, 5, seed=11)
    lay = switch_flit(64)
    got_words = [lay.pack({**f, "data": int(f["data"], 16)})
                 for v in doc["vectors"] for f in v["flits"]]
    assert got_words == want.flits(20)
    with pytest.raises(ValueError, match="'foo'"):
        all_vectors()["bist-gen"]({"foo": "1"}, 1, 1)
