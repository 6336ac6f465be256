"""Published figures the tests check the models against, each typed in from its source.

The tests import these constants and never read the models' own tables for the expected
side. Each value names where it was published; the clause numbers are those of IEEE Std
802.3-2022.
"""

# -- 64b/66b blocks (IEEE 802.3 clause 49) --------------------------------------------------
# cl. 49.2.4.3: sync header 01 (data) and 10 (control) in transmission order; as an integer
# with the first bit on the wire in bit 0: data = 2, control = 1.
SYNC_DATA = 2
SYNC_CTRL = 1
# cl. 49.2.6: scrambler G(x) = 1 + x^39 + x^58; per payload bit in
# transmission order out = in ^ s[38] ^ s[57], then out shifts into s[0].
SCRAMBLER_TAPS = (38, 57)
SCRAMBLER_BITS = 58

# -- block lock (clause 49, Figure 49-12: lock state diagram) -------------------------------
# 64 consecutive valid sync headers to lock; 16 invalid headers within a 64-header window to
# lose lock; slip one bit while hunting.
LOCK_GOOD_HEADERS = 64
LOCK_BAD_HEADERS = 16
LOCK_WINDOW = 64

# -- multi-lane distribution (clause 82) ----------------------------------------------------
# cl. 82.2.7, Table 82-2 (100GBASE-R alignment marker encodings): M0 M1 M2 of PCS lane 0,
# octets in transmission order; all 20 lanes are also printed in ITU-T G.709 Annex E,
# Table E.2.
MARKER_100G_LANE0 = "C1 68 21"
# cl. 82.2.18.3, Figure 82-11 (alignment marker lock state diagram, variable am_invld_cnt):
# a locked lane returns to hunting when am_invld_cnt reaches 4, i.e. after 4
# consecutive invalid markers; a valid marker resets the count.
AM_INVALID_TO_LOSE_LOCK = 4
