#!/usr/bin/env python3
"""Fashion-MNIST as RecordIO image files, a stand-in for a folder of photos.

    python3 scripts/make_fashion_rec.py OUT [--train N] [--test N] [--mxc build/bin/mxc]
                                            [--size 224] [--quality 90] [--threads 2]

Reads the IDX files `make train` uses (Debian's dataset-fashion-mnist in
/usr/share/datasets/fashion-mnist, or $MXC_FASHION_MNIST_DIR), writes the first N training
and test images as 28x28 grayscale PNGs into class folders OUT/{train,test}/<k>_<name>/
(named so that folder order is label order), and packs each folder with
`mxc im2rec --resize SIZE`, which decodes them, upscales them to SIZE x SIZE RGB and stores
them as JPEGs of the given quality: OUT/train.rec, OUT/test.rec (+ .idx, .lst).

Only Python's standard library is needed (the PNGs are written by hand; the upscaling and
JPEG encoding are mxc's), so nothing is installed for it. `make fashion-rec` runs it and a
short training on the result (docs/io.md).
"""
import argparse
import gzip
import os
import struct
import subprocess
import sys
import zlib

CLASSES = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker",
           "bag", "ankle_boot"]


def idx_file(directory, name):
    """Bytes of an IDX file, gzip-compressed or raw (as the C reader takes them)."""
    for path in (os.path.join(directory, name + ".gz"), os.path.join(directory, name)):
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    sys.exit("make_fashion_rec: no %s(.gz) in %s" % (name, directory))


def read_set(directory, prefix, limit):
    images = idx_file(directory, prefix + "-images-idx3-ubyte")
    labels = idx_file(directory, prefix + "-labels-idx1-ubyte")
    magic, count, rows, cols = struct.unpack(">IIII", images[:16])
    if magic != 0x803 or struct.unpack(">II", labels[:8]) != (0x801, count):
        sys.exit("make_fashion_rec: %s: not a Fashion-MNIST IDX pair" % prefix)
    count = min(count, limit) if limit > 0 else count
    size = rows * cols
    for i in range(count):
        yield labels[8 + i], rows, cols, images[16 + i * size:16 + (i + 1) * size]


def png_gray(rows, cols, pixels):
    """An 8-bit grayscale PNG: signature, IHDR, one IDAT (each row with filter 0), IEND."""
    def chunk(kind, body):
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)
    raw = b"".join(b"\x00" + pixels[r * cols:(r + 1) * cols] for r in range(rows))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", cols, rows, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=0, help="training images (0: all 60,000)")
    ap.add_argument("--test", type=int, default=0, help="test images (0: all 10,000)")
    ap.add_argument("--mxc", default=os.path.join("build", "bin", "mxc"))
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    directory = os.environ.get("MXC_FASHION_MNIST_DIR") or "/usr/share/datasets/fashion-mnist"

    for part, prefix, limit in (("train", "train", args.train), ("test", "t10k", args.test)):
        root = os.path.join(args.out, part)
        for k, name in enumerate(CLASSES):
            os.makedirs(os.path.join(root, "%d_%s" % (k, name)), exist_ok=True)
        n = 0
        for n, (label, rows, cols, pixels) in enumerate(read_set(directory, prefix, limit), 1):
            path = os.path.join(root, "%d_%s" % (label, CLASSES[label]), "%05d.png" % n)
            with open(path, "wb") as f:
                f.write(png_gray(rows, cols, pixels))
        lst = os.path.join(args.out, part + ".lst")
        if os.path.exists(lst):
            os.remove(lst)  # im2rec would use a stale list as it is
        subprocess.check_call([args.mxc, "im2rec", os.path.join(args.out, part), root,
                               "--resize", str(args.size), "--quality", str(args.quality),
                               "--threads", str(args.threads)])
        print("make_fashion_rec: %s: %d images -> %s.rec" % (part, n,
                                                             os.path.join(args.out, part)))


if __name__ == "__main__":
    main()
