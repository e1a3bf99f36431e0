#!/usr/bin/env python3
"""scripts/make_nd_fixtures.py — writes tests/data/nd/, the NDArray list files that
tests/check_nd_format.c decodes, re-encodes and compares (FORMATS.md, "NDArray list").

Provenance, stated again in each description file:
  * "mxnet" fixtures are written by real MXNet 1.9.1 from PyPI (mx.nd.save, and
    mx.npx.save for the numpy-shape v3 files), then loaded back with MXNet and compared
    with the source arrays.
  * "hand" fixtures cover what MXNet 1.9.1 cannot write: v1 and legacy (<= 0.10) records
    and none (ndim 0) arrays. They are built here with struct from FORMATS.md; the script
    then asks MXNet 1.9.1 to load each one and records in the description whether it did.

For every fixture NAME it writes NAME.params and NAME.txt, and it lists the names in
index.txt. A description file is line-based ('#' starts a comment line):
    version V              record version of every record (0 legacy, 1, 2, 3)
    expect CODE            decoding must fail with MXC_<CODE>; no list/array lines follow
    list named|unnamed N   N arrays
    array NAME DTYPE ctx DEV_TYPE DEV_ID shape NDIM D1 .. Dn     (NAME '-' when unnamed;
                           a none array is "shape 0" and reads as float32 on cpu(0))
    data HEX               the array's bytes, little-endian, C order (empty for none arrays)

Run by hand, not in CI: python3 scripts/make_nd_fixtures.py
It needs `import mxnet` to work. When it does not, the script makes a virtual environment
(build/mxnet-venv, or --venv DIR), installs mxnet==1.9.1 and 'numpy<1.24' from PyPI with
pip and runs itself again there. There is no fallback without MXNet.
"""
import argparse
import os
import struct
import subprocess
import sys
import venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "nd")

LIST_MAGIC = 0x112
V1_MAGIC, V2_MAGIC = 0xF993FAC8, 0xF993FAC9


def ensure_mxnet(venv_dir):
    """Returns when mxnet imports; otherwise re-runs this script in a venv that has it."""
    try:
        import mxnet  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("MXC_FIXTURE_REEXEC"):
        sys.exit("mxnet still does not import inside %s; giving up" % venv_dir)
    py = os.path.join(venv_dir, "bin", "python")
    if not os.path.exists(py):
        print("creating %s with mxnet==1.9.1" % venv_dir)
        venv.create(venv_dir, with_pip=True)
        subprocess.check_call([py, "-m", "pip", "install", "-q", "mxnet==1.9.1", "numpy<1.24"])
    env = dict(os.environ, MXC_FIXTURE_REEXEC="1")
    sys.exit(subprocess.call([py] + sys.argv, env=env))


class Array:
    """One array of a fixture: name (None when unnamed), a numpy array (None for a none
    array) and its context as (dev_type, dev_id)."""

    def __init__(self, name, value, ctx=(1, 0)):
        self.name, self.value, self.ctx = name, value, ctx


def describe(path, version, arrays, named, provenance, expect=None):
    lines = ["# %s" % line for line in provenance]
    lines.append("version %d" % version)
    if expect:
        lines.append("expect %s" % expect)
    else:
        lines.append("list %s %d" % ("named" if named else "unnamed", len(arrays)))
        for a in arrays:
            name = a.name if named else "-"
            if a.value is None:
                lines.append("array %s float32 ctx 1 0 shape 0" % name)
                lines.append("data")
                continue
            v = a.value
            lines.append("# values: %s" % " ".join(str(x) for x in v.ravel().tolist()))
            lines.append("array %s %s ctx %d %d shape %d %s" % (
                name, v.dtype.name, a.ctx[0], a.ctx[1], v.ndim, " ".join(map(str, v.shape))))
            lines.append("data %s" % v.astype(v.dtype.newbyteorder("<")).tobytes().hex())
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ---- Hand-built files, from FORMATS.md ---------------------------------------------------

TYPE_FLAGS = {"float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4, "int8": 5,
              "int64": 6, "bool": 7}


def hand_record(version, a):
    """One record: version 0 (legacy: ndim, uint32 dims), 1 (magic, int64 dims) or 2
    (magic, storage type, int64 dims); a none array ends after its ndim 0."""
    v = a.value
    shape = () if v is None else v.shape
    if version == 0:
        out = struct.pack("<I", len(shape)) + struct.pack("<%dI" % len(shape), *shape)
    else:
        out = struct.pack("<I", V1_MAGIC if version == 1 else V2_MAGIC)
        if version == 2:
            out += struct.pack("<i", 0)
        out += struct.pack("<I", len(shape)) + struct.pack("<%dq" % len(shape), *shape)
    if v is None:
        return out
    out += struct.pack("<iii", a.ctx[0], a.ctx[1], TYPE_FLAGS[v.dtype.name])
    return out + v.astype(v.dtype.newbyteorder("<")).tobytes()


def hand_file(version, arrays, named):
    out = struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))
    out += b"".join(hand_record(version, a) for a in arrays)
    out += struct.pack("<Q", len(arrays) if named else 0)
    for a in arrays if named else []:
        name = a.name.encode("utf-8")
        out += struct.pack("<Q", len(name)) + name
    return out


# ---- MXNet ---------------------------------------------------------------------------------

def same(np, loaded, arrays, named):
    """True when MXNet's load result holds exactly `arrays`."""
    import mxnet as mx
    if named:
        if not isinstance(loaded, dict) or list(loaded) != [a.name for a in arrays]:
            return False
        loaded = [loaded[a.name] for a in arrays]
    if len(loaded) != len(arrays):
        return False
    for got, a in zip(loaded, arrays):
        if a.value is None:
            if got.handle is not None and got.shape not in ((), None):
                return False
            continue
        g = got.asnumpy() if isinstance(got, (mx.nd.NDArray, mx.np.ndarray)) else got
        if g.dtype != a.value.dtype or g.shape != a.value.shape or \
                g.tobytes() != a.value.tobytes():
            return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=os.path.join(ROOT, "build", "mxnet-venv"))
    args = parser.parse_args()
    ensure_mxnet(args.venv)

    import mxnet as mx
    import numpy as np

    os.makedirs(OUT, exist_ok=True)
    names = []
    origin = ["Written by MXNet %s (%s) through scripts/make_nd_fixtures.py." % (
        mx.__version__, "%s"), "Do not edit; run the script again instead."]

    def mxnet_fixture(fname, arrays, named, numpy_shape=False, expect=None):
        if numpy_shape:
            with mx.util.np_shape(True), mx.util.np_array(True):
                return mxnet_fixture_in_mode(fname, arrays, named, numpy_shape, expect)
        return mxnet_fixture_in_mode(fname, arrays, named, numpy_shape, expect)

    def mxnet_fixture_in_mode(fname, arrays, named, numpy_shape, expect):
        path = os.path.join(OUT, fname + ".params")
        nd = mx.np if numpy_shape else mx.nd
        vals = [nd.array(a.value, dtype=a.value.dtype,
                         ctx=mx.Context(mx.Context.devtype2str[a.ctx[0]], a.ctx[1]))
                for a in arrays]
        data = {a.name: v for a, v in zip(arrays, vals)} if named else vals
        if numpy_shape:
            mx.npx.save(path, data)
            how = "mx.npx.save, numpy-shape mode"
        else:
            mx.nd.save(path, data)
            how = "mx.nd.save"
        if expect is None:
            loaded = mx.npx.load(path) if numpy_shape else mx.nd.load(path)
            assert same(np, loaded, arrays, named), "MXNet reads %s back differently" % fname
        prov = [origin[0] % how, origin[1]]
        describe(os.path.join(OUT, fname + ".txt"), 3 if numpy_shape else 2, arrays, named,
                 prov, expect)
        names.append(fname)

    def hand_fixture(fname, version, arrays, named, note):
        path = os.path.join(OUT, fname + ".params")
        with open(path, "wb") as f:
            f.write(hand_file(version, arrays, named))
        try:
            ok = same(np, mx.nd.load(path), arrays, named)
            verdict = "loads it with the same contents" if ok else "loads it DIFFERENTLY"
        except Exception as e:  # MXNetError, or the Python frontend's own complaints
            verdict = "fails to load it (%s)" % str(e).strip().splitlines()[-1][:100]
            if "unknown storage type: -1" in verdict:
                verdict += ": its C++ loader parsed the file, the Python frontend cannot " \
                    "wrap the none array it made"
        prov = ["Built by hand with struct from FORMATS.md (scripts/make_nd_fixtures.py): %s."
                % note, "MXNet %s %s." % (mx.__version__, verdict),
                "Do not edit; run the script again instead."]
        describe(os.path.join(OUT, fname + ".txt"), version, arrays, named, prov)
        names.append(fname)
        print("%-16s hand-built; MXNet %s" % (fname, verdict))

    f32 = np.float32
    # FORMATS.md's worked example: exactly 109 bytes.
    mxnet_fixture("worked_example", [Array("arg:w", np.array([[1, 2, 3], [4, 5, 6]], f32))],
                  named=True)
    mxnet_fixture("named_dtypes", [
        Array("arg:bias", np.array([0.5, -1.25, 1e300, -0.0], np.float64)),
        Array("aux:count", np.arange(-4, 4, dtype=np.int32).reshape(2, 2, 2) * 1000003),
        Array("aux:step", np.array([2**40 + 7, -5, 2**62], np.int64)),
        Array("arg:pixels", np.arange(0, 240, 20, dtype=np.uint8).reshape(2, 1, 2, 3)),
        Array("arg:q", np.array([-128, -1, 0, 1, 127], np.int8)),
        Array("arg:half", np.array([[1.5, -2.0, 65504.0]], np.float16)),
        Array("aux:mask", np.array([True, False, False, True])),
        Array("arg:\u03b2eta", np.array([3.25, -7.5], f32), ctx=(5, 0)),  # cpu_shared(0)
    ], named=True)
    mxnet_fixture("unnamed", [Array(None, np.array([0.25, 0.5, 0.75], f32)),
                              Array(None, np.array([[7, -8], [9, -10]], np.int32))],
                  named=False)
    mxnet_fixture("zero_size", [Array("arg:none0", np.zeros((0,), f32)),
                                Array("arg:z", np.zeros((2, 0, 3), f32)),
                                Array("arg:one", np.array([42.0], f32))], named=True)
    mxnet_fixture("numpy_v3", [Array("a", np.arange(6, dtype=f32).reshape(2, 3)),
                               Array("b", np.array([1, -2, 3, -4], np.int64))],
                  named=True, numpy_shape=True)
    # A 0-d array: mxc has no 0-d arrays, so decoding it is MXC_ENOTSUP.
    mxnet_fixture("numpy_scalar_v3", [Array(None, np.array(5.0, f32))], named=False,
                  numpy_shape=True, expect="ENOTSUP")

    hand_fixture("none_v2", 2, [Array(None, np.array([1.0, 2.0], f32)), Array(None, None),
                                Array(None, np.array([3], np.int32))], False,
                 "version 2 records around a none (ndim 0) array, which MXNet cannot save")
    hand_fixture("v1", 1, [Array("arg:w", np.array([[1, 2], [3, 4]], f32)),
                           Array("aux:n", np.array([5, 6, 7], np.int64))], True,
                 "version 1 records (no storage type)")
    hand_fixture("v1_none", 1, [Array("a", np.array([1.0], f32)), Array("b", None),
                                Array("c", np.array([2], np.int32))], True,
                 "version 1 records around a none (ndim 0) array, as MXNet 0.11 wrote them")
    hand_fixture("legacy", 0, [Array(None, np.array([1.5, 2.5, 3.5], f32)),
                               Array(None, np.array([[1, 2], [3, 4]], np.uint8))], False,
                 "legacy (<= 0.10) records: ndim then uint32 dims, no magic")
    hand_fixture("legacy_none", 0, [Array(None, np.array([1.0], f32)), Array(None, None),
                                    Array(None, np.array([9], np.int8))], False,
                 "legacy records around a none (ndim 0) array, as MXNet <= 0.10 wrote them")

    with open(os.path.join(OUT, "index.txt"), "w") as f:
        f.write("# NDArray list fixtures (scripts/make_nd_fixtures.py): NAME.params, NAME.txt\n")
        f.write("\n".join(names) + "\n")
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print("wrote %d fixtures, %d bytes, into %s" % (len(names), total, OUT))


if __name__ == "__main__":
    main()
