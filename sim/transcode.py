"""256b/257b transcoding of four 64b/66b blocks (IEEE 802.3 cl. 91.5.2.5, cl. 119.2.4.2), numpy.

Blocks use the project's 64b/66b conventions (:mod:`fusionfabric.sim.pcs`): a block is a
sync header (``SYNC_DATA = 2`` or ``SYNC_CTRL = 1``, first bit on the wire in bit 0) and a
64-bit payload sent bit 0 first; a control block carries its block type in payload bits
0..7. A 257-bit transcoded block is an array of 257 bits in transmission order
(``bits[0]`` first). Four consecutive blocks j = 0..3 become one transcoded block:

- **all four are data blocks**: ``bits[0] = 1``, then the four payloads, block 0 first,
  each bit 0 first (1 + 4 x 64 = 257 bits);
- **at least one control block**: ``bits[0] = 0``; ``bits[1 + j]`` is the second sync bit
  of block j (1 for data, 0 for control); then the four payloads in order, except that the
  first control block drops payload bits 4..7, the second nibble of its block type field
  (1 + 4 + 4 x 64 - 4 = 257 bits). The first nibble (payload bits 0..3) is kept: the low
  nibbles of the control block types in use differ, so the receiver rebuilds the whole
  type from it (:data:`TYPE_BY_NIBBLE`).

Invalid input (the transmitter's side): a block whose sync header is neither data nor
control, or a first control block whose type is not one of :data:`KNOWN_TYPES`, is sent as
the project's error block (control, ``BlockType.ERROR``, body 0): it is what the project's
PCS receiver delivers for both (docs/pcs.md).

Invalid input (the receiver's side, :func:`decode`): a 257-bit block with ``bits[0] = 0``
and all four flags 1 (no control block), or whose first control block's type nibble maps
to no known type, decodes to four error blocks, each marked in the returned ``error``
mask. cl. 91.5.3.5 marks such blocks by an invalid sync header; here they come out as
``BlockType.ERROR`` control blocks, which the project's PCS decode produces from an invalid
sync header anyway.
"""

from __future__ import annotations

import numpy as np

from fusionfabric.formats.pcs import SYNC_CTRL, SYNC_DATA, BlockType

__all__ = ["XBITS", "KNOWN_TYPES", "TYPE_BY_NIBBLE", "ERROR_PAYLOAD", "encode", "decode",
           "encode_words", "decode_words", "payload_bits", "bits_payload"]

#: Bits in one transcoded block.
XBITS = 257
#: Control block types the transcoder carries compressed (the project's block types).
KNOWN_TYPES = tuple(int(t) for t in BlockType)
#: Type nibble (payload bits 0..3) -> full block type.
TYPE_BY_NIBBLE = {t & 0xF: t for t in KNOWN_TYPES}
if len(TYPE_BY_NIBBLE) != len(KNOWN_TYPES):
    raise ValueError("block types share a low nibble: the 257b compression is ambiguous")
#: Payload of the error block: control, type ERROR, body 0.
ERROR_PAYLOAD = int(BlockType.ERROR)

_NIBBLE_TYPE = np.full(16, -1, dtype=np.int64)
for _n, _t in TYPE_BY_NIBBLE.items():
    _NIBBLE_TYPE[_n] = _t
_KNOWN = np.zeros(256, dtype=bool)
_KNOWN[list(KNOWN_TYPES)] = True


def payload_bits(payload) -> np.ndarray:
    """``(...)`` uint64 payloads -> ``(..., 64)`` bits, bit 0 first."""
    p = np.ascontiguousarray(np.asarray(payload, dtype=np.uint64))
    octets = p.astype("<u8")[..., None].view(np.uint8)
    return np.unpackbits(octets, axis=-1, bitorder="little")


def bits_payload(bits) -> np.ndarray:
    """``(..., 64)`` bits -> ``(...)`` uint64 payloads (inverse of :func:`payload_bits`)."""
    b = np.asarray(bits, dtype=np.uint8)
    packed = np.packbits(b, axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8")[..., 0].astype(np.uint64)


def _check_blocks(sync, payload) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(sync)
    p = np.asarray(payload)
    if s.shape != p.shape or s.ndim == 0 or s.shape[-1] % 4:
        raise ValueError(f"sync {s.shape} and payload {p.shape} must have one shape whose "
                         "last axis is a multiple of 4 blocks")
    return s.astype(np.int64), p.astype(np.uint64)


def encode(sync, payload) -> np.ndarray:
    """``(..., 4 g)`` blocks -> ``(..., g, 257)`` transcoded bits (uint8)."""
    s, p = _check_blocks(sync, payload)
    s = s.reshape(s.shape[:-1] + (-1, 4))
    p = p.reshape(p.shape[:-1] + (-1, 4)).copy()
    bad = (s != SYNC_DATA) & (s != SYNC_CTRL)
    is_ctrl = (s == SYNC_CTRL) | bad
    p[bad] = ERROR_PAYLOAD
    # the first control block of a group must have a known type
    first = np.argmax(is_ctrl, axis=-1)
    any_ctrl = is_ctrl.any(axis=-1)
    first_p = np.take_along_axis(p, first[..., None], axis=-1)[..., 0]
    unknown = any_ctrl & ~_KNOWN[(first_p & np.uint64(0xFF)).astype(np.int64)]
    fix = np.zeros(p.shape, dtype=bool)
    np.put_along_axis(fix, first[..., None], unknown[..., None], axis=-1)
    p[fix] = ERROR_PAYLOAD
    pb = payload_bits(p)                                   # (..., g, 4, 64)
    out = np.zeros(s.shape[:-1] + (XBITS,), dtype=np.uint8)
    # all-data groups
    out[..., 0] = (~any_ctrl).astype(np.uint8)
    flat = pb.reshape(pb.shape[:-2] + (256,))
    out[..., 1:] = np.where(any_ctrl[..., None], 0, flat)
    # groups with control: flags, then payloads with bits 4..7 of the first control removed
    flags = (~is_ctrl).astype(np.uint8)
    keep = np.ones(pb.shape, dtype=bool)                   # (..., g, 4, 64)
    sel = np.zeros(pb.shape[:-1], dtype=bool)
    np.put_along_axis(sel, first[..., None], True, axis=-1)
    keep[..., 4:8] &= ~sel[..., None]
    ctrl_rows = np.flatnonzero(any_ctrl.reshape(-1))
    if ctrl_rows.size:
        o = out.reshape(-1, XBITS)
        kb = keep.reshape(-1, 256)[ctrl_rows]
        vb = pb.reshape(-1, 256)[ctrl_rows]
        o[ctrl_rows, 0] = 0
        o[ctrl_rows, 1:5] = flags.reshape(-1, 4)[ctrl_rows]
        o[ctrl_rows, 5:] = vb[kb].reshape(-1, 252)
    return out


def decode(bits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(..., 257)`` transcoded bits -> ``(sync, payload, error)``, each ``(..., 4)``.

    ``error`` marks the blocks of an invalid transcoded block (all four), which come out as
    error blocks (control, ``BlockType.ERROR``).
    """
    b = np.asarray(bits, dtype=np.uint8)
    if b.ndim == 0 or b.shape[-1] != XBITS:
        raise ValueError(f"bits has shape {b.shape}; the last axis must be {XBITS}")
    lead = b.shape[:-1]
    b = b.reshape(-1, XBITS)
    n = b.shape[0]
    sync = np.full((n, 4), SYNC_DATA, dtype=np.int64)
    pb = b[:, 1:].reshape(n, 4, 64).copy()
    err = np.zeros((n, 4), dtype=bool)
    rows = np.flatnonzero(b[:, 0] == 0)
    if rows.size:
        flags = b[rows, 1:5].astype(bool)                  # True = data
        is_ctrl = ~flags
        first = np.argmax(is_ctrl, axis=-1)
        # rebuild the 256 payload bits: the first control block gets 4 bits re-inserted
        body = b[rows, 5:]                                 # 252 bits
        offs = first * 64                                  # start of the first control block
        idx = np.arange(256)[None, :]
        # payload bits before offs+4 come from body[idx]; offs+4..offs+7 are the rebuilt
        # high nibble of the type; from offs+8 on they come from body[idx-4]
        before = idx < offs[:, None] + 4
        after = idx >= offs[:, None] + 8
        src = np.where(before, idx, np.where(after, idx - 4, 0))
        full = np.take_along_axis(body, src, axis=1)
        nib = np.take_along_axis(body, offs[:, None] + np.arange(4)[None, :], axis=1)
        nib_val = (nib.astype(np.int64) << np.arange(4)).sum(axis=1)
        typ = _NIBBLE_TYPE[nib_val]
        hi = ((np.maximum(typ, 0) >> 4)[:, None] >> np.arange(4)[None, :]) & 1
        mid = ~before & ~after
        full = np.where(mid, _expand(hi, offs), full)
        bad = is_ctrl.sum(axis=1) == 0
        bad |= typ < 0
        pb[rows] = full.reshape(-1, 4, 64)
        sync[rows] = np.where(is_ctrl, SYNC_CTRL, SYNC_DATA)
        err[rows] = bad[:, None]
    payload = bits_payload(pb)
    payload[err] = ERROR_PAYLOAD
    sync[err] = SYNC_CTRL
    return (sync.reshape(lead + (4,)), payload.reshape(lead + (4,)), err.reshape(lead + (4,)))


def _expand(hi: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """A (rows, 256) array holding the 4 high-nibble bits at ``offs+4 .. offs+7``."""
    out = np.zeros((hi.shape[0], 256), dtype=np.uint8)
    r = np.arange(hi.shape[0])[:, None]
    out[r, offs[:, None] + 4 + np.arange(4)[None, :]] = hi
    return out


def encode_words(data, ctrl) -> np.ndarray:
    """Project words (``data`` uint64, ``ctrl`` bool), ``(..., 4 g)`` -> ``(..., g, 257)``."""
    ctrl = np.asarray(ctrl, dtype=bool)
    return encode(np.where(ctrl, SYNC_CTRL, SYNC_DATA), np.asarray(data, dtype=np.uint64))


def decode_words(bits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(..., 257)`` -> project words ``(data, ctrl, error)``, each ``(..., 4)``."""
    sync, payload, err = decode(bits)
    return payload, sync == SYNC_CTRL, err
