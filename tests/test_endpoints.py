"""The heterogeneous rack's endpoint list (fusionfabric/endpoints.py): parsing, numbering,
and one-line errors that name the bad value."""

import pytest

from fusionfabric.endpoints import (Endpoint, EndpointGroup, expand, format_endpoints,
                                    max_lanes, parse_endpoints)


def test_the_issue_example():
    groups = parse_endpoints("accelerator:4x4,cpu:1x2,gpu:8x1")
    assert groups == (EndpointGroup("accelerator", 4, 4), EndpointGroup("cpu", 1, 2),
                      EndpointGroup("gpu", 8, 1))
    assert expand(groups) == [
        Endpoint(0, "accelerator", 4), Endpoint(1, "accelerator", 4),
        Endpoint(2, "accelerator", 4), Endpoint(3, "accelerator", 4),
        Endpoint(4, "cpu", 1), Endpoint(5, "cpu", 1), Endpoint(6, "gpu", 8)]
    assert format_endpoints(groups) == "accelerator:4x4,cpu:1x2,gpu:8x1"


def test_spaces_upper_x_repeats_and_round_trip():
    text = " cpu : 2 X 1 , accelerator:2x3,cpu:2x1 "
    groups = parse_endpoints(text)
    assert groups == (EndpointGroup("cpu", 2, 1), EndpointGroup("accelerator", 2, 3),
                      EndpointGroup("cpu", 2, 1))
    assert [e.kind for e in expand(groups)] == ["cpu"] + ["accelerator"] * 3 + ["cpu"]
    assert parse_endpoints(format_endpoints(groups)) == groups


def test_profile_limits():
    assert max_lanes("64b66b") == 20 and max_lanes("rs544") == 16
    assert parse_endpoints("gpu:20x2")[0].lanes == 20
    assert parse_endpoints("gpu:16x2", lane_profile="rs544")[0].lanes == 16
    assert len(expand(parse_endpoints("accelerator:1x127,cpu:1x1"))) == 128
    assert len(expand(parse_endpoints("cpu:2x8", switch_ports=8))) == 8


@pytest.mark.parametrize("text,kw,needle", [
    ("tpu:4x4,cpu:1x2", {}, "'tpu'"),
    ("accelerator:4x4,CPU:1x2", {}, "'CPU'"),
    ("accelerator:0x4,cpu:1x2", {}, "lanes=0"),
    ("gpu:21x2", {}, "lanes=21"),
    ("gpu:32x2", {"lane_profile": "rs544"}, "lanes=32"),
    ("gpu:3x2", {"lane_profile": "rs544"}, "lanes=3"),
    ("accelerator:4x0,cpu:1x2", {}, "count=0"),
    ("accelerator:4x4,cpu:1x5", {"switch_ports": 8}, "9 endpoints"),
    ("accelerator:1x129", {}, "129 endpoints"),
    ("accelerator:4x1", {}, "1 endpoint"),
    ("accelerator:-1x2", {}, "'-1'"),
    ("accelerator:4x", {}, "''"),
    ("accelerator:fourx2", {}, "'four'"),
    ("accelerator4x4", {}, "'accelerator4x4'"),
    ("accelerator:4x4,,cpu:1x1", {}, "item 2"),
    ("", {}, "endpoints=''"),
    ("cpu:1x2", {"lane_profile": "pam4"}, "'pam4'"),
    ("cpu:1x2", {"switch_ports": 1}, "switch_ports=1"),
])
def test_bad_lists_name_the_bad_value(text, kw, needle):
    with pytest.raises(ValueError) as info:
        parse_endpoints(text, **kw)
    msg = str(info.value)
    assert "\n" not in msg and needle in msg, msg


def test_above_the_maximum_says_which_profile():
    with pytest.raises(ValueError, match="above the rs544 profile's maximum of 16"):
        parse_endpoints("cpu:17x2", lane_profile="rs544")
    with pytest.raises(ValueError, match="above the 64b66b profile's maximum of 20"):
        parse_endpoints("cpu:21x2")
