#!/usr/bin/env python3
"""RecordIO fixtures for tests/check_recordio.c, written by MXNet 1.9.1 (the oracle).

Run once, from the repository root, and commit the output:

    /tmp/mxvenv/bin/python scripts/gen_rec_fixtures.py

(/tmp/mxvenv: python3 -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1
'numpy<1.24' pillow; Pillow only encodes the test images, MXNet decodes them). Writes, under
tests/data/io/rec/:

- plain.rec / plain.idx: MXIndexedRecordIO records of raw bytes under the keys of PLAIN
  (repeated in the C test), among them payloads holding the magic word at 4-aligned
  offsets (MXNet splits those records into continued parts), at an unaligned offset (not
  split), at the very start and the very end, and an empty one.
- images.rec / images.idx: image records (recordio.pack: IRHeader flag 0, a scalar label,
  id, id2) of the images of IMAGES, JPEG (RGB 4:2:0, RGB 4:4:4, progressive, grayscale,
  CMYK) and PNG (RGB, grayscale, RGBA, palette); label = 0.5 + index, id = 100 + index,
  id2 = 7 * index.
- vector.rec / vector.idx: the first four images again with label vectors of 3 floats
  (IRHeader flag 3): [index, -index, 0.25 * index], id = index.
- decoded.params: an mx.nd.save dict of float32 arrays, img<i> = mx.image.imdecode of
  image i (HWC, RGB, what MXNet's OpenCV makes of it).
- iter.params: batches of mx.io.ImageRecordIter on images.rec / vector.rec, the
  parameters of each case in CASES (repeated in the C test): <case>_data<b> and
  <case>_label<b> for batch b, and <case>_pad<b> (one element); data as float32 also
  where the case asks for uint8 (its values are the bytes).
- made_mean.params: "mean_img", the mean image MXNet computes and saves when mean_img
  names no file (the parameters of MADE_MEAN), and "data0", the first batch normalised
  with it.
- mean16.nd: the mean image of the meanimg case, (3, 16, 16) float32 under the key
  mean_img, as MXNet writes the mean images it computes. No case uses
  round_batch=False: MXNet 1.9.1 then returns the last partial batch with stale label rows
  and pad 0.
"""
import io
import os
import struct

os.environ["MXNET_MKLDNN_ENABLED"] = "0"

import mxnet as mx
import numpy as np
from mxnet import recordio
from PIL import Image

OUT = os.path.join("tests", "data", "io", "rec")
MAGIC = struct.pack("<I", 0xCED7230A)

# key -> payload; the C test builds the same list (plain_payload in check_recordio.c)
PLAIN = [
    (0, b""),
    (1, b"a"),
    (2, b"abcd"),
    (3, b"hello, recordio"),
    (5, MAGIC + b"tail"),
    (7, b"head" + MAGIC + b"mid!" + MAGIC + MAGIC + b"xy"),
    (8, b"ab" + MAGIC + b"cd"),
    (9, b"data" + MAGIC),
    (11, bytes(i % 251 for i in range(300))),
]


def pattern(h, w, c, seed):
    """A smooth gradient plus a little noise: JPEG-friendly, but every pixel differs."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    planes = [(x * (9 + 3 * k) + y * (5 + 2 * k) + 40 * k) % 256 for k in range(c)]
    img = np.stack(planes, axis=-1).astype(np.int32) + rng.randint(-12, 13, size=(h, w, c))
    return np.clip(img, 0, 255).astype(np.uint8)


def encode(fmt, mode, h, w, seed, **save):
    if mode == "L":
        im = Image.fromarray(pattern(h, w, 1, seed)[:, :, 0], "L")
    elif mode == "P":
        im = Image.fromarray(pattern(h, w, 3, seed), "RGB").quantize(colors=16)
    else:
        im = Image.fromarray(pattern(h, w, len(mode), seed), mode)
    buf = io.BytesIO()
    im.save(buf, format=fmt, **save)
    return buf.getvalue()


# (name, bytes); images are 20 rows x 24 columns, at least the iterator cases' crops
IMAGES = [
    ("rgb420.jpg", encode("JPEG", "RGB", 20, 24, 1, quality=90)),
    ("rgb444.jpg", encode("JPEG", "RGB", 20, 24, 2, quality=95, subsampling=0)),
    ("progressive.jpg", encode("JPEG", "RGB", 20, 24, 3, quality=85, progressive=True)),
    ("gray.jpg", encode("JPEG", "L", 20, 24, 4, quality=90)),
    ("cmyk.jpg", encode("JPEG", "CMYK", 20, 24, 5, quality=90)),
    ("rgb.png", encode("PNG", "RGB", 20, 24, 6)),
    ("gray.png", encode("PNG", "L", 20, 24, 7)),
    ("rgba.png", encode("PNG", "RGBA", 20, 24, 8)),
    ("palette.png", encode("PNG", "P", 20, 24, 9)),
]

# (case, rec file, ImageRecordIter parameters); every case: no shuffle, one thread
CASES = [
    ("center", "images", dict(data_shape=(3, 16, 16), batch_size=4)),
    ("norm", "images", dict(data_shape=(3, 18, 20), batch_size=5, mean_r=123.68, mean_g=116.28,
                            mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375,
                            scale=0.5)),
    ("resize", "images", dict(data_shape=(3, 12, 14), batch_size=4, resize=16)),
    ("upscale", "images", dict(data_shape=(3, 10, 12), batch_size=3, resize=25)),
    ("vector", "vector", dict(data_shape=(3, 20, 24), batch_size=3, label_width=3)),
    ("u8", "images", dict(data_shape=(3, 12, 14), batch_size=4, resize=16, dtype="uint8")),
    ("pad", "images", dict(data_shape=(3, 24, 28), batch_size=3, pad=2, fill_value=7)),
    ("rotate", "images", dict(data_shape=(3, 16, 16), batch_size=3, rotate=30, fill_value=200)),
    ("rotpad", "images", dict(data_shape=(3, 20, 20), batch_size=4, resize=22, rotate=45, pad=3,
                              fill_value=0)),
    ("meanimg", "images", dict(data_shape=(3, 16, 16), batch_size=5, std_r=2, std_g=4, std_b=8,
                               scale=0.5, mean_img=os.path.join(OUT, "mean16.nd"))),
]

# the parameters under which MXNet computes a mean image (made_mean.params)
MADE_MEAN = dict(data_shape=(3, 12, 14), batch_size=4, resize=16, std_r=2, std_g=4, std_b=8,
                 scale=0.5)


def write_plain():
    rec = recordio.MXIndexedRecordIO(os.path.join(OUT, "plain.idx"),
                                     os.path.join(OUT, "plain.rec"), "w")
    for key, payload in PLAIN:
        rec.write_idx(key, payload)
    rec.close()
    rec = recordio.MXIndexedRecordIO(os.path.join(OUT, "plain.idx"),
                                     os.path.join(OUT, "plain.rec"), "r")
    for key, payload in PLAIN:
        assert rec.read_idx(key) == payload, key


def write_images(name, count, label_of):
    rec = recordio.MXIndexedRecordIO(os.path.join(OUT, name + ".idx"),
                                     os.path.join(OUT, name + ".rec"), "w")
    for i, (_, data) in enumerate(IMAGES[:count]):
        label, ident, ident2 = label_of(i)
        rec.write_idx(i, recordio.pack(recordio.IRHeader(0, label, ident, ident2), data))
    rec.close()


def main():
    os.makedirs(OUT, exist_ok=True)
    write_plain()
    write_images("images", len(IMAGES), lambda i: (0.5 + i, 100 + i, 7 * i))
    write_images("vector", 4, lambda i: (np.array([i, -i, 0.25 * i], np.float32), i, 0))

    decoded = {}
    for i, (_, data) in enumerate(IMAGES):
        decoded["img%d" % i] = mx.image.imdecode(data).astype("float32")
    mx.nd.save(os.path.join(OUT, "decoded.params"), decoded)

    # a (3, 16, 16) mean image, as MXNet saves one (a dict with the key mean_img)
    rng = np.random.RandomState(16)
    mean = rng.uniform(0, 255, size=(3, 16, 16)).astype(np.float32)
    mx.nd.save(os.path.join(OUT, "mean16.nd"), {"mean_img": mx.nd.array(mean)})

    batches = {}
    for case, rec, params in CASES:
        it = mx.io.ImageRecordIter(path_imgrec=os.path.join(OUT, rec + ".rec"), shuffle=False,
                                   preprocess_threads=1, **params)
        for b, batch in enumerate(it):
            batches["%s_data%d" % (case, b)] = batch.data[0].astype("float32")
            batches["%s_label%d" % (case, b)] = batch.label[0].astype("float32")
            batches["%s_pad%d" % (case, b)] = mx.nd.array([batch.pad], dtype="float32")
    mx.nd.save(os.path.join(OUT, "iter.params"), batches)
    # a mean image MXNet computes itself (mean_img names no file yet), and the first batch
    # normalised with it
    made = os.path.join(OUT, "made_mean.tmp")
    if os.path.exists(made):
        os.remove(made)
    it = mx.io.ImageRecordIter(path_imgrec=os.path.join(OUT, "images.rec"), shuffle=False,
                               preprocess_threads=1, **MADE_MEAN, mean_img=made)
    data0 = it.next().data[0].astype("float32")
    mx.nd.save(os.path.join(OUT, "made_mean.params"),
               {"mean_img": mx.nd.load(made)["mean_img"], "data0": data0})
    os.remove(made)
    for name in sorted(os.listdir(OUT)):
        print("%-16s %6d bytes" % (name, os.path.getsize(os.path.join(OUT, name))))
    print("batches:", {case: sum(1 for k in batches if k.startswith(case + "_data"))
                       for case, _, _ in CASES})


if __name__ == "__main__":
    main()
