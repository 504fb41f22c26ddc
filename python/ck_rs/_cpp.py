"""The C++ kernels of the hottest ``torch.ops.ck_rs`` ops (``csrc/torch_ops.cpp``), built against
the torch that runs them on first use and cached.

torch's dispatcher reaches a Python kernel at ~2 µs a trip, and a Python kernel exports each
tensor through DLPack before the launch; the C++ kernels describe the tensors themselves and call
the Rust launch directly (``_native.c_api()``). A C++ extension links against one torch build, so
the library is compiled here, once per torch version and source, with the compiler torch's own
extensions use (``$CXX``, else ``c++``), into ``$CK_RS_CACHE`` (default ``~/.cache/ck_rs``); the
first import prints a line while it builds (~10–20 s). Where it cannot be built (no compiler, no
torch headers) the ops keep their Python kernels — the same results, ~5 µs more a call — with a
warning. ``CK_RS_CPP_OPS=0`` skips it."""

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import torch

from . import _native

_SOURCE = os.path.join(os.path.dirname(__file__), "csrc", "torch_ops.cpp")


def _served(source):
    """The ops the library's kernels serve: its ``// OPS:`` line."""
    for line in source.splitlines():
        if line.startswith("// OPS:"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def _cache_dir():
    return os.environ.get("CK_RS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ck_rs"
    )


def _compile(source_path, target, compiler):
    """Compiles the library into ``target`` (atomically: processes started together, such as
    torchrun's, may build it side by side). Returns the compiler's output on failure."""
    root = os.path.dirname(torch.__file__)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(target))
        os.close(fd)
    except OSError as e:
        return f"cannot write the library into {os.path.dirname(target)} ({e}); set CK_RS_CACHE"
    command = [
        compiler,
        "-O2",
        "-std=c++20",  # recent torch headers need it (torch builds its own extensions so)
        "-shared",
        "-fPIC",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        "-I" + os.path.join(root, "include"),
        source_path,
        "-o",
        tmp,
        "-L" + os.path.join(root, "lib"),
        "-Wl,-rpath," + os.path.join(root, "lib"),
        "-lc10",
        "-ltorch_cpu",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as e:
        os.unlink(tmp)
        return str(e)
    if done.returncode != 0:
        os.unlink(tmp)
        return (done.stderr or done.stdout)[-2000:]
    os.replace(tmp, target)
    return None


def load():
    """Builds (once) and loads the library; returns the names of the ops whose CPU and CUDA
    kernels it registered (none where it is switched off or could not be built)."""
    if os.environ.get("CK_RS_CPP_OPS", "1") == "0":
        return frozenset()
    with open(_SOURCE, "rb") as f:
        source = f.read()
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        warnings.warn(
            "ck_rs: no C++ compiler (set CXX): torch.ops.ck_rs.* run their Python kernels, "
            "~5 µs more a call (CK_RS_CPP_OPS=0 skips this check)"
        )
        return frozenset()
    key = hashlib.sha256(
        b"\0".join(
            [source, torch.__version__.encode(), str(torch.version.git_version).encode(), compiler.encode()]
        )
    ).hexdigest()[:16]
    target = os.path.join(_cache_dir(), f"torch_ops-{key}.so")
    if not os.path.exists(target):
        print(
            f"ck_rs: building its C++ torch ops for torch {torch.__version__} (once; cached in "
            f"{os.path.dirname(target)})",
            file=sys.stderr,
            flush=True,
        )
        failure = _compile(_SOURCE, target, compiler)
        if failure is not None:
            warnings.warn(
                "ck_rs: the C++ torch ops did not build, so torch.ops.ck_rs.* run their Python "
                f"kernels (~5 µs more a call; CK_RS_CPP_OPS=0 skips the build). {compiler}:\n{failure}"
            )
            return frozenset()
    try:
        library = ctypes.CDLL(target)
    except OSError as e:
        warnings.warn(
            f"ck_rs: the C++ torch ops in {target} did not load ({e}); torch.ops.ck_rs.* run their "
            "Python kernels (delete the file to rebuild it; CK_RS_CPP_OPS=0 skips it)"
        )
        return frozenset()
    library.ck_rs_torch_ops_init(*(ctypes.c_void_p(a) for a in _native.c_api()))
    torch.ops.load_library(target)
    return _served(source.decode())
