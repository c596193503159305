#!/usr/bin/env python3
"""Crude native stacks of a live process where there is no gdb (test/device/one.sh): for each thread
(or the TIDs given), its pc and the words of its stack that point into executable mappings, as
library+offset and the nearest dynamic symbol at or below it. Scanning is not unwinding: stale
return addresses show up too; the first lines of each thread are the trustworthy ones.
usage: stack.py PID [TID...]"""
import bisect, os, struct, sys

def dynsyms(path, cache={}):
    if path in cache: return cache[path]
    out = ([], [])
    try:
        with open(path, "rb") as f: data = f.read()
        if data[:4] == b"\x7fELF" and data[4] == 2:
            shoff, = struct.unpack_from("<Q", data, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
            secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
            syms = []
            for s in secs:
                if s[1] in (2, 11):  # SYMTAB, DYNSYM
                    strtab = secs[s[6]]
                    for j in range(s[5] // 24):
                        name, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", data, s[4] + j * 24)
                        if value and (info & 0xF) == 2:
                            end = data.index(b"\0", strtab[4] + name)
                            syms.append((value, data[strtab[4] + name:end].decode(errors="replace")))
            syms.sort()
            out = ([v for v, _ in syms], [n for _, n in syms])
    except Exception:
        pass
    cache[path] = out
    return out

def main():
    pid = int(sys.argv[1])
    maps = []
    for line in open(f"/proc/{pid}/maps"):
        p = line.split()
        lo, hi = (int(x, 16) for x in p[0].split("-"))
        if len(p) >= 6 and p[5].startswith("/"):
            maps.append((lo, hi, p[1], int(p[2], 16), p[5]))
    base = {}
    for lo, hi, perm, off, path in maps:
        if path not in base:
            try:
                with open(path, "rb") as f: etype = struct.unpack_from("<H", f.read(18), 16)[0]
            except OSError:
                etype = 3
            base[path] = lo - off if etype == 3 else 0  # ET_DYN is relocated, ET_EXEC is not
    exe = [(lo, hi, path) for lo, hi, perm, off, path in maps if "x" in perm]
    def name(addr):
        for lo, hi, path in exe:
            if lo <= addr < hi:
                rel = addr - base[path]
                vals, names = dynsyms(path)
                i = bisect.bisect_right(vals, rel) - 1
                sym = f" {names[i]}+0x{rel - vals[i]:x}" if i >= 0 and rel - vals[i] < 1 << 20 else ""
                return f"{os.path.basename(path)}+0x{rel:x}{sym}"
        return None
    tids = sys.argv[2:] or sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    mem = open(f"/proc/{pid}/mem", "rb")
    for tid in tids:
        comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        sc = open(f"/proc/{pid}/task/{tid}/syscall").read().split()
        if len(sc) < 9:
            print(f"-- {tid} {comm}: running ({' '.join(sc)})"); continue
        sp, pc = int(sc[-2], 16), int(sc[-1], 16)
        print(f"-- {tid} {comm}: syscall {sc[0]} pc {name(pc)}")
        stack = b""
        for page in range(sp & ~0xFFF, (sp & ~0xFFF) + 64 * 1024, 4096):
            try:
                mem.seek(page); stack += mem.read(4096)
            except OSError as e:
                if not stack: print(f"   (stack unreadable: {e})")
                break
        stack = stack[sp & 0xFFF:]
        last, n = None, 0
        for i in range(0, len(stack) - 7, 8):
            w, = struct.unpack_from("<Q", stack, i)
            s = name(w)
            if s and s != last:
                print(f"   {s}"); last = s; n += 1
                if n >= 28: break

main()
