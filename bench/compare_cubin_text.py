#!/usr/bin/env python3
"""Compares the machine code (.text sections) of two cubins: prints `same` or `DIFFERENT`
and each side's instruction count. For showing that a template change leaves a GPU's
kernels byte for byte as they were when the GPU tests last ran (no disassembler needed).

    python3 bench/compare_cubin_text.py old.cubin new.cubin
"""
import sys, struct, hashlib
def text(fn):
    d=open(fn,'rb').read()
    shoff=struct.unpack_from('<Q',d,0x28)[0]; shentsize,shnum,shstrndx=struct.unpack_from('<HHH',d,0x3A)
    secs=[struct.unpack_from('<IIQQQQIIQQ',d,shoff+i*shentsize) for i in range(shnum)]
    stro=secs[shstrndx][4]
    out=b''
    for s in secs:
        e=d.index(b'\0',stro+s[0]); n=d[stro+s[0]:e]
        if n.startswith(b'.text'): out+=d[s[4]:s[4]+s[5]]
    return out
a,b=text(sys.argv[1]),text(sys.argv[2])
print('same' if a==b else 'DIFFERENT', len(a)//16, len(b)//16)
