#!/usr/bin/env python3
"""Which NCCL library answers a program's NCCL calls, found inside the running process.

A library being mapped proves nothing (PyTorch may map two libnccl.so.2 files, and the
version PyTorch prints is the header it was built with). This module reads what the
dynamic loader actually bound:

  1. the GOT slot of a consumer library (libtorch_cuda.so, say) for an NCCL function: the
     address that the consumer's call jumps to, once bound (always after the first call; at
     load time under BIND_NOW);
  2. when the slot is not bound yet, the loader's own lookup order for that consumer: the
     global scope (dlsym(RTLD_DEFAULT)), then the consumer's dependencies (dlsym on its
     handle) -- the order the loader binds it in, DEEPBIND aside;

then dladdr() names the file that holds the address, and that file's ncclGetVersion is
called. `is_weft()` says whether a file is weft's library: its real path's name holds
"weft" (libweft_nccl.so, also behind a libnccl.so.2 link), or it is the file named by
$WEFT_NCCL_EXPECT_LIB.

Usage (self-check, no GPU needed):
  nccl_which.py CONSUMER_SUBSTRING SYMBOL [--expect-weft|--expect-nccl] [--load LIB]
loads LIB (the consumer) with ctypes, calls nothing, and prints what CONSUMER's SYMBOL is
bound to. Exit 0 when the expectation holds, 1 otherwise.
"""
import ctypes
import ctypes.util
import os
import struct
import sys

RTLD_NOLOAD = 4
RTLD_DEFAULT = None


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _libdl():
    # dladdr/dlsym live in libc since glibc 2.34 and in libdl before.
    for name in (None, ctypes.util.find_library("dl")):
        try:
            lib = ctypes.CDLL(name)
            lib.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
            lib.dladdr.restype = ctypes.c_int
            lib.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            lib.dlsym.restype = ctypes.c_void_p
            return lib
        except (OSError, AttributeError):
            continue
    raise OSError("dladdr is not available")


def file_of(addr):
    """The path of the loaded object that holds `addr` (None if none)."""
    if not addr:
        return None
    info = DlInfo()
    if _libdl().dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) == 0 or not info.dli_fname:
        return None
    return info.dli_fname.decode()


def mapped(substring):
    """Path and load start (file offset 0) of the first mapped file whose name holds `substring`."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and substring in os.path.basename(parts[5]) and int(parts[2], 16) == 0:
                return parts[5], int(parts[0].split("-")[0], 16)
    return None, None


def _got_slots(path, symbol):
    """(r_offset, type) of each dynamic relocation of `symbol` in ELF64 file `path`, and the
    vaddr of its first PT_LOAD (to turn a mapping start into the load bias)."""
    with open(path, "rb") as f:
        hdr = f.read(64)
        if hdr[:4] != b"\x7fELF" or hdr[4] != 2 or hdr[5] != 1:
            raise ValueError(f"{path} is not a little-endian ELF64 file")
        phoff, shoff = struct.unpack_from("<QQ", hdr, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", hdr, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
        first_load = None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr = struct.unpack_from("<IIQQ", ph, i * phentsize)
            if p_type == 1 and first_load is None:
                first_load = p_vaddr - p_offset
        f.seek(shoff)
        sh = f.read(shentsize * shnum)
        secs = [struct.unpack_from("<IIQQQQIIQQ", sh, i * shentsize) for i in range(shnum)]

        def read(sec):
            f.seek(sec[4])
            return f.read(sec[5])

        # The dynamic symbol table and its strings.
        dynsym_index = next((i for i, s in enumerate(secs) if s[1] == 11), None)
        if dynsym_index is None:
            return [], first_load or 0
        dynsym = secs[dynsym_index]
        strtab = read(secs[dynsym[6]])
        syms = read(dynsym)
        want = symbol.encode()
        index = None
        for i, (name, *_rest) in enumerate(struct.iter_unpack("<IBBHQQ", syms)):
            if name and strtab[name:name + len(want) + 1] == want + b"\0":
                index = i
                break
        if index is None:
            return [], first_load or 0
        slots = []
        for s in secs:  # SHT_RELA tied to .dynsym
            if s[1] == 4 and s[6] == dynsym_index:
                for off, info, _add in struct.iter_unpack("<QQq", read(s)):
                    if info >> 32 == index:
                        slots.append((off, info & 0xffffffff))
        return slots, first_load or 0


def bound_address(consumer, symbol):
    """Where `consumer` (a substring of a mapped file's name) jumps for `symbol`, and how that
    was found ("got" or "scope"); (None, why) when it cannot be told."""
    path, start = mapped(consumer)
    if path is None:
        return None, f"no mapped file named like {consumer!r}"
    try:
        slots, first_load = _got_slots(path, symbol)
    except (OSError, ValueError) as e:
        slots, first_load = [], 0
        why = str(e)
    else:
        why = f"{path} has no relocation for {symbol}"
    bias = start - first_load
    for off, rtype in slots:
        # R_X86_64_GLOB_DAT (6) and R_X86_64_JUMP_SLOT (7) hold the bound address.
        if rtype not in (6, 7):
            continue
        value = ctypes.c_void_p.from_address(bias + off).value
        where = file_of(value)
        if where and os.path.realpath(where) != os.path.realpath(path):
            return value, "got"
        why = f"{path}'s slot for {symbol} is not bound yet"
    # The loader's order for a non-DEEPBIND object: global scope, then its own dependencies.
    dl = _libdl()
    addr = dl.dlsym(RTLD_DEFAULT, symbol.encode())
    if addr:
        return addr, "scope"
    try:
        handle = ctypes.CDLL(path, mode=RTLD_NOLOAD)._handle
        addr = dl.dlsym(ctypes.c_void_p(handle), symbol.encode())
    except OSError:
        addr = None
    if addr:
        return addr, "scope"
    return None, why


def version_of(path):
    """ncclGetVersion() of the loaded library at `path` (None if it has none)."""
    try:
        lib = ctypes.CDLL(path, mode=RTLD_NOLOAD)
        v = ctypes.c_int(0)
        return v.value if lib.ncclGetVersion(ctypes.byref(v)) == 0 else None
    except (OSError, AttributeError):
        return None


def is_weft(path):
    if not path:
        return False
    real = os.path.realpath(path)
    expect = os.environ.get("WEFT_NCCL_EXPECT_LIB", "")
    if expect and os.path.exists(expect) and os.path.realpath(expect) == real:
        return True
    return "weft" in os.path.basename(real)


def answering(consumer, symbol):
    """A dict: the file that answers `consumer`'s `symbol`, its real path, its ncclGetVersion,
    whether it is weft's, and how it was found."""
    addr, how = bound_address(consumer, symbol)
    path = file_of(addr) if addr else None
    return {"symbol": symbol, "consumer": consumer, "how": how if addr else "unknown",
            "why": None if addr else how, "library": path,
            "real_path": os.path.realpath(path) if path else None,
            "version": version_of(path) if path else None, "is_weft": is_weft(path)}


def verdict(info, expect):
    """None when `info` meets `expect` ("--expect-weft" / "--expect-nccl" / ""), else why not."""
    if expect == "--expect-weft":
        if not info["is_weft"]:
            return f"{info['consumer']}'s {info['symbol']} is answered by {info['real_path'] or 'nothing found'}" \
                   f" (version {info['version']}), not by weft's library ({info['why'] or info['how']})"
        if info["version"] != 22800:
            return f"weft's library answered ncclGetVersion with {info['version']}, not 22800"
    if expect == "--expect-nccl":
        if info["library"] is None:
            return f"no library answers {info['consumer']}'s {info['symbol']} ({info['why']})"
        if info["is_weft"]:
            return f"{info['consumer']}'s {info['symbol']} is answered by weft's library {info['real_path']}" \
                   " in the NCCL run"
    return None


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    consumer, symbol = argv[1], argv[2]
    expect = next((a for a in argv[3:] if a.startswith("--expect-")), "")
    if "--load" in argv:
        ctypes.CDLL(argv[argv.index("--load") + 1])
    info = answering(consumer, symbol)
    why = verdict(info, expect)
    print(f"nccl_which: {consumer} {symbol} -> {info['real_path']} (version {info['version']}, "
          f"{'weft' if info['is_weft'] else 'not weft'}, found by {info['how']})"
          + (f"; FAIL: {why}" if why else ""))
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
