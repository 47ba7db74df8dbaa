#!/usr/bin/env python3
"""attn's safetensors files against Python's reading and writing (docs/safetensors.md).

  --route python  (CTest: python_safetensors) json + struct only, always available:
                  1. runs attn_tests' hidden test case "safetensors: write files for Python" with
                     ATTN_SAFETENSORS_DIR=<dir>, then reads attn_float.safetensors and
                     attn_double.safetensors here byte by byte: the 8-byte length, 8 + N a multiple
                     of 8, the header JSON padded with spaces, offsets that cover the data in the
                     order given, and every number (the pattern ((37k + 11t) mod 64 − 32) / 8 and
                     the special values) by struct.unpack;
                  2. writes python_written.safetensors (write_python_file below: F32, F64, F16, BF16,
                     a scalar, an empty tensor, a name with é written as \\u00e9, metadata, the
                     tensors' data in another order than the header lists them) and runs the hidden
                     test case "safetensors: read the files Python wrote".
  --route torch   (CTest: torch_safetensors) where torch or the safetensors package imports: reads
                  attn's files with safetensors.torch.load_file (the reference library) where it is
                  installed, else with torch.frombuffer on the offsets json gives; writes
                  torch_written.safetensors, BF16 and F16 tensors rounded by torch from numbers
                  that are not exact in them, torch's widened floats in the metadata, for attn to
                  read. Where neither imports it prints why and exits 77 (CTest: skipped).
  --write-fixture PATH  writes python_written.safetensors to PATH (tests/python/ holds it,
                  committed, for test_safetensors.cpp to read on every build).

  python3 tests/python/safetensors_check.py --route python --dir /tmp/st \\
      --attn-tests build/test/tests/attn_tests
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys


def pattern(t, k):
    return ((37 * k + 11 * t) % 64 - 32) / 8


def pack_file(header, data):
    """The 8-byte length, the header JSON (json.dumps: non-ASCII as \\uXXXX) padded with spaces to
    a multiple of 8 as the reference library pads it, then the data."""
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def bf16_bytes(values):
    """BF16 of numbers exact in it: a float32's upper 16 bits."""
    out = b""
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        assert bits & 0xFFFF == 0, v
        out += struct.pack("<H", bits >> 16)
    return out


def write_python_file(path):
    # data laid out in another order than the header lists the tensors
    pieces = [
        ("bf16", "BF16", [4], bf16_bytes([pattern(3, k) for k in range(4)])),
        ("layers.0.w\u00e9", "F64", [3], struct.pack("<3d", *[pattern(1, k) for k in range(3)])),
        ("scalar", "F32", [], struct.pack("<f", 2.5)),
        ("f16", "F16", [2, 2], struct.pack("<4e", *[pattern(2, k) for k in range(4)])),
        ("empty", "F32", [0, 3], b""),
        ("specials", "F32", [6], struct.pack("<6f", math.inf, -math.inf, -0.0, 2.0 ** -149,
                                             3.4028234663852886e38, math.nan)),
        ("f32", "F32", [2, 3], struct.pack("<6f", *[pattern(0, k) for k in range(6)])),
    ]
    header = {"__metadata__": {"written_by": "python json+struct", "unicode": "\u00e9\u2713"}}
    data = b""
    offsets = {}
    for name, dtype, shape, raw in pieces:
        offsets[name] = (dtype, shape, [len(data), len(data) + len(raw)])
        data += raw
    for name in sorted(offsets):  # the header in order of name, not of the data
        dtype, shape, off = offsets[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": off}
    with open(path, "wb") as f:
        f.write(pack_file(header, data))


def read_layout(path):
    """Checks the layout of a file attn wrote; returns (header dict, data bytes)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0, f"{path}: 8 + N = {8 + n} is not a multiple of 8"
    text = raw[8:8 + n].decode("utf-8")
    assert text.startswith("{"), path
    stripped = text.rstrip(" ")
    assert len(text) - len(stripped) < 8, f"{path}: more padding than 8 bytes need"
    header = json.loads(stripped)
    data = raw[8 + n:]
    at = 0
    for name, info in header.items():  # json keeps the file's order: attn writes the list's order
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        assert b == at, f"{path}: {name} starts at {b}, expected {at}"
        size = {"F32": 4, "F64": 8}[info["dtype"]]
        assert e - b == size * math.prod(info["shape"]), f"{path}: {name}: offsets disagree with the shape"
        at = e
    assert at == len(data), f"{path}: the tensors end at {at}, the data is {len(data)} bytes"
    return header, data


def numbers(header, data, name):
    info = header[name]
    b, e = info["data_offsets"]
    fmt = {"F32": "f", "F64": "d"}[info["dtype"]]
    return list(struct.unpack("<%d%s" % ((e - b) // struct.calcsize(fmt), fmt), data[b:e]))


def same(a, b):
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or
                                    (x == y and math.copysign(1, x) == math.copysign(1, y))
                                    for x, y in zip(a, b))


def float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


EXPECTED = {
    ("attn_float.safetensors", "weight"): ("F32", [2, 3], [pattern(0, k) for k in range(6)]),
    ("attn_float.safetensors", "specials"): ("F32", [3], [-0.0, math.inf, float32(1e-40)]),
    ("attn_double.safetensors", "blocks.0.w\u00e9"): ("F64", [2, 3, 4], [pattern(1, k) for k in range(24)]),
    ("attn_double.safetensors", "scalar"): ("F64", [], [2.5]),
}


def check_attn_files_python(directory):
    metadata = {"attn_float.safetensors": {"written_by": "attn"}, "attn_double.safetensors": None}
    for (file, name), (dtype, shape, want) in EXPECTED.items():
        header, data = read_layout(os.path.join(directory, file))
        assert header.get("__metadata__") == metadata[file], f"{file}: metadata {header.get('__metadata__')}"
        assert header[name]["dtype"] == dtype and header[name]["shape"] == shape, f"{file}: {name}: {header[name]}"
        got = numbers(header, data, name)
        assert same(got, want), f"{file}: {name}: {got} != {want}"
    print("python: attn's files read back by json + struct: layout and every number as written")


def check_attn_files_torch(directory):
    import torch  # the caller checked that it imports
    try:
        from safetensors.torch import load_file
    except ImportError as e:
        load_file = None
        print(f"torch: the safetensors package does not import ({e}): reading with torch.frombuffer instead")
    for (file, name), (dtype, shape, want) in EXPECTED.items():
        path = os.path.join(directory, file)
        if load_file is not None:
            t = load_file(path)[name]
        else:
            header, data = read_layout(path)
            b, e = header[name]["data_offsets"]
            t = torch.frombuffer(bytearray(data[b:e]), dtype={"F32": torch.float32, "F64": torch.float64}[dtype])
            t = t.reshape(shape)
        assert t.dtype == {"F32": torch.float32, "F64": torch.float64}[dtype] and list(t.shape) == shape, (file, name)
        assert same(t.flatten().tolist(), want), f"torch: {file}: {name}"
    print("torch: attn's files read back" + (" by safetensors.torch.load_file" if load_file else " by torch.frombuffer"))


def write_torch_file(path):
    import torch
    values = [0.1 * k - 1.3 for k in range(12)] + [1e-6, 65519.0, 3e38, -7e-8]  # not exact in BF16/F16
    meta = {}
    data = b""
    header = {}
    for name, dtype, tdtype in (("bf16", "BF16", torch.bfloat16), ("f16", "F16", torch.float16)):
        t = torch.tensor(values, dtype=torch.float64).to(tdtype)
        raw = t.view(torch.int16).numpy().astype("<i2").tobytes()
        header[name] = {"dtype": dtype, "shape": [len(values)], "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
        widened = t.to(torch.float32).tolist()
        meta[name] = " ".join("%08x" % struct.unpack("<I", struct.pack("<f", x))[0] for x in widened)
    header["__metadata__"] = meta
    with open(path, "wb") as f:
        f.write(pack_file(header, data))


def run_case(binary, case, directory):
    env = dict(os.environ, ATTN_SAFETENSORS_DIR=directory)
    r = subprocess.call([binary, case], env=env)
    if r != 0:
        print(f"{binary} \"{case}\" failed ({r})", file=sys.stderr)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--route", choices=["python", "torch"])
    ap.add_argument("--dir", help="a scratch directory (created)")
    ap.add_argument("--attn-tests", help="the attn_tests executable")
    ap.add_argument("--write-fixture", metavar="PATH")
    args = ap.parse_args()
    if args.write_fixture:
        write_python_file(args.write_fixture)
        return 0
    if not (args.route and args.dir and args.attn_tests):
        ap.error("--route, --dir and --attn-tests are needed (or --write-fixture)")
    os.makedirs(args.dir, exist_ok=True)
    if args.route == "torch":
        try:
            import torch  # noqa: F401
        except ImportError as e:
            print(f"skipped: torch does not import here ({e}); Debian: apt-get install python3-torch")
            return 77
    if run_case(args.attn_tests, "safetensors: write files for Python (ATTN_SAFETENSORS_DIR)", args.dir):
        return 1
    if args.route == "python":
        check_attn_files_python(args.dir)
        write_python_file(os.path.join(args.dir, "python_written.safetensors"))
    else:
        check_attn_files_torch(args.dir)
        write_python_file(os.path.join(args.dir, "python_written.safetensors"))
        write_torch_file(os.path.join(args.dir, "torch_written.safetensors"))
    return run_case(args.attn_tests, "safetensors: read the files Python wrote (ATTN_SAFETENSORS_DIR)", args.dir)


if __name__ == "__main__":
    sys.exit(main())
