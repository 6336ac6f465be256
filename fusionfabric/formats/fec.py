"""The RS(544,514) "KP4" code of the FEC profile: field, sizes and generator (IEEE 802.3
cl. 91.5.2.7, cl. 119.2.4.6).

These numbers define the code; the RTL encoder and decoder (:mod:`fusionfabric.rtl.fec`) and
the golden model (:mod:`fusionfabric.sim.fec`) both take them from here. The model's own
encoder and decoder, and their agreement with the independent ``galois`` and ``reedsolo``
decoders, are what the tests compare (docs/fec.md).

- Symbols are elements of GF(2^10) on the primitive polynomial p(x) = x^10 + x^3 + 1
  (:data:`PRIM_POLY` = ``0x409``); alpha = x, the integer 2. Bit ``k`` of a symbol is the
  coefficient of x^k.
- g(x) = prod_{i=0}^{29} (x - alpha^(FIRST_ROOT + i)), monic, degree 30; t = 15.
- A codeword is 544 symbols, ``cw[0]`` first on the wire and the x^543 coefficient; the
  code is RS(1023, 993) shortened by 479 implied leading zero symbols.
- A symbol goes on the wire least significant bit first (:data:`SYMBOL_LSB_FIRST`): the
  profile's choice where the public text is silent (docs/fec.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["M", "N", "K", "NPAR", "T", "PRIM_POLY", "FIRST_ROOT", "Q", "SHORTEN",
           "SYMBOL_LSB_FIRST", "EXP", "LOG", "GENERATOR"]

#: Bits per symbol.
M = 10
#: Codeword length in symbols.
N = 544
#: Message length in symbols (20 transcoded 257-bit blocks = 5140 bits).
K = 514
#: Parity symbols.
NPAR = N - K
#: Correctable symbol errors per codeword.
T = NPAR // 2
#: p(x) = x^10 + x^3 + 1 (IEEE 802.3 cl. 91.5.2.7).
PRIM_POLY = 0x409
#: g(x) has roots alpha^FIRST_ROOT .. alpha^(FIRST_ROOT + NPAR - 1).
FIRST_ROOT = 0
#: Multiplicative order of alpha: 2^M - 1.
Q = (1 << M) - 1
#: Implied leading zero symbols of the shortened code: RS(1023, 993) -> RS(544, 514).
SHORTEN = Q - N
#: A symbol's bit 0 is its first bit on the wire.
SYMBOL_LSB_FIRST = True


def _tables() -> tuple[np.ndarray, np.ndarray]:
    exp = np.zeros(2 * Q + 1, dtype=np.int64)
    log = np.full(1 << M, -1, dtype=np.int64)
    x = 1
    for i in range(Q):
        exp[i] = x
        if log[x] != -1:
            raise ValueError(f"PRIM_POLY={PRIM_POLY:#x} is not primitive")
        log[x] = i
        x <<= 1
        if x >> M:
            x ^= PRIM_POLY
    exp[Q:2 * Q] = exp[:Q]
    exp[2 * Q] = exp[0]
    exp.flags.writeable = False
    log.flags.writeable = False
    return exp, log


#: EXP[i] = alpha^i for i in 0..2*Q (the second period saves a modulo in products).
#: LOG[a] = i with alpha^i = a for a != 0; LOG[0] = -1 (no logarithm).
EXP, LOG = _tables()


def _generator() -> np.ndarray:
    def mul(a: int, b: int) -> int:
        return 0 if a == 0 or b == 0 else int(EXP[LOG[a] + LOG[b]])

    g = [1]                                   # highest degree first
    for i in range(NPAR):
        root = int(EXP[FIRST_ROOT + i])
        # g(x) * (x + root): shift, then add root * g
        g = [a ^ b for a, b in zip(g + [0], [0] + [mul(root, c) for c in g])]
    out = np.array(g, dtype=np.int64)
    out.flags.writeable = False
    return out


#: g(x) coefficients, highest degree first: GENERATOR[0] = 1 (x^30), GENERATOR[30] = g_0.
GENERATOR = _generator()
