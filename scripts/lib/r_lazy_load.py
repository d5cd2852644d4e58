"""Data sets of Debian's R packages (r-cran-*), read without R.

An R package keeps its data sets in a lazy-load database: data/Rdata.rdx, an
index, and data/Rdata.rdb, one compressed serialized object per data set.
The index says where a data set lies in the .rdb; its entry is a 4-byte
big-endian length, then the data: zlib at once (R's compress = 1), or a type
byte first (compress = 2 or 3): '0' stored, '1' zlib, '2' bzip2, 'Z' raw
LZMA2 (xz's filter at preset 9e, as R's R_compress3 writes it). Debian's
python3-rdata parses R's serialization.
"""
import bz2
import gzip
import lzma
import struct
import zlib

import numpy as np
import rdata

_LZMA2 = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]


def parse(serialized: bytes):
    """One object in R's serialization (starting "X\\n")."""
    return rdata.conversion.convert(rdata.parser.parse_data(b"RDX2\n" + serialized))


def _inflate(blob: bytes, typed: bool) -> bytes:
    if not typed:
        return zlib.decompress(blob[4:])
    kind = blob[4:5]
    if kind == b"0":
        return blob[5:]
    if kind == b"1":
        return zlib.decompress(blob[5:])
    if kind == b"2":
        return bz2.decompress(blob[5:])
    if kind == b"Z":
        return lzma.decompress(blob[5:], format=lzma.FORMAT_RAW, filters=_LZMA2)
    raise ValueError("compression type %r" % kind)


def read_data_set(rdx: str, name: str):
    """The data set `name` of the lazy-load database whose index is `rdx`."""
    index = parse(gzip.decompress(open(rdx, "rb").read()))
    if name not in index["variables"]:
        raise KeyError("%s holds no %s" % (rdx, name))
    offset, length = (int(x) for x in index["variables"][name])
    with open(rdx[:-1] + "b", "rb") as fh:
        fh.seek(offset)
        blob = fh.read(length)
    size = struct.unpack(">I", blob[:4])[0]
    typed = int(np.ravel(index["compressed"])[0]) in (2, 3)
    try:
        data = _inflate(blob, typed)
    except (ValueError, zlib.error, lzma.LZMAError, OSError) as e:
        raise ValueError("%s: %s: %s" % (rdx, name, e)) from e
    if len(data) != size:
        raise ValueError("%s: %s inflates to %d bytes, not %d" % (rdx, name, len(data), size))
    return parse(data)
