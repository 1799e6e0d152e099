"""Writes IDX files (the format of MNIST and Fashion-MNIST) for tests."""
import struct

TYPES = {"u8": (0x08, "B"), "i32": (0x0C, ">i"), "f32": (0x0D, ">f"),
         "f64": (0x0E, ">d")}


def write_idx(path, rows, kind="f32"):
    """rows: a list of examples, each a flat list of numbers."""
    code, fmt = TYPES[kind]
    n = len(rows)
    dims = [n] + ([len(rows[0])] if isinstance(rows[0], list) else [])
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, code, len(dims)))
        for d in dims:
            f.write(struct.pack(">I", d))
        for r in rows:
            for v in (r if isinstance(r, list) else [r]):
                f.write(struct.pack(fmt if fmt != "B" else "B", v))
