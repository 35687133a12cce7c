"""pngkit.py: a PNG read back, for the tests that get images out of a cell
(test_files.py's own 3x2 picture, test_data_image.py's matplotlib chart).
Standard library only: every chunk's CRC checked, the image data inflated
and each row's filter undone."""

import struct
import zlib

CHANNELS = {2: 3, 6: 4}  # colour type: RGB, RGBA (8 bits each, not interlaced)


def _unfilter(kind, line, prev, bpp):
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + a) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + b) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (a + b) // 2) & 0xFF
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        else:
            assert kind == 0, kind
    return line


def png_decode(data):
    """(width, height, colour type, filter type of each row, rows of pixel
    bytes) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    pos, idat, head = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(kind + body) == crc, kind
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, colour, _, _, interlace = head
    assert depth == 8 and colour in CHANNELS and interlace == 0, head
    bpp = CHANNELS[colour]
    stride = bpp * w
    raw = zlib.decompress(idat)
    assert len(raw) == h * (1 + stride), len(raw)
    filters, rows, prev = [], [], bytearray(stride)
    for r in range(h):
        at = r * (1 + stride)
        filters.append(raw[at])
        prev = _unfilter(raw[at], bytearray(raw[at + 1:at + 1 + stride]), prev, bpp)
        rows.append(prev)
    return w, h, colour, filters, rows
