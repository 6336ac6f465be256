"""fusionfabric.sim.bitfields and rtl.blocks: shared layouts agree with Amaranth's StructLayout; the
registry parses and rejects parameters with messages naming the bad value."""

import numpy as np
import pytest
from amaranth.hdl import Const

from fusionfabric.rtl.blocks import Block, BlockError, Param, parse_sets
from fusionfabric.formats.bitfields import FieldError, Fields
from fusionfabric.formats.switch import group_entry, switch_flit


@pytest.mark.parametrize("fields", [switch_flit(64), switch_flit(1), group_entry(72),
                                    Fields([("a", 3), ("b", 70), ("c", 1)])],
                         ids=["flit64", "flit1", "group72", "wide"])
def test_fields_match_amaranth_layout(fields):
    layout = fields.layout()
    assert layout.size == fields.width
    rng = np.random.default_rng(1)
    for _ in range(20):
        values = {n: int(rng.integers(0, 1 << min(w, 62))) for n, w in fields}
        word = fields.pack(values)
        # Amaranth's own packing of the same member values must give the same bits.
        const = layout.const(values)
        assert Const.cast(const).value == word
        assert fields.unpack(word) == values


def test_fields_errors():
    f = Fields([("a", 4), ("b", 2)])
    with pytest.raises(FieldError, match="a=16 does not fit in 4 bits"):
        f.pack(a=16)
    with pytest.raises(FieldError, match="unknown field 'z'"):
        f.pack(z=1)
    with pytest.raises(FieldError, match="does not fit in 6 bits"):
        f.unpack(1 << 6)
    with pytest.raises(FieldError, match="declared twice"):
        Fields([("a", 1), ("a", 2)])
    cols = f.unpack_array([f.pack(a=3, b=1), f.pack(a=15, b=2)])
    assert cols["a"].tolist() == [3, 15] and cols["b"].tolist() == [1, 2]
    assert f.pack_array(cols) == [f.pack(a=3, b=1), f.pack(a=15, b=2)]


def test_param_parsing():
    b = Block("x", dict, params=[Param("n", int, 4, choices=(1, 2, 4)),
                                 Param("flag", bool, False), Param("alg", str, "crc32")])
    assert parse_sets(b, ["n=2", "flag=yes", "alg=crc32c"]) == {"n": 2, "flag": True,
                                                               "alg": "crc32c"}
    with pytest.raises(BlockError, match=r"n=3 is not one of 1, 2, 4"):
        parse_sets(b, ["n=3"])
    with pytest.raises(BlockError, match=r"n='four' is not a valid int"):
        parse_sets(b, ["n=four"])
    with pytest.raises(BlockError, match=r"no parameter 'm' \(valid: n, flag, alg\)"):
        parse_sets(b, ["m=1"])
    with pytest.raises(BlockError, match=r"'n' is not KEY=VALUE"):
        parse_sets(b, ["n"])
    assert b.build(n=1) == {"n": 1, "flag": False, "alg": "crc32"}
