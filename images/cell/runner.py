"""runner.py: the in-sandbox side of runner protocol v1.

Runs inside the cell sandbox as `python3.11 -I -S -B /runner.py`, Python
standard library only. docs/runner-protocol.md is the reference for every
message, field and rule used here; the caps below mirror pkg/base/limits.h.

Life of a runner:
  1. move the protocol to private descriptors and point 0, 1, 2 at /dev/null,
     so nothing the code writes to a descriptor (os.write(1, ...), a child
     process) can look like a protocol line;
  2. import what every cell needs, say {"t":"ready","v":1}, block for one
     `cell` line; a pooled runner (started as `/runner.py --pooled`) first
     imports asyncio and warms up, so that `ready` means warm; a cold one
     imports asyncio only when its code awaits or names asyncio (the import
     costs about 0.24 s under gVisor). Before its cell, a runner answers
     each `wake` line with reseeded generators and a new `ready`: the host
     sends it to a sandbox restored from a checkpoint of a pooled one;
  3. run the code (top-level await allowed); tool functions send `call`
     lines and an asyncio reader matches `result` lines to them by id;
  4. say {"t":"done",...} with the traceback tail or the final expression's
     value, and exit at once so nothing can follow `done`.

The private descriptors are not a security boundary (the code shares this
interpreter and can write to them); the host treats every line as hostile.
They only keep ordinary programs from tripping a protocol violation by
accident, as do the value-safety rules in _plain().
"""

import ast
import builtins
import ctypes
import fcntl
import io
import itertools
import json
import keyword
import linecache
import math
import os
import re
import resource
import stat
import sys
import threading
import time
import traceback
import types
import warnings

asyncio = None  # imported by _need_asyncio(), only when a cell needs it

PROTOCOL_VERSION = 1

LINE_MAX = 128 * 1024            # APPL_RUNNER_LINE_MAX: one runner->host line
HOST_LINE_MAX = 4 * 1024 * 1024  # APPL_RUNNER_HOST_LINE_MAX: one host->runner line
RESULT_MAX = 64 * 1024           # APPL_CELL_RESULT_MAX: encoded result value
TRACEBACK_KEEP = 2048            # APPL_TRACEBACK_KEEP: characters of done.error
VALUE_DEPTH_MAX = 32             # APPL_RUNNER_VALUE_DEPTH_MAX: nesting of a value
TOOL_NAME_MAX = 256              # APPL_RUNNER_TOOL_NAME_MAX: bytes of call.tool
URI_MAX = 4096                   # APPL_RUNNER_URI_MAX: bytes of read.uri
OUT_CHUNK = 4096                 # characters per `out` message
OUT_FLUSH_S = 0.05               # output older than this is sent at the next chance
READ_BLOCK = 64 * 1024           # bytes per read() of the host pipe
OUT_DIR = "/out"                 # the cell's files for the host (a tmpfs of its own)
FILE_CHUNK = 48 * 1024           # APPL_RUNNER_FILE_CHUNK_MAX: raw bytes per `file` line
FILE_NAME_MAX = 1024             # APPL_RUNNER_FILE_NAME_MAX: bytes of a name sent
FILE_ENTRIES_MAX = 128           # APPL_RUNNER_FILE_ENTRIES_MAX: entries of /out looked at
FILES_COUNT_CEIL = 64            # APPL_FILES_MAX_COUNT_CEIL: limits.files.max_count
FILES_BYTES_CEIL = 5 * 1024 * 1024  # APPL_FILES_MAX_BYTES_CEIL: limits.files.max_bytes
FILES_TOTAL_CEIL = 5 * 1024 * 1024  # APPL_FILES_MAX_TOTAL_BYTES_CEIL: .max_total_bytes
EMPTY_BATCH = 1024               # names of a directory taken at once while emptying /out

INT_MIN = -(1 << 63)             # jansson's json_int_t is a signed 64-bit integer
INT_MAX = (1 << 63) - 1
INT_STR_DIGITS = 4300            # Python's default int->str conversion limit

CELL_FILE = "<cell>"
CELL_FILES_KEPT = 16             # a session keeps the source of its last cells for tracebacks
POOLED_ARG = "--pooled"  # argv[1] of a pooled runner: warm up before `ready`
PRELOAD_ARG = "--preload="  # argv[2] of a pooled runner, if any: modules to import first
FAIL_ERROR_MAX = 1024            # characters of a `fail` line's error
SITE_DIR = "/usr/lib/python3/dist-packages"  # Debian's own modules (the data image's)
MPL_CACHE = "/usr/lib/appliance/matplotlib"  # matplotlib's font list, made when the image was
MPL_CONFIG = "/tmp/matplotlib"   # matplotlib's config and cache directory in a cell
RESULT_NAME = "__cell_value__"
CELL_FIELDS = frozenset(["t", "code", "tools", "files", "args", "keep"])
EXIT_HOST_GONE = 3               # exit status when the host pipe is closed or broken
RUNNER_FILE = os.path.abspath(__file__)
CO_COROUTINE = 0x0080            # inspect.CO_COROUTINE, without importing inspect

# Names a tool namespace may not take: they would hide what the code relies on
# (the builtins, also those `site` adds, which -S leaves out; the `tools` helper;
# a code tool's `args`).
RESERVED = (frozenset(["ToolError", "asyncio", "tools", "args", RESULT_NAME, "exit", "quit",
                       "help", "copyright", "credits", "license"]) | frozenset(dir(builtins)))


ERROR_KINDS = ("refused", "error", "timeout", "unavailable", "declined")
READ_FN = "read_resource"        # every namespace's resource reader; no tool takes the name
SUGGEST_MAX = 5                  # tools a missing tool's message names


class ToolError(Exception):
    """A tool call was refused or failed. str(e) says why; e.kind is what
    happened: "refused" (the gateway said no: policy, schema, limits),
    "error" (the tool or its server failed), "timeout", "unavailable" (the
    server is not there) or "declined" (the approval it needed was not
    given). e.tool is the name the code called ("files.read_file"),
    e.mcp_tool the tool's MCP name ("files.read_file" or "everything.get-sum")."""

    def __init__(self, message, kind="error", tool=None, mcp_tool=None):
        super().__init__(message)
        self.kind = kind
        self.tool = tool
        self.mcp_tool = mcp_tool


ToolError.__module__ = "builtins"  # tracebacks print "ToolError: ..." unqualified


class _Fatal(Exception):
    """The runner itself cannot go on (a bad host message)."""


# ---- value safety -----------------------------------------------------------
# Strict JSON (jansson on the host) cannot carry NaN, infinities, integers
# outside 64 bits, lone surrogates or U+0000, and refuses duplicate keys and
# deep nesting. Every value sent is first made "plain": only dict (str keys),
# list, str, int, float, bool and None, with the rules below.

_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


class _Unsupported(Exception):
    """A value strict JSON has no form for (a set, an object, too deep)."""


def _safe_str(s):
    # U+0000 and lone surrogates become U+FFFD: jansson refuses both.
    return _BAD_CHARS.sub("\ufffd", s)


def _big_int(v):
    # Beyond 64 bits an integer travels as its decimal string; past Python's
    # conversion limit (which exists to stop quadratic str()) as hexadecimal.
    if v.bit_length() < INT_STR_DIGITS * 3:
        return str(v)
    return hex(v)


def _nonfinite(v):
    # The names Python's own json module writes and reads for these floats.
    if math.isnan(v):
        return "NaN"
    return "Infinity" if v > 0 else "-Infinity"


def _plain_key(k):
    if type(k) is str:
        return _safe_str(k)
    if k is None or k is True or k is False:
        return json.dumps(k)  # as json.dumps does: null, true, false
    if isinstance(k, str):
        return _safe_str(str.__str__(k))
    if isinstance(k, int):
        k = int.__int__(k)
        return str(k) if k.bit_length() < INT_STR_DIGITS * 3 else hex(k)
    if isinstance(k, float):
        k = float.__float__(k)
        return float.__repr__(k) if math.isfinite(k) else _nonfinite(k)
    raise _Unsupported("dict key of type %s" % type(k).__name__)


def _plain_dict(items, depth):
    out = {}
    for k, v in items:
        key = _plain_key(k)
        if key in out:
            # {1: a, "1": b} would be a duplicate key on the wire, which the
            # host refuses: the later key gets a suffix instead.
            n = 2
            while "%s~%d" % (key, n) in out:
                n += 1
            key = "%s~%d" % (key, n)
        out[key] = _plain(v, depth)
    return out


def _plain(v, depth=0):
    """Return v as plain JSON data, or raise _Unsupported."""
    t = type(v)
    if v is None or v is True or v is False:
        return v
    if t is str:
        return _safe_str(v)
    if t is int:
        return v if INT_MIN <= v <= INT_MAX else _big_int(v)
    if t is float:
        return v if math.isfinite(v) else _nonfinite(v)
    if depth >= VALUE_DEPTH_MAX:
        # Also what ends a value that contains itself.
        raise _Unsupported("nested deeper than %d levels" % VALUE_DEPTH_MAX)
    if t is dict:
        return _plain_dict(v.items(), depth + 1)
    if t is list or t is tuple:
        return [_plain(x, depth + 1) for x in v]
    # Subclasses (IntEnum, OrderedDict, namedtuple...) go through the base
    # type's own methods, so an overridden __str__ or __iter__ is not used.
    if isinstance(v, str):
        return _safe_str(str.__str__(v))
    if isinstance(v, int):
        return _plain(int.__int__(v), depth)
    if isinstance(v, float):
        return _plain(float.__float__(v), depth)
    if isinstance(v, dict):
        return _plain_dict(dict.items(v), depth + 1)
    if isinstance(v, list):
        return [_plain(x, depth + 1) for x in list.__iter__(v)]
    if isinstance(v, tuple):
        return [_plain(x, depth + 1) for x in tuple.__iter__(v)]
    raise _Unsupported("%s is not JSON" % t.__name__)


def _dumps(obj):
    """Encode plain data as one compact UTF-8 line (no newline)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, check_circular=False,
                      separators=(",", ":"))
    return text.encode("utf-8")


def _cut(text, cap, what):
    """text as a str whose JSON encoding fits in cap bytes, marked when cut."""
    text = _safe_str(text)
    if len(_dumps(text)) <= cap:
        return text
    mark = "... [%s cut, %d characters]" % (what, len(text))
    keep = min(len(text), cap)  # every character takes at least one byte
    while True:
        # Escapes make the encoding up to 6 bytes per character: shrink by
        # the measured ratio until it fits.
        keep = max(0, min(keep - 1, (keep * (cap - 64)) // max(1, len(_dumps(text[:keep])))))
        head = text[:keep] + mark
        if len(_dumps(head)) <= cap or keep == 0:
            return head


def _result_value(v):
    """The cell's value as sent in done.result (see docs, value safety)."""
    try:
        plain = _plain(v)
        text = _dumps(plain)
        if len(text) <= RESULT_MAX:
            return plain
        return _cut(text.decode("utf-8"), RESULT_MAX, "result")
    except (_Unsupported, RecursionError, ValueError):
        pass
    try:
        text = repr(v)
    except BaseException as e:  # a hostile __repr__ must not lose the done line
        text = "<%s object; repr() failed: %s>" % (type(v).__name__, type(e).__name__)
    return _cut(text, RESULT_MAX, "repr")


# ---- tracebacks ---------------------------------------------------------------

def _is_cell_file(name):
    return name == CELL_FILE or (name.startswith("<cell ") and name.endswith(">"))


def _strip_runner_frames(te, seen):
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    stack = [f for f in te.stack if f.filename != RUNNER_FILE]
    # Frames before the cell's first are how the runner got there (its event
    # loop's run_until_complete): noise to the reader.
    first = next((i for i, f in enumerate(stack) if _is_cell_file(f.filename)), 0)
    te.stack[:] = stack[first:]
    _strip_runner_frames(te.__cause__, seen)
    _strip_runner_frames(te.__context__, seen)
    for sub in getattr(te, "exceptions", None) or ():
        _strip_runner_frames(sub, seen)


def _traceback_tail(exc):
    """The last lines of exc's traceback, at most TRACEBACK_KEEP characters."""
    try:
        return _format_tail(exc)
    except BaseException:  # out of memory while formatting: the name still fits
        return "%s (traceback could not be formatted)" % type(exc).__name__


def _format_tail(exc):
    te = traceback.TracebackException.from_exception(exc)
    _strip_runner_frames(te, set())
    lines = _safe_str("".join(te.format())).splitlines()
    if not lines:
        return type(exc).__name__
    kept, used = [], 0
    marker = "[...]"
    for line in reversed(lines):
        if used + len(line) + 1 + len(marker) + 1 > TRACEBACK_KEEP:
            break
        kept.append(line)
        used += len(line) + 1
    if not kept:
        return lines[-1][:TRACEBACK_KEEP]  # one huge message: keep its start
    if len(kept) < len(lines):
        kept.append(marker)
    return "\n".join(reversed(kept))


# ---- the protocol channel -------------------------------------------------------

class _Channel:
    """Both protocol directions over the private descriptors."""

    def __init__(self, rfd, wfd):
        self.rfd = rfd
        self.wfd = wfd
        self.inbuf = bytearray()
        self.closed = False          # set by done: nothing may follow it
        self.between = False         # a session's runner between cells: output waits
        self.next_id = 0
        self.pending = {}            # call id -> (future, qualname, tool), for calls in flight
        self.reader_loop = None
        self.main_thread = threading.get_ident()
        self.out_parts = []
        self.out_len = 0
        self.out_since = 0.0
        self.files = None            # the cell's limits.files: (count, bytes, total)
        # Threads the code starts may print while the main thread sends: one
        # lock keeps lines whole and keeps everything before `done`.
        self.lock = threading.RLock()

    # -- writing
    def send_line(self, line):
        self.send_lines([line])

    def send_lines(self, lines):
        """Write lines (bytes, no newlines) with one system call when the
        pipe takes them: each costs far more under gVisor than on a host."""
        view = memoryview(b"".join(line + b"\n" for line in lines))
        with self.lock:
            if self.closed:
                return
            try:
                while view:
                    n = os.write(self.wfd, view)
                    view = view[n:]
            except OSError:
                os._exit(EXIT_HOST_GONE)  # nobody is left to tell

    def send(self, obj):
        self.send_line(_dumps(obj))

    # -- output
    def out_write(self, s):
        if not s:
            return
        with self.lock:
            if self.closed:
                return
            now = time.monotonic()
            if not self.out_parts:
                self.out_since = now
            self.out_parts.append(s)
            self.out_len += len(s)
            if self.out_len >= OUT_CHUNK or now - self.out_since >= OUT_FLUSH_S:
                self.out_flush()

    def out_flusher_start(self):
        """Send output that waited OUT_FLUSH_S even while the code blocks
        (time.sleep, a busy loop): what it printed before it is stopped at
        the deadline must already be with the host. The thread is made
        before `ready` (a new thread costs milliseconds under gVisor) and
        sleeps on an event, using no CPU, until out_flusher_go."""
        go = self.flusher_go = threading.Event()

        def flusher():
            go.wait()
            while not self.closed:
                time.sleep(OUT_FLUSH_S)
                with self.lock:
                    if self.out_parts and time.monotonic() - self.out_since >= OUT_FLUSH_S:
                        self.out_flush()
        old = threading.stack_size(256 * 1024)  # counts against RLIMIT_AS
        try:
            threading.Thread(target=flusher, name="appliance-out", daemon=True).start()
        finally:
            threading.stack_size(old)

    def out_flusher_go(self):
        self.flusher_go.set()

    def out_flush(self, then=None):
        """Send what was printed, then the message then (if any), in one
        write."""
        with self.lock:
            lines = []
            if self.between and then is None:
                return  # a thread printing between a session's cells: sent with the next
            if self.out_parts:
                text = "".join(self.out_parts)
                self.out_parts = []
                self.out_len = 0
                # 4096 characters escape to at most 24 KiB: far below LINE_MAX.
                for i in range(0, len(text), OUT_CHUNK):
                    lines.append(_dumps({"t": "out",
                                         "data": _safe_str(text[i:i + OUT_CHUNK])}))
            if then is not None:
                lines.append(_dumps(then))
            if lines:
                self.send_lines(lines)

    # -- reading
    def read_line(self):
        """Block for one host line (bytes, no newline); None at EOF."""
        while True:
            i = self.inbuf.find(b"\n")
            if i >= 0:
                line = bytes(self.inbuf[:i])
                del self.inbuf[:i + 1]
                return line
            if len(self.inbuf) > HOST_LINE_MAX:
                raise _Fatal("host line longer than %d bytes" % HOST_LINE_MAX)
            chunk = os.read(self.rfd, READ_BLOCK)
            if not chunk:
                return None
            self.inbuf += chunk

    def _on_readable(self):
        try:
            chunk = os.read(self.rfd, READ_BLOCK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            os._exit(EXIT_HOST_GONE)
        if not chunk:
            os._exit(EXIT_HOST_GONE)  # the host hung up: the run is over
        self.inbuf += chunk
        try:
            while True:
                i = self.inbuf.find(b"\n")
                if i < 0:
                    break
                line = bytes(self.inbuf[:i])
                del self.inbuf[:i + 1]
                self._on_result(line)
            if len(self.inbuf) > HOST_LINE_MAX:
                raise _Fatal("host line longer than %d bytes" % HOST_LINE_MAX)
        except _Fatal as e:
            _finish(self, "runner: host protocol error: %s" % e, None)

    def _on_result(self, line):
        try:
            msg = json.loads(line.decode("utf-8"))
        except ValueError as e:
            raise _Fatal("result line is not JSON: %s" % e) from None
        if type(msg) is not dict or msg.get("t") != "result":
            raise _Fatal("expected a result message")
        cid = msg.get("id")
        keys = set(msg)
        if keys not in ({"t", "id", "ok"}, {"t", "id", "error", "kind"}):
            raise _Fatal("result fields %s" % sorted(keys))
        if type(cid) is not int or not 0 < cid <= self.next_id:
            raise _Fatal("result for unknown call id %r" % (cid,))
        if "ok" not in msg and (type(msg["error"]) is not str or msg["kind"] not in ERROR_KINDS):
            raise _Fatal("result error is not a string, or its kind is unknown")
        fut, qualname, tool = self.pending.pop(cid, (None, None, None))
        if fut is None or fut.done():
            return  # the awaiting code went away (cancelled, loop closed)
        if "ok" in msg:
            fut.set_result(msg["ok"])
        else:
            fut.set_exception(ToolError(msg["error"], msg["kind"], qualname, tool))

    def _attach(self, loop):
        # The reader lives on whichever loop is calling: the runner's own, or
        # one the code made with asyncio.run(). A closed loop drops its reader.
        if self.reader_loop is loop:
            return
        old = self.reader_loop
        if old is not None and not old.is_closed():
            old.remove_reader(self.rfd)
        loop.add_reader(self.rfd, self._on_readable)
        self.reader_loop = loop

    async def call(self, tool, qualname, kwargs):
        if threading.get_ident() != self.main_thread:
            raise RuntimeError("%s(): tools can only be called from the main thread" % qualname)
        try:
            args = _plain(kwargs)
        except (_Unsupported, RecursionError) as e:
            raise TypeError("%s(): arguments are not JSON: %s" % (qualname, e)) from None
        self.next_id += 1
        line = _dumps({"t": "call", "id": self.next_id, "tool": tool, "args": args})
        if len(line) + 1 > LINE_MAX:
            raise ToolError("refused: %s: arguments too large: %d bytes encoded, the line cap "
                            "is %d" % (qualname, len(line), LINE_MAX), "refused", qualname, tool)
        return await self._ask(line, qualname, tool)

    async def read(self, server, qualname, uri):
        if threading.get_ident() != self.main_thread:
            raise RuntimeError("%s(): resources can only be read from the main thread"
                               % qualname)
        if not isinstance(uri, str):
            raise TypeError("%s() takes the resource's URI as a str, not %s"
                            % (qualname, type(uri).__name__))
        uri = _safe_str(str.__str__(uri))
        if not 0 < len(uri.encode("utf-8")) <= URI_MAX:
            raise ToolError("refused: %s: a URI is 1 to %d bytes" % (qualname, URI_MAX),
                            "refused", qualname, server)
        self.next_id += 1
        line = _dumps({"t": "read", "id": self.next_id, "server": server, "uri": uri})
        return _contents(await self._ask(line, qualname, server))

    async def _ask(self, line, qualname, tool):
        loop = _need_asyncio().get_running_loop()
        cid = self.next_id
        self._attach(loop)
        fut = loop.create_future()
        self.pending[cid] = (fut, qualname, tool)
        self.out_flush()  # output printed before the call arrives before it
        self.send_line(line)
        try:
            return await fut
        finally:
            self.pending.pop(cid, None)


def _contents(value):
    """A read's answer as the code gets it: each content's text as a str,
    its blob as bytes; one content alone, several as a list."""
    import binascii
    bad = ToolError("error: the host sent a read result of the wrong shape")
    if type(value) is not list or not value:
        raise bad
    out = []
    for c in value:
        if type(c) is dict and set(c) == {"text"} and type(c["text"]) is str:
            out.append(c["text"])
        elif type(c) is dict and set(c) == {"blob"} and type(c["blob"]) is str:
            try:
                out.append(binascii.a2b_base64(c["blob"], strict_mode=True))
            except binascii.Error:
                raise bad from None
        else:
            raise bad
    return out[0] if len(out) == 1 else out


class _OutBuffer:
    """sys.stdout.buffer: bytes are decoded as UTF-8 (bad bytes replaced)."""

    def __init__(self, chan):
        self._chan = chan

    def write(self, b):
        data = bytes(b)
        self._chan.out_write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self):
        self._chan.out_flush()


class _Out(io.TextIOBase):
    """sys.stdout and sys.stderr: text becomes `out` messages."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, chan, name):
        super().__init__()
        self._chan = chan
        self._name = name
        self.buffer = _OutBuffer(chan)

    @property
    def name(self):
        return self._name

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        self._chan.out_write(str.__str__(s))
        return len(s)

    def flush(self):
        self._chan.out_flush()

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        raise io.UnsupportedOperation("%s has no file descriptor in a cell" % self._name)


# ---- start ----------------------------------------------------------------------

def _malloc_setup():
    """glibc's malloc, as a sandbox wants it. One arena for all threads:
    each new thread's would reserve 64 MiB of address space, all of it
    counted against RLIMIT_AS (the cell's memory limit), so the runner's
    output thread and every thread the code starts would each eat a
    quarter of a 256 MiB budget. And blocks up to 32 MiB from the heap,
    kept there once freed (up to 128 MiB): by default glibc maps each large
    block afresh and unmaps it when freed, and under gVisor every first
    touch of fresh memory is a fault the Sentry serves, which made a
    pandas groupby five times slower than on the host. A session's runner
    gives the kept memory back after each cell (_malloc_trim)."""
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(M_ARENA_MAX, 1)
        libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 128 << 20)
    except (OSError, AttributeError):
        pass


def _malloc_trim():
    """Free heap memory back to the sandbox's kernel: what a session holds
    between cells is what its code keeps, not what malloc kept for reuse."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _private_fds():
    """Move the protocol from fds 0 and 1 to two high, close-on-exec fds."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    top = 1024 if soft == resource.RLIM_INFINITY else min(soft, 1024)
    base = max(3, top - 2)  # F_DUPFD takes the lowest free fd >= base
    rfd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, base)
    wfd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, base)
    try:
        null = os.open("/dev/null", os.O_RDWR)
    except OSError:
        # No /dev/null: an empty pipe reads EOF and refuses writes.
        null, w = os.pipe()
        os.close(w)
    for fd in (0, 1, 2):
        if null != fd:
            os.dup2(null, fd)
    if null > 2:
        os.close(null)
    return rfd, wfd


def _check_py_name(i, what, name):
    if (type(name) is not str or not name.isascii() or not name.isidentifier()
            or keyword.iskeyword(name) or name.startswith("__")):
        raise _Fatal("tools[%d].%s: not a Python name" % (i, what))


def _check_tools(tools):
    """Validate the cell's tools list; returns [(tool, ns, fn, doc, off)],
    where off is None for a tool offered and the reason for a stand-in, and
    a server with no tools listed is (server, ns, None, None, None)."""
    if type(tools) is not list:
        raise _Fatal("tools is not a list")
    seen, out = set(), []
    for i, t in enumerate(tools):
        if type(t) is dict and set(t) == {"server", "ns"}:
            server, ns = t["server"], t["ns"]
            _check_py_name(i, "ns", ns)
            if type(server) is not str or not 0 < len(server) <= TOOL_NAME_MAX:
                raise _Fatal("tools[%d].server: not a name" % i)
            if ns in RESERVED or any(ns == s[0] for s in seen):
                raise _Fatal("tools[%d].ns: %s is reserved or taken" % (i, ns))
            seen.add((ns, None))
            out.append((server, ns, None, None, None))
            continue
        if (type(t) is not dict
                or not {"tool", "ns", "fn"} <= set(t) <= {"tool", "ns", "fn", "doc", "off"}):
            raise _Fatal("tools[%d]: fields must be tool, ns, fn and optional doc, off" % i)
        tool, ns, fn, doc, off = t["tool"], t["ns"], t["fn"], t.get("doc", ""), t.get("off")
        if type(tool) is not str or not 0 < len(tool.encode("utf-8", "replace")) <= TOOL_NAME_MAX:
            raise _Fatal("tools[%d].tool: not a name" % i)
        for what, name in (("ns", ns), ("fn", fn)):
            _check_py_name(i, what, name)
        if ns in RESERVED or fn == READ_FN or "." not in tool:
            raise _Fatal("tools[%d]: %s.%s is reserved, or the tool names no server"
                         % (i, ns, fn))
        if (type(doc) is not str or (off is not None and type(off) is not str)
                or (ns, fn) in seen or (ns, None) in seen):
            raise _Fatal("tools[%d]: bad doc or off, or duplicate %s.%s" % (i, ns, fn))
        seen.add((ns, fn))
        out.append((tool, ns, fn, doc, off))
    return out


class ToolNamespace:
    """One upstream server's tools, as attributes: `await toy.add(a=1)`;
    and its resources: `await toy.read_resource(uri)`."""

    def __init__(self, name, chan, server):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_chan", chan)
        object.__setattr__(self, "_server", server)

    async def read_resource(self, uri):
        """The resource at uri (a str): its text as a str, or its bytes;
        a list of them when the server sends several contents. Allowed
        only where the policy lets this server's resources be read; else
        ToolError (kind "refused")."""
        return await self._chan.read(self._server, "%s.%s" % (self._name, READ_FN), uri)

    def __getattr__(self, fn):
        # Only for a name the namespace does not have: say which it has.
        if fn.startswith("_"):
            raise AttributeError(fn)
        raise AttributeError(_no_such_tool(self._name, fn, self._fns()))

    def _fns(self):
        return sorted(k for k in vars(self) if not k.startswith("_"))

    def __repr__(self):
        return "<tools %s: %s>" % (self._name, ", ".join(self._fns()))


def _no_such_tool(ns, fn, fns):
    """Why ns.fn is not there: the server's closest tool names, else a few
    of its tools, and how to list them all."""
    import difflib  # here only: most cells never need it
    fn = fn[:200]  # the matcher's cost grows with the name's length
    close = difflib.get_close_matches(fn, fns, n=3)
    names = ["%s.%s" % (ns, f) for f in (close or fns[:SUGGEST_MAX])]
    listed = ", ".join(names[:-1]) + (" or " if close else " and ") + names[-1] \
        if len(names) > 1 else "".join(names)
    if not names:  # the code deleted them
        hint = "it has none;"
    elif close:
        hint = "did you mean %s?" % listed
    elif len(fns) > SUGGEST_MAX:
        hint = "it has %s, and %d more;" % (", ".join(names), len(fns) - SUGGEST_MAX)
    else:
        hint = "it has %s;" % listed
    return '%s has no tool %r; %s print(tools.search("%s.")) shows all its tools' % (
        ns, fn, hint, ns)


class AbsentNamespace(ToolNamespace):
    """A server that has listed no tools (it has not been reachable): any
    name is a call, which the host answers with ToolError."""

    def __getattr__(self, fn):
        if fn.startswith("_"):
            raise AttributeError(fn)
        return _make_tool(self._chan, "%s.%s" % (self._server, fn), self._name, fn, None)

    def __repr__(self):
        return "<tools %s: none listed (the server is not available)>" % self._name


def _make_tool(chan, tool, ns, fn, doc):
    qualname = "%s.%s" % (ns, fn)

    async def call(*args, **kwargs):
        if args:
            raise TypeError("%s() takes keyword arguments only (%d positional given)"
                            % (qualname, len(args)))
        return await chan.call(tool, qualname, kwargs)

    call.__name__ = fn
    call.__qualname__ = qualname
    call.__doc__ = doc or None
    return call


# ---- tool calls never awaited ---------------------------------------------------
# A tool function is `async def`: calling it makes a coroutine, and the call
# goes to the host only when that coroutine runs, so one never awaited is a
# call never made. Python would show it as "<coroutine object ...>" in the
# result, or warn "coroutine ... was never awaited" once it is freed (if it
# is before the runner exits); each becomes a line naming the tool and the
# fix. The choice of error or warning is in docs/decisions.md.

UNAWAITED = "%s(...) was not awaited: write await %s(...)"
UNAWAITED_WARNING = ("RuntimeWarning: %s(...) was not awaited, so the call was not made:"
                     " write await %s(...)\n")
SCAN_MAX = 10000                 # values looked at for calls left in names at the end
_TOOL_CODE = _make_tool(None, "", "", "", None).__code__  # shared by every tool function
_READ_CODE = ToolNamespace.read_resource.__code__


def _tool_call_name(v):
    """"ns.fn" when v is a tool call (a coroutine of a tool function or of
    read_resource) that has not started, else None."""
    if (type(v) is not types.CoroutineType or v.cr_frame is None or v.cr_running
            or v.cr_suspended):
        return None
    if v.cr_code is _TOOL_CODE:
        return v.__qualname__
    if v.cr_code is _READ_CODE:
        ns = v.cr_frame.f_locals.get("self")
        if issubclass(type(ns), ToolNamespace):
            return "%s.%s" % (object.__getattribute__(ns, "_name"), READ_FN)
    return None


def _items(v):
    """Up to SCAN_MAX of the values a list, tuple or dict holds, else []."""
    try:
        if type(v) in (list, tuple):
            return list(v[:SCAN_MAX])
        if type(v) is dict:
            return list(itertools.islice(v.values(), SCAN_MAX))
    except RuntimeError:  # a thread of the code's changed it meanwhile
        pass
    return []


def _unawaited(values):
    """The names of the tool calls not started among values, or one level
    down in a list, tuple or dict's values, in order and once each (at most
    SCAN_MAX values are looked at). Each is closed: it can never run."""
    names, looked = [], 0
    for v in values:
        for x in [v] + _items(v):
            looked += 1
            if looked > SCAN_MAX:
                return names
            name = _tool_call_name(x)
            if name is not None:
                x.close()
                if name not in names:
                    names.append(name)
    return names


class _Unawaited:
    """Tool calls the code made and never awaited: a warning line each
    (once per tool) as they are freed and for those left in the code's
    globals at the end; a final value that is or holds one is the error."""

    def __init__(self, chan):
        self._chan = chan
        self._warned = set()

    def watch(self):
        # The interpreter calls this for each coroutine freed without having
        # run (from the warnings module, if imported: it is, above).
        warnings._warn_unawaited_coroutine = self._freed

    def _freed(self, coro):
        name = _tool_call_name(coro)
        if name is not None:
            self._warn([name])
        else:
            # Python's own warning, at the line that dropped the coroutine
            # (called from here, Python's function would point at this one).
            warnings.warn("coroutine %r was never awaited" % coro.__qualname__,
                          RuntimeWarning, stacklevel=2, source=coro)

    def _warn(self, names):
        for name in names:
            if name not in self._warned:
                self._warned.add(name)
                self._chan.out_write(UNAWAITED_WARNING % (name, name))

    def finish(self, g, error, value):
        """(error, value) of the run, once its unawaited calls are told."""
        names = _unawaited([value])
        if names and error is None:
            error, value = "\n".join(UNAWAITED % (n, n) for n in names), None
        self._warn(_unawaited(_items(g)))
        return error, value


class _StubList(list):
    """tools.search's answer: a list of stub strings that prints as the stubs."""

    def __str__(self):
        return "\n".join(self) if self else "(no tool matches)"


class _ToolsHelper:
    """`tools` in the cell: the tools' stubs (each entry's `doc`), found here
    without asking the host (docs/stubs.md)."""

    def __init__(self, entries):
        # (tool, ns, fn, doc, function, off), sorted by Python name
        self._entries = sorted(entries, key=lambda e: (e[1], e[2]))

    @staticmethod
    def _stub(tool, ns, fn, doc):
        return doc or "async def %s(**kwargs): ...  # %s.%s, MCP tool %s\n" % (fn, ns, fn, tool)

    def search(self, text):
        """The stubs of the tools whose MCP name ("server.tool"), Python name
        ("ns.fn") or stub text contains text, ignoring case: name matches
        first, each group by Python name, then the tools that match but are
        not offered here (their stubs say why). "" matches every tool. A
        list of strings; print() shows the stubs one after the other."""
        if not isinstance(text, str):
            raise TypeError("tools.search() takes a str, not %s" % type(text).__name__)
        needle = text.casefold()
        names, docs, off = [], [], []
        for tool, ns, fn, doc, _, why in self._entries:
            stub = self._stub(tool, ns, fn, doc)
            by_name = needle in tool.casefold() or needle in ("%s.%s" % (ns, fn)).casefold()
            if not by_name and needle not in doc.casefold():
                continue
            (off if why is not None else names if by_name else docs).append(stub)
        return _StubList(names + docs + off)

    def describe(self, name):
        """The stub of one tool: by MCP name ("server.tool"), Python name
        ("ns.fn") or the function itself (tools.describe(ns.fn))."""
        for tool, ns, fn, doc, func, _ in self._entries:
            if name is func:
                return self._stub(tool, ns, fn, doc)
        if not isinstance(name, str):
            raise TypeError("tools.describe() takes a name or a tool function, not %s"
                            % type(name).__name__)
        for match in (lambda e: e[0] == name, lambda e: "%s.%s" % (e[1], e[2]) == name):
            for tool, ns, fn, doc, func, _ in self._entries:
                if match((tool, ns, fn)):
                    return self._stub(tool, ns, fn, doc)
        raise LookupError("no tool named %r; tools.search(\"part of a name\") finds tools"
                          % name[:200])

    def __repr__(self):
        off = sum(1 for e in self._entries if e[5] is not None)
        return "<tools: search(text), describe(name); %d tools%s>" % (
            len(self._entries) - off, ", %d not offered" % off if off else "")


def _need_asyncio():
    """The asyncio module, imported on first need."""
    global asyncio
    if asyncio is None:
        import asyncio as mod
        asyncio = mod
    return asyncio


_loop = None


def _runner_loop():
    """The runner's event loop, made on first need."""
    global _loop
    if _loop is None:
        _loop = _need_asyncio().new_event_loop()
        asyncio.set_event_loop(_loop)
    return _loop


def _cell_globals(chan, tools):
    g = {"__name__": "__main__", "__builtins__": builtins, "ToolError": ToolError}
    if asyncio is not None:
        g["asyncio"] = asyncio
    entries = []
    for tool, ns, fn, doc, off in tools:
        if fn is None:
            g[ns] = AbsentNamespace(ns, chan, tool)
            continue
        space = g.get(ns) or g.setdefault(ns, ToolNamespace(ns, chan, tool.split(".", 1)[0]))
        func = _make_tool(chan, tool, ns, fn, doc)
        setattr(space, fn, func)
        entries.append((tool, ns, fn, doc, func, off))
    g["tools"] = _ToolsHelper(entries)
    return g


_cell_count = 0


def _cell_file():
    """The file name of the cell about to run: <cell>, then in a session
    <cell 2>, <cell 3>..., so that a function an earlier cell defined shows
    its own source in a traceback (the last CELL_FILES_KEPT are kept)."""
    global _cell_count
    _cell_count += 1
    if _cell_count > CELL_FILES_KEPT:
        linecache.cache.pop("<cell %d>" % (_cell_count - CELL_FILES_KEPT), None)
    return CELL_FILE if _cell_count == 1 else "<cell %d>" % _cell_count


def _compile(code, name=CELL_FILE):
    """Compile the cell; a final expression's value lands in RESULT_NAME."""
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        assign = ast.Assign(targets=[ast.Name(id=RESULT_NAME, ctx=ast.Store())],
                            value=last.value)
        tree.body[-1] = ast.copy_location(assign, last)
        ast.fix_missing_locations(tree)
    return compile(tree, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                   dont_inherit=True)


def _run(code, g, loop=None, name=CELL_FILE):
    """Run the cell; returns (error, value). asyncio is imported (and given
    to the code as `asyncio`) when the code awaits at top level or names
    asyncio; the loop is the runner's unless one is given."""
    try:
        obj = _compile(code, name)
    except (SyntaxError, ValueError) as e:
        # Only the error itself: the frames would be the runner's and ast's.
        return _traceback_tail(e.with_traceback(None)), None
    try:
        if obj.co_flags & CO_COROUTINE or "asyncio" in code:
            g.setdefault("asyncio", _need_asyncio())
        ret = eval(obj, g)
        if obj.co_flags & CO_COROUTINE:
            (loop or _runner_loop()).run_until_complete(ret)
        return None, g.pop(RESULT_NAME, None)
    except SystemExit as e:
        if e.code is None or e.code == 0:
            return None, None
        return _traceback_tail(e), None
    except BaseException as e:
        return _traceback_tail(e), None


# ---- files out of /out -------------------------------------------------------------
# What the code leaves in /out goes to the host as `file` lines, within the
# limits the cell line gave (limits.files), and every entry that is not sent
# as a `skip` line saying why; then /out is emptied. The host enforces the
# limits again and judges each file itself: these rules only keep an honest
# cell within them.

def _check_files(files):
    """The cell line's `files` as (max_count, max_bytes, max_total_bytes)."""
    keys = ("max_count", "max_bytes", "max_total_bytes")
    if type(files) is not dict or set(files) != set(keys):
        raise _Fatal("files: fields must be %s" % ", ".join(keys))
    count, size, total = (files[k] for k in keys)
    if (any(type(v) is not int for v in (count, size, total))
            or not 0 <= count <= FILES_COUNT_CEIL or not 1 <= size <= FILES_BYTES_CEIL
            or not size <= total <= FILES_TOTAL_CEIL):
        raise _Fatal("files: limits out of range")
    return count, size, total


def _kind(mode):
    """Why an entry that is not a regular file is left out (None: it is one)."""
    for test, why in ((stat.S_ISREG, None), (stat.S_ISLNK, "symlink"),
                      (stat.S_ISDIR, "directory"), (stat.S_ISCHR, "device"),
                      (stat.S_ISBLK, "device"), (stat.S_ISFIFO, "fifo"),
                      (stat.S_ISSOCK, "socket")):
        if test(mode):
            return why
    return "other"


def _read_file(dfd, name, cap):
    """At most cap bytes of the regular file name in dfd, never through a
    link, never blocking on a FIFO put there meanwhile; None when it is
    not a regular file by then."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = bytearray()
        while len(data) < cap:
            chunk = os.read(fd, min(cap - len(data), 1024 * 1024))
            if not chunk:
                break
            data += chunk
        return bytes(data)
    finally:
        os.close(fd)


def _file_lines(chan, name, data):
    import binascii
    for i in range(0, max(len(data), 1), FILE_CHUNK):
        chunk = binascii.b2a_base64(data[i:i + FILE_CHUNK], newline=False).decode("ascii")
        chan.send({"t": "file", "name": name, "data": chunk,
                   "more": i + FILE_CHUNK < len(data)})


def _wire_name(entry):
    """An entry's name as sent: its undecodable bytes become U+FFFD (the
    host makes it a safe name in any case)."""
    return _safe_str(entry).encode("utf-8")[:FILE_NAME_MAX].decode("utf-8", "ignore") or "?"


def _send_entry(chan, dfd, entry, limits, sent):
    """Send one entry of /out, or say why not; sent is [files, bytes]."""
    count, size, total = limits
    name = _wire_name(entry)
    try:
        why = _kind(os.stat(entry, dir_fd=dfd, follow_symlinks=False).st_mode)
        data = None
        if why is None and sent[0] >= count:
            why = "max_count"
        elif why is None:
            data = _read_file(dfd, entry, size + 1)
            why = ("other" if data is None else "max_bytes" if len(data) > size
                   else "max_total_bytes" if sent[1] + len(data) > total else None)
    except OSError:
        why = "unreadable"
    if why is not None:
        chan.send({"t": "skip", "name": name, "why": why})
        return
    _file_lines(chan, name, data)
    sent[0] += 1
    sent[1] += len(data)


def _send_files(chan, dfd, limits):
    import heapq
    with os.scandir(dfd) as it:
        # Sorted by name, without holding the names of a huge directory.
        entries = heapq.nsmallest(FILE_ENTRIES_MAX + 1, (e.name for e in it))
    sent = [0, 0]
    for i, entry in enumerate(entries):
        if i == FILE_ENTRIES_MAX:
            chan.send({"t": "skip", "name": _wire_name(entry), "why": "max_entries"})
            break
        _send_entry(chan, dfd, entry, limits, sent)


def _names(dfd):
    """Up to EMPTY_BATCH names of the directory dfd."""
    with os.scandir(dfd) as it:
        return [e.name for e in itertools.islice(it, EMPTY_BATCH)]


def _empty_dir(dfd):
    """Remove everything below dfd without following a link: files are
    unlinked, directories entered (made writable), emptied and removed.
    Going down and back up through ".." keeps two descriptors open at most,
    however deep the tree. Raises OSError when something resists."""
    cur, path = os.dup(dfd), []
    try:
        while True:
            names = _names(cur)
            if not names and not path:
                return
            if not names:
                up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cur)
                os.close(cur)
                cur = up
                os.rmdir(path.pop(), dir_fd=cur)
                continue
            for name in names:
                if not stat.S_ISDIR(os.stat(name, dir_fd=cur, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=cur)
                    continue
                os.chmod(name, 0o700, dir_fd=cur)  # the code may have taken its rights away
                down = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                               dir_fd=cur)
                os.close(cur)
                cur = down
                path.append(name)
                break
    finally:
        os.close(cur)


def _send_out_files(chan):
    """Send what the code left in /out within the cell's limits.files, then
    empty /out. Never raises: a failure here must not lose the done line.
    A cell line without `files` (the runner run outside a sandbox, in its
    tests) takes nothing and leaves /out alone."""
    if chan.files is None:
        return
    try:
        chan.out_flush()  # what was printed comes before the files
        dfd = os.open(OUT_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except BaseException:
        return
    try:
        _send_files(chan, dfd, chan.files)
    except BaseException:
        pass
    try:
        _empty_dir(dfd)
    except BaseException:
        pass
    finally:
        os.close(dfd)


def _finish(chan, error, value, keep=False):
    """Say done and exit at once: nothing the code left running may follow.
    A session's runner (keep) stays instead, quiet until its next cell."""
    try:
        result = None if error is not None else _result_value(value)
    except BaseException as e:
        error, result = "runner: result not sendable: %s" % type(e).__name__, None
    with chan.lock:
        chan.out_flush(then={"t": "done",
                             "error": None if error is None else _safe_str(error),
                             "result": result})
        if keep:
            chan.between = True
            return
        chan.closed = True
    os._exit(0)


def _warm_up(loop):
    """Walk, before `ready`, the path a cell will take (compile with
    top-level await, run on the loop, turn a value into JSON), on code of
    the runner's own: under gVisor the first touch of fresh memory costs a
    page fault in the Sentry, and a pooled sandbox can pay those while it
    waits. Nothing is printed or sent, and nothing is kept."""
    g = {"__name__": "__warm_up__", "__builtins__": builtins, "asyncio": _need_asyncio()}
    obj = _compile("import asyncio\nx = {str(i): [i] * 4 for i in range(256)}\n"
                   "await asyncio.sleep(0)\nx\n")
    loop.run_until_complete(eval(obj, g))
    json.loads(_dumps(_result_value(g.pop(RESULT_NAME))))
    linecache.cache.pop(CELL_FILE, None)
    _out_warm_up()


def _out_warm_up():
    """The first steps of taking /out's files (heapq, a sorted listing),
    read-only: /out is empty in a sandbox that ran no code, and outside one
    (the runner's own tests) it is not the runner's to change."""
    import heapq
    try:
        dfd = os.open(OUT_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        with os.scandir(dfd) as it:
            heapq.nsmallest(FILE_ENTRIES_MAX + 1, (e.name for e in it))
        _names(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _reseed():
    """A restored sandbox starts from the memory of the one checkpointed:
    every generator seeded in it would repeat the same numbers in each
    copy. Seed them again from os.urandom (the restored kernel's, fresh per
    sandbox). What stays shared is in SECURITY.md (the hash seed)."""
    rnd = sys.modules.get("random")
    if rnd is not None:
        rnd.seed(os.urandom(32))
    tmp = sys.modules.get("tempfile")
    if tmp is not None:
        tmp._name_sequence = None  # its names' generator, made again on next use
    ssl = sys.modules.get("ssl")
    if ssl is not None:
        ssl.RAND_add(os.urandom(32), 32.0)
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:  # numpy's global generator, seeded when it was preloaded
        np_random.seed([int.from_bytes(os.urandom(4), "little") for _ in range(8)])


def _read_cell(chan):
    while True:
        line = chan.read_line()
        if line is None:
            os._exit(EXIT_HOST_GONE)  # the pool was drained before a cell came
        if line != b'{"t":"wake"}':
            break
        _reseed()
        # The restored memory is all there, but this sandbox's address
        # space maps none of it yet: walk the cell's path again, so that
        # the cell does not pay those page faults.
        _warm_up(_runner_loop())
        chan.send({"t": "ready", "v": PROTOCOL_VERSION})
    try:
        msg = json.loads(line.decode("utf-8"))
    except ValueError as e:
        raise _Fatal("cell line is not JSON: %s" % e) from None
    if (type(msg) is not dict or not {"t", "code", "tools"} <= set(msg) <= CELL_FIELDS
            or msg["t"] != "cell"):
        raise _Fatal("expected a cell message with fields t, code, tools "
                     "(and files, args, keep)")
    if type(msg["code"]) is not str:
        raise _Fatal("cell code is not a string")
    if msg.get("keep", True) is not True:
        raise _Fatal("cell keep is not true")
    if type(msg.get("args", {})) is not dict:
        raise _Fatal("cell args is not an object")
    chan.files = _check_files(msg["files"]) if "files" in msg else None
    return msg["code"], _check_tools(msg["tools"]), msg.get("args"), "keep" in msg


def _image_setup():
    """What an image with Debian's Python modules needs (the data image;
    the cell image has none of it): their directory on sys.path, which -S
    leaves out, and matplotlib drawing without a display into a config
    directory of its own in /tmp, its font list copied there from the
    one made when the image was built (so a first chart scans no font)."""
    if not os.path.isdir(SITE_DIR):
        return
    sys.path.append(SITE_DIR)
    try:
        names = [n for n in os.listdir(MPL_CACHE) if n.startswith("fontlist-")]
    except OSError:
        return
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["MPLCONFIGDIR"] = MPL_CONFIG
    try:
        os.makedirs(MPL_CONFIG, mode=0o700, exist_ok=True)
        for n in names:
            with open(os.path.join(MPL_CACHE, n), "rb") as src:
                data = src.read()
            with open(os.path.join(MPL_CONFIG, n), "wb") as dst:
                dst.write(data)
    except OSError:
        pass  # matplotlib makes its font list again, at the first chart


def _args(argv):
    """(pooled, modules to preload) from the runner's arguments: none, or
    POOLED_ARG and then at most one PRELOAD_ARG."""
    if argv[:1] != [POOLED_ARG] or len(argv) > 2:
        return False, []
    if len(argv) == 2:
        if not argv[1].startswith(PRELOAD_ARG):
            return True, []
        return True, [n for n in argv[1][len(PRELOAD_ARG):].split(",") if n]
    return True, []


def _preload(chan, names):
    """Import what the policy names (image.preload) before `ready`, so that
    a cell does not pay for it. Whatever an import prints is dropped (no
    `out` may come before `ready`); the first that fails is sent as `fail`
    with its error, and the runner exits: the host takes it as a failed
    boot, and the appliance's start as a refusal."""
    import importlib
    keep_out, keep_err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = io.StringIO()
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except BaseException as e:
                text = "".join(traceback.format_exception_only(type(e), e)).strip()
                chan.send({"t": "fail", "error": ("preload %s: %s" % (name, text))[:FAIL_ERROR_MAX]})
                os._exit(1)
    finally:
        sys.stdout, sys.stderr = keep_out, keep_err


def main():
    _malloc_setup()
    rfd, wfd = _private_fds()
    chan = _Channel(rfd, wfd)
    sys.stdout = _Out(chan, "<stdout>")
    sys.stderr = _Out(chan, "<stderr>")
    sys.stdin = io.StringIO("")
    _image_setup()
    chan.out_flusher_start()
    pooled, preload = _args(sys.argv[1:])
    if pooled:
        # A pooled sandbox: pay now for what its cell would otherwise pay.
        _preload(chan, preload)
        _warm_up(_runner_loop())
    chan.send({"t": "ready", "v": PROTOCOL_VERSION})
    g = None
    while True:
        try:
            code, tools, args, keep = _read_cell(chan)
        except _Fatal as e:
            _finish(chan, "runner: bad cell message: %s" % e, None)
        g = _one_cell(chan, g, code, tools, args, keep)


def _one_cell(chan, g, code, tools, args, keep):
    """Run one cell in globals g (a session's, kept from its last cell), or
    in new ones, and say done; without keep the runner exits there. The
    globals the next cell of the session runs in."""
    chan.between = False
    chan.out_flusher_go()
    try:
        unawaited = _Unawaited(chan)
        unawaited.watch()
        cg = _cell_globals(chan, tools)
        if g is None:
            g = cg
        else:
            _tools_renew(g, cg)
        _args_bind(g, args)
        error, value = unawaited.finish(g, *_run(code, g, name=_cell_file()))
    except BaseException as e:  # the runner's own fault: still say done
        error, value = "runner: internal error: %s" % type(e).__name__, None
    _send_out_files(chan)
    if keep:
        _malloc_trim()
    _finish(chan, error, value, keep)
    # A session's: the next cell line is read with a blocking read, from
    # whatever the event loop's reader left.
    loop = chan.reader_loop
    if loop is not None and not loop.is_closed():
        loop.remove_reader(chan.rfd)
    chan.reader_loop = None
    os.set_blocking(chan.rfd, True)
    return g


def _tools_renew(g, fresh):
    """A session's next cell: its tool namespaces and helpers (the new cell
    line's) replace those the last one had; the code's own names stay."""
    for name, v in list(g.items()):
        if isinstance(v, (ToolNamespace, _ToolsHelper)):
            del g[name]
    for name, v in fresh.items():
        if isinstance(v, (ToolNamespace, _ToolsHelper)) or name not in g:
            g[name] = v


_args_given = None  # the dict the last cell line's args became


def _args_bind(g, args):
    """A code tool's arguments: the cell line's `args` (a dict, as json.loads
    made it) is the global `args`; a line without them leaves the name
    undefined. In a session, the next cell's line decides again: the args an
    earlier line gave go (unless the code bound `args` to something else,
    which stays as its own variable), and args the line gives replace
    whatever the name held."""
    global _args_given
    if _args_given is not None and g.get("args") is _args_given:
        del g["args"]
    _args_given = args
    if args is not None:
        g["args"] = args


if __name__ == "__main__":
    main()
