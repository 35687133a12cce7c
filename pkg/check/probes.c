/* probes.c: the fixed probes: what each cell runs (Python), how it is set
 * up on the host, and how it is judged (internal.h; docs/check.md has the
 * table). A probe that must be denied reports what it managed to do; it
 * never decides its own verdict, and anything but its report line is a
 * surprise (judge.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "check/internal.h"

#define CHECK_DEADLINE_MS 3000 /* the deadline probe's, unless the policy's is shorter */

/* What every probe that reports facts starts with: its parameters, from
 * check, hex-encoded so no value is ever pasted into the program, and the
 * report line check_judge_result reads. */
static const char prelude_head[] = "import json\n"
				   "P = json.loads(bytes.fromhex(\"";
static const char prelude_tail[] =
	"\").decode())\n"
	"def report(reached, detail, n=0):\n"
	"    print(json.dumps({\"reached\": bool(reached), \"detail\": str(detail)[:300], "
	"\"n\": int(n)}))\n";

static const char code_print[] = "print(\"hello from a cell\")\n"
				 "print(\"caf\\u00e9\", 2, None, sep=\", \", end=\" .\\n\")\n";

static const char code_asyncio[] =
	"import asyncio, time\n"
	"async def nap(i):\n"
	"    await asyncio.sleep(0.3)\n"
	"    return i * i\n"
	"t = time.monotonic()\n"
	"r = await asyncio.gather(*(nap(i) for i in range(5)))\n"
	"print(r, \"together\" if time.monotonic() - t < 1.2 else \"one after another\")\n";

static const char code_tcp_loopback[] =
	"import socket\n"
	"try:\n"
	"    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
	"    s.settimeout(2)\n"
	"    s.connect((\"127.0.0.1\", P[\"port\"]))\n"
	"    report(True, \"connected to 127.0.0.1:%d\" % P[\"port\"])\n"
	"except OSError as e:\n"
	"    report(False, \"%s: %s\" % (type(e).__name__, e.strerror or e))\n";

static const char code_udp_loopback[] =
	"import socket\n"
	"try:\n"
	"    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"    s.sendto(b\"appliance check\", (\"127.0.0.1\", P[\"port\"]))\n"
	"    report(False, \"sent, into the cell's own loopback\")\n"
	"except OSError as e:\n"
	"    report(False, \"%s: %s\" % (type(e).__name__, e.strerror or e))\n";

static const char code_tcp_hosts[] =
	"import socket\n"
	"seen, reached = [], False\n"
	"for fam, addr, port in P[\"addrs\"]:\n"
	"    try:\n"
	"        s = socket.socket(socket.AF_INET6 if fam == 6 else socket.AF_INET)\n"
	"        s.settimeout(2)\n"
	"        s.connect((addr, port))\n"
	"        seen.append(\"connected to %s\" % addr)\n"
	"        reached = True\n"
	"    except OSError as e:\n"
	"        seen.append(\"%s: %s\" % (addr, e.strerror or type(e).__name__))\n"
	"report(reached, \"; \".join(seen) or \"the host has no address but loopback\")\n";

static const char code_udp_hosts[] =
	"import socket\n"
	"seen = []\n"
	"for fam, addr, port in P[\"addrs\"]:\n"
	"    try:\n"
	"        s = socket.socket(socket.AF_INET6 if fam == 6 else socket.AF_INET,\n"
	"                          socket.SOCK_DGRAM)\n"
	"        s.sendto(b\"appliance check\", (addr, port))\n"
	"        seen.append(\"%s: sent\" % addr)\n"
	"    except OSError as e:\n"
	"        seen.append(\"%s: %s\" % (addr, e.strerror or type(e).__name__))\n"
	"report(False, \"; \".join(seen) or \"the host has no address but loopback\")\n";

static const char code_interfaces[] =
	"dev = open(\"/proc/net/dev\").read().splitlines()[2:]\n"
	"names = sorted(l.split(\":\")[0].strip() for l in dev if \":\" in l)\n"
	"v4 = [l.split() for l in open(\"/proc/net/route\").read().splitlines()[1:] if "
	"l.strip()]\n"
	"try:\n"
	"    v6 = [l.split() for l in open(\"/proc/net/ipv6_route\").read().splitlines() if "
	"l.strip()]\n"
	"except OSError:\n"
	"    v6 = []\n"
	"default = [r for r in v4 if len(r) > 7 and r[1] == \"00000000\" and r[7] == "
	"\"00000000\"]\n"
	"default += [r for r in v6 if len(r) > 1 and r[0] == \"0\" * 32 and r[1] == \"00\"]\n"
	"others = [n for n in names if n != \"lo\"]\n"
	"report(bool(others or default), \"interfaces: %s; %d routes; default route: %s\"\n"
	"       % (\", \".join(names) or \"none\", len(v4) + len(v6), \"yes\" if default else "
	"\"none\"))\n";

static const char code_raw[] =
	"import socket\n"
	"opened, refused = [], []\n"
	"for name, fam, typ, proto in ((\"raw IPv4\", socket.AF_INET, socket.SOCK_RAW, "
	"socket.IPPROTO_ICMP),\n"
	"                              (\"raw IPv6\", socket.AF_INET6, socket.SOCK_RAW, "
	"socket.IPPROTO_ICMPV6),\n"
	"                              (\"packet\", socket.AF_PACKET, socket.SOCK_RAW, 0x0300)):\n"
	"    try:\n"
	"        socket.socket(fam, typ, proto).close()\n"
	"        opened.append(name)\n"
	"    except OSError as e:\n"
	"        refused.append(\"%s: %s\" % (name, type(e).__name__))\n"
	"report(bool(opened), \"opened \" + \", \".join(opened) if opened else \"; "
	"\".join(refused))\n";

static const char code_host_file[] =
	"import os\n"
	"seen = [p for p in (P[\"dir\"], P[\"path\"]) if os.path.lexists(p)]\n"
	"report(bool(seen), \"visible: \" + \", \".join(seen) if seen else \"%s is not there\" % "
	"P[\"path\"])\n";

static const char code_host_env[] =
	"import os\n"
	"hits = []\n"
	"if P[\"name\"] in os.environ or any(P[\"token\"] in v for v in os.environ.values()):\n"
	"    hits.append(\"os.environ\")\n"
	"for d in os.listdir(\"/proc\"):\n"
	"    if d.isdigit():\n"
	"        try:\n"
	"            with open(\"/proc/%s/environ\" % d, \"rb\") as f:\n"
	"                if P[\"token\"].encode() in f.read():\n"
	"                    hits.append(\"/proc/%s/environ\" % d)\n"
	"        except OSError:\n"
	"            pass\n"
	"report(bool(hits), \"seen in \" + \", \".join(hits) if hits else\n"
	"       \"not seen; the environment holds %s\" % \" \".join(sorted(os.environ)))\n";

static const char code_writes[] =
	"import os\n"
	"wrote, tried = [], 0\n"
	"for top, dirs, files in os.walk(\"/\"):\n"
	"    dirs[:] = [d for d in dirs if os.path.join(top, d) not in (\"/tmp\", \"/out\", "
	"\"/proc\", \"/sys\")]\n"
	"    tried += 1\n"
	"    try:\n"
	"        with open(os.path.join(top, \".appliance-check\"), \"x\") as f:\n"
	"            f.write(\"x\")\n"
	"        wrote.append(top)\n"
	"    except OSError:\n"
	"        pass\n"
	"    if tried >= 5000:\n"
	"        break\n"
	"try:\n"
	"    with open(\"/tmp/.appliance-check\", \"x\") as f:\n"
	"        f.write(\"x\")\n"
	"    tmp = \"while /tmp takes files\"\n"
	"except OSError as e:\n"
	"    tmp = \"and /tmp too (%s)\" % type(e).__name__\n"
	"report(bool(wrote), \"wrote in \" + \", \".join(wrote[:8]) if wrote else\n"
	"       \"refused in all %d directories, %s\" % (tried, tmp))\n";

static const char code_exec[] =
	"import os, shutil, subprocess, sys\n"
	"ran, refused = [], []\n"
	"script, binary = \"/tmp/appliance-check-script\", \"/tmp/appliance-check-python\"\n"
	"with open(script, \"w\") as f:\n"
	"    f.write(\"#!%s\\nprint('ran')\\n\" % sys.executable)\n"
	"tries = [(script, [script])]\n"
	"try:\n"
	"    shutil.copyfile(os.path.realpath(sys.executable), binary)\n"
	"    tries.append((binary, [binary, \"-c\", \"print('ran')\"]))\n"
	"except OSError as e:\n"
	"    refused.append(\"no copy of the interpreter (%s)\" % type(e).__name__)\n"
	"for path, argv in tries:\n"
	"    os.chmod(path, 0o755)\n"
	"    try:\n"
	"        r = subprocess.run(argv, capture_output=True, timeout=10)\n"
	"        ran.append(\"%s (exit %d)\" % (path, r.returncode))\n"
	"    except OSError as e:\n"
	"        refused.append(\"%s: %s\" % (os.path.basename(path), type(e).__name__))\n"
	"report(bool(ran), \"ran \" + \", \".join(ran) if ran else \"; \".join(refused))\n";

/* Threads first (they cost little memory; a forked interpreter costs
 * several MiB inside gVisor, so forks alone would meet the memory limit
 * first), then four of them end and forks take their places until one is
 * refused. RLIMIT_NPROC counts both. */
static const char code_pids[] =
	"import os, threading\n"
	"def tasks():\n"
	"    n = 0\n"
	"    for d in os.listdir(\"/proc\"):\n"
	"        if d.isdigit():\n"
	"            try:\n"
	"                n += len(os.listdir(\"/proc/%s/task\" % d))\n"
	"            except OSError:\n"
	"                pass\n"
	"    return n\n"
	"cap = P[\"pids\"] + 64\n"
	"threading.stack_size(128 << 10)\n"
	"events, threads = [], []\n"
	"while len(threads) < cap:\n"
	"    ev = threading.Event()\n"
	"    t = threading.Thread(target=ev.wait)\n"
	"    try:\n"
	"        t.start()\n"
	"    except RuntimeError:\n"
	"        break\n"
	"    events.append(ev)\n"
	"    threads.append(t)\n"
	"peak = tasks()\n"
	"for ev, t in list(zip(events, threads))[:4]:\n"
	"    ev.set()\n"
	"    t.join()\n"
	"r, w = os.pipe()\n"
	"kids, refused = [], None\n"
	"while len(kids) < cap:\n"
	"    try:\n"
	"        pid = os.fork()\n"
	"    except OSError as e:\n"
	"        refused = \"%s\" % (e.strerror or type(e).__name__)\n"
	"        break\n"
	"    if pid == 0:\n"
	"        os.close(w)\n"
	"        os.read(r, 1)\n"
	"        os._exit(0)\n"
	"    kids.append(pid)\n"
	"peak = max(peak, tasks())\n"
	"os.close(w)\n"
	"for k in kids:\n"
	"    os.waitpid(k, 0)\n"
	"for ev in events:\n"
	"    ev.set()\n"
	"report(refused is None, \"%d threads, %d forks, then refused (%s); at most %d tasks\"\n"
	"       % (len(threads), len(kids), refused, peak), peak)\n";

static const char code_memory[] =
	"chunks, failed = [], False\n"
	"try:\n"
	"    while len(chunks) < P[\"mb\"] + 64:\n"
	"        chunks.append(bytearray(b\"\\x01\") * (1 << 20))\n"
	"except MemoryError:\n"
	"    failed = True\n"
	"n = len(chunks)\n"
	"del chunks\n"
	"report(not failed, (\"MemoryError after %d MiB\" if failed else \"%d MiB, never "
	"refused\") % n, n)\n";

static int setup_loopback(struct check_probe *p, json_t *params, int type)
{
	int port = check_listen_open(&p->lis, AF_INET, type, "127.0.0.1");

	if (port < 0)
		return -errno;
	return json_object_set_new(params, "port", json_integer(port));
}

static int setup_tcp_loopback(struct check *c, struct check_probe *p, json_t *params)
{
	(void)c;
	return setup_loopback(p, params, SOCK_STREAM);
}

static int setup_udp_loopback(struct check *c, struct check_probe *p, json_t *params)
{
	(void)c;
	return setup_loopback(p, params, SOCK_DGRAM);
}

static int setup_hosts(struct check_probe *p, json_t *params, int type)
{
	json_t *addrs;
	int rc = check_listen_hosts(&p->lis, type, &addrs);

	if (rc < 0)
		return rc;
	return json_object_set_new(params, "addrs", addrs);
}

static int setup_tcp_hosts(struct check *c, struct check_probe *p, json_t *params)
{
	(void)c;
	return setup_hosts(p, params, SOCK_STREAM);
}

static int setup_udp_hosts(struct check *c, struct check_probe *p, json_t *params)
{
	(void)c;
	return setup_hosts(p, params, SOCK_DGRAM);
}

static int setup_none(struct check *c, struct check_probe *p, json_t *params)
{
	(void)c;
	(void)p;
	(void)params;
	return 0;
}

static int setup_host_file(struct check *c, struct check_probe *p, json_t *params)
{
	(void)p;
	return json_object_set_new(params, "dir", json_string(c->marker_dir)) ||
	       json_object_set_new(params, "path", json_string(c->marker_path));
}

static int setup_host_env(struct check *c, struct check_probe *p, json_t *params)
{
	(void)p;
	return json_object_set_new(params, "name", json_string(CHECK_MARKER_ENV)) ||
	       json_object_set_new(params, "token", json_string(c->token));
}

static int setup_pids(struct check *c, struct check_probe *p, json_t *params)
{
	p->ex.limit = c->lim.pids;
	return json_object_set_new(params, "pids", json_integer(c->lim.pids));
}

static int setup_memory(struct check *c, struct check_probe *p, json_t *params)
{
	p->ex.limit = c->lim.memory_mb;
	p->ex.memory_stop = true;
	return json_object_set_new(params, "mb", json_integer(c->lim.memory_mb));
}

static int setup_deadline(struct check *c, struct check_probe *p, json_t *params)
{
	(void)c;
	(void)params;
	if (p->deadline_ms > CHECK_DEADLINE_MS)
		p->deadline_ms = CHECK_DEADLINE_MS;
	snprintf(p->label, sizeof(p->label), "%.1f s deadline", (double)p->deadline_ms / 1000.0);
	return 0;
}

static const struct check_probe_def probe_defs[] = {
	{"arithmetic", false, CHECK_JUDGE_STDOUT, "42\n", "print(6*7)\n", NULL, false},
	{"printing", false, CHECK_JUDGE_STDOUT, "hello from a cell\ncaf\xc3\xa9, 2, None .\n",
	 code_print, NULL, false},
	{"asyncio", false, CHECK_JUDGE_STDOUT, "[0, 1, 4, 9, 16] together\n", code_asyncio, NULL,
	 false},
	{"TCP to host loopback", true, CHECK_JUDGE_DENIED, NULL, code_tcp_loopback,
	 setup_tcp_loopback, false},
	{"UDP to host loopback", true, CHECK_JUDGE_DENIED, NULL, code_udp_loopback,
	 setup_udp_loopback, false},
	{"TCP to host addresses", true, CHECK_JUDGE_DENIED, NULL, code_tcp_hosts, setup_tcp_hosts,
	 false},
	{"UDP to host addresses", true, CHECK_JUDGE_DENIED, NULL, code_udp_hosts, setup_udp_hosts,
	 false},
	{"interfaces and routes", true, CHECK_JUDGE_DENIED, NULL, code_interfaces, setup_none,
	 false},
	{"raw sockets", true, CHECK_JUDGE_DENIED, NULL, code_raw, setup_none, false},
	{"host files", true, CHECK_JUDGE_DENIED, NULL, code_host_file, setup_host_file, false},
	{"host environment", true, CHECK_JUDGE_DENIED, NULL, code_host_env, setup_host_env, false},
	{"writes outside /tmp", true, CHECK_JUDGE_DENIED, NULL, code_writes, setup_none, false},
	{"exec from /tmp", true, CHECK_JUDGE_DENIED, NULL, code_exec, setup_none, false},
	{"processes past limits.pids", true, CHECK_JUDGE_LIMIT, NULL, code_pids, setup_pids, true},
	{"memory past limits.memory_mb", true, CHECK_JUDGE_LIMIT, NULL, code_memory, setup_memory,
	 true},
	{"deadline", true, CHECK_JUDGE_DEADLINE, NULL, "while True:\n    pass\n", setup_deadline,
	 true},
};

size_t check_probes_count(void)
{
	return sizeof(probe_defs) / sizeof(probe_defs[0]);
}

const struct check_probe_def *check_probes_get(size_t i)
{
	return i < check_probes_count() ? &probe_defs[i] : NULL;
}

char *check_probes_code(const json_t *params, const char *body)
{
	char *text, *hex, *code = NULL;
	size_t len;

	if (!params)
		return strdup(body);
	if (!(text = json_dumps(params, JSON_COMPACT)))
		return NULL;
	len = strlen(text);
	if ((hex = malloc(2 * len + 1))) {
		sodium_bin2hex(hex, 2 * len + 1, (const unsigned char *)text, len);
		if (asprintf(&code, "%s%s%s%s", prelude_head, hex, prelude_tail, body) < 0)
			code = NULL;
	}
	free(hex);
	free(text);
	return code;
}
