"""RS(544,514) "KP4" forward error correction (IEEE 802.3 cl. 91): encoder and a
P-symbols-per-cycle decoder (syndromes, RiBM, Chien search and Forney)."""

from fusionfabric.rtl.blocks import Block, Param
from fusionfabric.rtl.fec.decoder import RsDecoder
from fusionfabric.rtl.fec.encoder import RsEncoder
from fusionfabric.rtl.fec.pcs_tx import FecPcsTx
from fusionfabric.rtl.fec.pcs_rx import FecPcsRx

__all__ = ["RsEncoder", "RsDecoder", "FecPcsTx", "FecPcsRx", "BLOCKS"]

_P = Param("P", int, 8, "symbols per cycle, a divisor of 544",
           choices=(1, 2, 4, 8, 16, 17, 32, 34, 68, 136, 272, 544))

BLOCKS = [
    Block("rs-encoder", RsEncoder, params=[_P], ci_params={"P": 4},
          doc="RS(544,514) KP4 systematic encoder, P symbols per cycle"),
    Block("rs-decoder", RsDecoder, params=[
        _P,
        Param("bypass_correction", bool, False, "detect and flag only (cl. 91 bypass)"),
        Param("bypass_indication", bool, False, "correct, never flag uncorrectable"),
        Param("counter_width", int, 32, "bits of each saturating counter"),
        Param("pipeline", bool, False, "two more register stages: 2 cycles of latency, "
              "above 100 MHz on ECP5"),
    ], ci_params={"P": 4}, doc="RS(544,514) KP4 decoder at line rate, P symbols per cycle"),
    Block("fec-pcs-tx", FecPcsTx, params=[
        Param("n_lanes", int, 2, "FEC lanes", choices=(1, 2, 4, 8, 16)),
        Param("symbols", int, 8, "codeword symbols per cycle over all lanes (P), a divisor "
              "of 544 and a multiple of n_lanes",
              choices=(1, 2, 4, 8, 16, 17, 32, 34, 68, 136, 272, 544)),
        Param("n_words", int, 2, "client words per row; n_words * 544 >= 80 * symbols"),
        Param("am_period", int, 4096, "codewords per marker period (>= 2)"),
    ], ci_params={"n_lanes": 1, "symbols": 4, "n_words": 1, "am_period": 2},
          doc="FEC PCS transmitter: 256b/257b, scrambler, markers, RS(544,514), FEC lanes"),
    Block("fec-pcs-rx", FecPcsRx, params=[
        Param("n_lanes", int, 2, "FEC lanes", choices=(1, 2, 4, 8, 16)),
        Param("symbols", int, 8, "codeword symbols per cycle over all lanes (P <= 25)"),
        Param("n_words", int, 2, "client words per output row"),
        Param("am_period", int, 4096, "codewords per marker period"),
        Param("max_skew", int, 64, "lane skew in symbols the deskew absorbs"),
        Param("bypass_correction", bool, False, "decoder detects only (cl. 91 bypass)"),
        Param("counter_width", int, 32, "bits of each saturating counter"),
        Param("decoder_pipeline", bool, False, "the RS decoder's pipeline option (docs/fec.md, "
              "FPGA): 102.8 MHz for the decoder at P = 8, 2 cycles more latency"),
    ], ci_params={"symbols": 4, "n_words": 1},
          doc="FEC PCS receiver: lane lock, deskew, RS(544,514) decode, 257b decode"),
]
