"""Read a running process's seccomp filters (PTRACE_SECCOMP_GET_FILTER, as
root) and run them on a system call, as the kernel would: enough classic
BPF for what libseccomp and gVisor emit (loads from seccomp_data and the
scratch memory, ALU, jumps, returns)."""
import ctypes
import os
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long
PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH = 0x4206, 0x4207, 17
PTRACE_SECCOMP_GET_FILTER = 0x420c
AUDIT_ARCH_X86_64 = 0xC000003E
SECCOMP_RET_ACTION_FULL = 0xFFFF0000
SECCOMP_RET_ALLOW = 0x7FFF0000


def _ptrace(req, pid, addr, data):
    r = _libc.ptrace(req, pid, addr, data)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, "ptrace(%#x, %d): %s" % (req, pid, os.strerror(e)))
    return r


def filters(pid):
    """The programs attached to thread pid, the newest first, each a list
    of (code, jt, jf, k)."""
    _ptrace(PTRACE_SEIZE, pid, None, None)
    try:
        _ptrace(PTRACE_INTERRUPT, pid, None, None)
        os.waitpid(pid, 0x40000000)  # __WALL: the thread's group-stop
        progs = []
        for i in range(64):
            n = _libc.ptrace(PTRACE_SECCOMP_GET_FILTER, pid, ctypes.c_void_p(i), None)
            if n <= 0:
                break
            buf = ctypes.create_string_buffer(8 * n)
            _ptrace(PTRACE_SECCOMP_GET_FILTER, pid, ctypes.c_void_p(i), buf)
            progs.append([struct.unpack_from("<HBBI", buf.raw, 8 * j) for j in range(n)])
        return progs
    finally:
        _libc.ptrace(PTRACE_DETACH, pid, None, None)


def _run(prog, data):
    a = x = 0
    mem = [0] * 16
    pc = 0
    m32 = 0xFFFFFFFF
    while pc < len(prog):
        code, jt, jf, k = prog[pc]
        pc += 1
        cls = code & 0x07
        if cls == 0x00:  # LD
            mode = code & 0xE0
            if mode == 0x20:  # ABS, word
                a = struct.unpack_from("<I", data, k)[0]
            elif mode == 0x00:  # IMM
                a = k
            elif mode == 0x60:  # MEM
                a = mem[k]
            elif mode == 0x80:  # LEN
                a = len(data)
            else:
                raise ValueError("unsupported ld %#x" % code)
        elif cls == 0x01:  # LDX
            mode = code & 0xE0
            x = k if mode == 0x00 else mem[k] if mode == 0x60 else len(data) if mode == 0x80 \
                else None
            if x is None:
                raise ValueError("unsupported ldx %#x" % code)
        elif cls == 0x02:
            mem[k] = a
        elif cls == 0x03:
            mem[k] = x
        elif cls == 0x04:  # ALU
            op, src = code & 0xF0, (x if code & 0x08 else k)
            ops = {0x00: lambda: a + src, 0x10: lambda: a - src, 0x20: lambda: a * src,
                   0x30: lambda: a // src, 0x40: lambda: a | src, 0x50: lambda: a & src,
                   0x60: lambda: a << src, 0x70: lambda: a >> src, 0x80: lambda: -a,
                   0x90: lambda: a % src, 0xA0: lambda: a ^ src}
            a = ops[op]() & m32
        elif cls == 0x05:  # JMP
            op, src = code & 0xF0, (x if code & 0x08 else k)
            if op == 0x00:
                pc += k
                continue
            taken = {0x10: a == src, 0x20: a > src, 0x30: a >= src, 0x40: (a & src) != 0}[op]
            pc += jt if taken else jf
        elif cls == 0x06:  # RET
            return a if code & 0x18 == 0x10 else k
        elif cls == 0x07:  # MISC
            if code & 0xF8 == 0x00:
                x = a
            else:
                a = x
    raise ValueError("the program ran off its end")


def action(progs, nr, args=(0, 0, 0, 0, 0, 0), ip=0, arch=AUDIT_ARCH_X86_64):
    """What the filters return for this call: every program runs, the most
    restrictive action wins (a lower value, as the kernel ranks them)."""
    args = list(args) + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, ip, *args)
    rets = [_run(p, data) for p in progs]
    return min(rets, key=lambda r: ctypes.c_int32(r & SECCOMP_RET_ACTION_FULL).value)


def allowed(progs, nr, args=(0, 0, 0, 0, 0, 0)):
    return action(progs, nr, args) & SECCOMP_RET_ACTION_FULL == SECCOMP_RET_ALLOW
