/* policy.h: the policy document, strictly parsed (policy/README.md is the
 * format reference).
 *
 * Pure code: no file is opened and no path is checked on disk here. The
 * bytes come from a file whose signature the caller checks first
 * (minisign.h, load.h); even so the parser treats them as hostile: size and
 * nesting are capped before jansson runs, and unknown keys, duplicate keys,
 * wrong types, values out of range and names past their caps are refused with
 * a message that starts with the path of the offending field
 * ("limits.memory_mb: must be an integer between 16 and 4096").
 *
 * A parsed policy is immutable. Every pointer an accessor returns is borrowed
 * from it and stays valid until policy_free. Two functions look at the
 * disk: policy_http_tls_check, for `run` to call when it starts, and
 * policy_code_files_read, which load.h calls right after parsing.
 */
#ifndef APPL_POLICY_POLICY_H
#define APPL_POLICY_POLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/limits.h"

struct policy; /* opaque */
struct schema; /* schema/schema.h */

/* Parse buf[0..len) (not NUL-terminated, untrusted until verified). base_dir
 * (borrowed) is the directory of the policy file: a relative image.layout is
 * resolved against it (lexically, nothing is looked up); pass an absolute
 * directory to get an absolute layout path. base_dir may be NULL only when
 * the layout is absolute. Neither expiry nor serial is judged here (load.h
 * does that). On success *out is a new object (policy_free) and 0 is
 * returned; else *out is NULL, err is filled, and the return is -EFBIG (over
 * APPL_POLICY_FILE_MAX), -E2BIG (nested deeper than APPL_POLICY_DEPTH_MAX),
 * -EINVAL (anything else wrong in the document) or -ENOMEM. */
int policy_parse(const char *buf, size_t len, const char *base_dir, struct policy **out,
		 struct appl_err *err);

/* Safe on NULL. */
void policy_free(struct policy *p);

/* `serial`: at least 1. */
uint64_t policy_serial(const struct policy *p);

/* `deployment`: the name whose rollback floor this policy is held to
 * ([a-z][a-z0-9_-]*, at most APPL_POLICY_DEPLOYMENT_MAX);
 * POLICY_DEPLOYMENT_DEFAULT when absent. Borrowed. */
#define POLICY_DEPLOYMENT_DEFAULT "default"
const char *policy_deployment(const struct policy *p);

/* Whether s[0..len) is a deployment name a policy may carry. Pure. */
bool policy_deployment_valid(const char *s, size_t len);

/* Whether s is a tool name a `tools` pattern can hold: 1 to
 * APPL_POLICY_TOOL_NAME_MAX characters of A-Z a-z 0-9 _ - . / (MCP's own
 * advice for tool names). Pure. */
bool policy_tool_name_valid(const char *s);

/* `expires` in unix seconds, UTC. */
int64_t policy_expires(const struct policy *p);

/* ---- image and runtime --------------------------------------------------- */

/* image.layout joined to base_dir (or as written when absolute); borrowed. */
const char *policy_image_layout(const struct policy *p);

/* image.digest: "sha256:" and 64 lower-case hex digits; borrowed. */
const char *policy_image_digest(const struct policy *p);

/* image.preload: the module names (dotted Python identifiers, at most
 * APPL_PRELOAD_MAX, none twice) joined by commas, or NULL when the policy
 * names none. Only with limits.pool 1 or more. Borrowed. */
const char *policy_image_preload(const struct policy *p);

#define POLICY_RUNSC_DEFAULT	"/usr/bin/runsc"
#define POLICY_PLATFORM_DEFAULT "systrap"

/* runtime.runsc: an absolute path, POLICY_RUNSC_DEFAULT when absent. */
const char *policy_runtime_runsc(const struct policy *p);

/* runtime.platform: "systrap" (the default), "ptrace" or "kvm". */
const char *policy_runtime_platform(const struct policy *p);

/* runtime.rootless: false unless the policy opts in. */
bool policy_runtime_rootless(const struct policy *p);

/* runtime.restore (default true): sandboxes are restored from a checkpoint
 * of one warm sandbox instead of booted. Never when rootless (a rootless
 * policy that says restore: true is refused at parse). */
bool policy_runtime_restore(const struct policy *p);

/* ---- limits ------------------------------------------------------------- */

/* Every per-cell limit, each within APPL_<NAME>_MIN..APPL_<NAME>_CEIL of
 * limits.h and APPL_<NAME>_DEF when the policy leaves it out. */
struct policy_limits {
	unsigned deadline_s;	     /* arrival to answer, boot and queueing included */
	unsigned max_calls;	     /* tool calls per cell */
	unsigned call_timeout_s;     /* per tool call */
	unsigned max_args_bytes;     /* one call's arguments */
	unsigned max_result_bytes;   /* one call's result (refused, not cut) */
	unsigned max_output_bytes;   /* output kept for the model; <= stop_output_bytes */
	unsigned stop_output_bytes;  /* output that stops the run */
	unsigned memory_mb;	     /* RLIMIT_AS, and the memory cgroup as root */
	unsigned pids;		     /* RLIMIT_NPROC inside the sandbox */
	unsigned nofile;	     /* RLIMIT_NOFILE */
	unsigned tmpfs_mb;	     /* size of /tmp, and RLIMIT_FSIZE */
	unsigned concurrency;	     /* calls in flight per cell */
	unsigned cells;		     /* cells in flight */
	unsigned pool;		     /* warm sandboxes; 0: every cell boots cold */
	unsigned boot_s;	     /* a sandbox says ready within this */
	unsigned max_runner_lines;   /* protocol lines a run's runner may send */
	unsigned audit_seal_lines;   /* a seal line at least every this many lines */
	unsigned audit_seal_s;	     /* and every this many seconds */
	unsigned audit_rotate_kb;    /* a new log file before one passes this */
	unsigned approval_timeout_s; /* one approval question's wait */
	unsigned max_approvals;	     /* approval questions per run */
	/* Serving MCP over HTTP (the `http` section) */
	unsigned http_connections;	  /* open connections, all clients */
	unsigned http_sessions_per_token; /* sessions one bearer token may hold */
	unsigned http_cells_per_client;	  /* cells in flight per client; more wait */
	unsigned http_waiting_per_client; /* cells waiting per client; more are refused */
	unsigned http_body_kb;		  /* one request's body, KiB */
	unsigned http_idle_s;		  /* an idle session expires after this */
	unsigned http_slow_s;		  /* a request's headers and body arrive within */
	unsigned http_drain_s;		  /* after SIGTERM, runs in flight may go on this long */
	/* MCP tasks (docs/tasks.md) */
	unsigned task_ttl_s;	   /* a task and its result are kept at most this long */
	unsigned tasks_per_client; /* tasks one client holds, working or kept */
	/* `files`: what comes back of the files a cell leaves in /out */
	struct policy_files_limits {
		unsigned max_count;	  /* files returned; 0: none */
		unsigned max_bytes;	  /* one file; <= max_total_bytes */
		unsigned max_total_bytes; /* all of them together */
	} files;
};

/* Fill l with the defaults (APPL_*_DEF). */
void policy_limits_default(struct policy_limits *l);

/* Copy the policy's limits into out. */
void policy_limits_get(const struct policy *p, struct policy_limits *out);

/* ---- servers ------------------------------------------------------------ */

enum policy_server_kind {
	POLICY_SERVER_STDIO,
	POLICY_SERVER_HTTP,
};

struct policy_header {
	const char *name;  /* an HTTP token, as written */
	const char *value; /* template: {env:NAME} is still to be filled */
};

/* One upstream server. All pointers are borrowed from the policy. */
struct policy_server {
	const char *name; /* [a-z][a-z0-9_]*, at most APPL_POLICY_SERVER_NAME_MAX */
	enum policy_server_kind kind;
	/* stdio (NULL and 0 for HTTP) */
	const char *const *argv; /* argc strings then NULL; argv[0] is an absolute path */
	size_t argc;
	const char *const *env; /* nenv names then NULL: variables passed from the
				 * appliance's environment, nothing else is */
	size_t nenv;
	const char *cwd; /* absolute, or NULL: the appliance decides */
	/* Confinement (as root; docs/upstream.md): the user it runs as (NULL:
	 * APPL_UPSTREAM_USER; "root" only when written), its cgroup's memory
	 * and process limits, and whether it has a network (false: only a
	 * loopback of its own). */
	const char *user;
	unsigned memory_mb;
	unsigned pids;
	bool network;
	/* HTTP (NULL and 0 for stdio) */
	const char *url; /* http:// or https://, no user:password@ */
	const struct policy_header *headers;
	size_t nheaders;
	const char *ca_file; /* PEM roots replacing the system's for this server, or NULL */
	const char *proxy; /* http:// or https:// proxy, or NULL: none, whatever the environment */
	/* Both kinds */
	bool resources;	      /* the code may read its MCP resources (policy_resources_allowed) */
	unsigned concurrency; /* calls in flight to it at once, all cells together:
			       * APPL_SERVER_CONCURRENCY_MIN..CEIL, _DEF when absent */
};

/* Servers are kept sorted by name, so the order never depends on the file. */
size_t policy_server_count(const struct policy *p);

/* The i-th server (i < count), or NULL; borrowed. */
const struct policy_server *policy_server_get(const struct policy *p, size_t i);

/* The server called name, or NULL; borrowed. */
const struct policy_server *policy_server_find(const struct policy *p, const char *name);

/* true when any server is HTTP. */
bool policy_http_used(const struct policy *p);

/* Whether role may read server's MCP resources (`await ns.read_resource(uri)`
 * in a cell): true exactly when the server exists with "resources": true, the
 * role exists (a NULL role is none), and one of the role's `tools` patterns
 * is "server.*", the whole server. An exact "server.tool" pattern grants no
 * resource, and `tools` entries play no part. A read is read access: the
 * role needs no write. All arguments are borrowed; any of them NULL: false. */
bool policy_resources_allowed(const struct policy *p, const char *server, const char *role);

/* ---- tools, roles and access ---------------------------------------------- */

enum policy_access {
	POLICY_ACCESS_READ,
	POLICY_ACCESS_WRITE,
};

/* Why a tool is refused (POLICY_OK: it is not). */
enum policy_verdict {
	POLICY_OK = 0,
	POLICY_DENY_UNLISTED, /* no `tools` entry matches the tool */
	POLICY_DENY_ROLE,     /* the role's patterns do not name the tool */
	POLICY_DENY_WRITE,    /* a write tool, and the role has no write: true */
	POLICY_DENY_NO_ROLE,  /* role is NULL or names no role of the policy */
	POLICY_DENY_USES,     /* a code tool's program: not among its `uses` */
	POLICY_DENY_NO_TOOL,  /* no code tool of that name */
	POLICY_DENY_CHECK,    /* a write tool, and `check` makes no write call */
};

/* Decide whether role may call server.tool, where read_only_hint is what the
 * server's tools/list said (annotations.readOnlyHint == true). In order:
 *
 * 1. The role must exist (else POLICY_DENY_NO_ROLE; a NULL role is none).
 * 2. The tool's access comes from `tools`. An exact entry "server.tool" wins
 *    and its access is the tool's, whatever the hint says. Else a "server.*"
 *    entry applies: with "read" it admits only tools with read_only_hint
 *    (as read; the others need their own entry), with "write" every tool of
 *    the server: read when read_only_hint, else write. No entry admits the
 *    tool: POLICY_DENY_UNLISTED.
 * 3. One of the role's patterns must be "server.tool" or "server.*" (else
 *    POLICY_DENY_ROLE).
 * 4. A write tool needs the role's write: true (else POLICY_DENY_WRITE).
 * On POLICY_OK *access (may be NULL) holds the tool's access. All arguments
 * are borrowed; a NULL p, server or tool is POLICY_DENY_UNLISTED. */
enum policy_verdict policy_tool_check(const struct policy *p, const char *server, const char *tool,
				      bool read_only_hint, const char *role,
				      enum policy_access *access);

/* The same decision as a yes or no: 1 when allowed (*access set), 0 when not.
 * Never negative, so `if (policy_tool_access(...))` cannot go wrong. */
int policy_tool_access(const struct policy *p, const char *server, const char *tool,
		       bool read_only_hint, const char *role, enum policy_access *access);

/* Whether a call of server.tool by role (allowed: policy_tool_check said
 * POLICY_OK with access) needs a person's yes first: the `tools` entry
 * that decided its access says "approval": true, or it is a write and the
 * role says "approve_writes": true. */
bool policy_tool_approval(const struct policy *p, const char *server, const char *tool,
			  const char *role, enum policy_access access);

/* The policy's own text of tool when a `tools` entry or a role's pattern
 * names server.tool exactly (not only by server.*), else NULL. Borrowed.
 * What the metrics label a call with: a name the policy wrote, never one
 * a server made up. */
const char *policy_tool_named(const struct policy *p, const char *server, const char *tool);

/* Whether any entry or role asks for approvals at all. */
bool policy_approvals_used(const struct policy *p);

/* approvals.command: the absolute path of the approver program, or NULL. */
const char *policy_approvals_command(const struct policy *p);

/* A short text for a verdict ("not allowed by the policy", ...); static. */
const char *policy_verdict_text(enum policy_verdict v);

/* One role. Pointers borrowed from the policy. */
struct policy_role {
	const char *name;	  /* [a-z][a-z0-9_-]*, at most APPL_POLICY_LABEL_MAX */
	const char *const *tools; /* ntools patterns then NULL: "server.tool" or "server.*" */
	size_t ntools;
	bool write;	     /* may call write tools */
	bool approve_writes; /* each of its write calls needs a person's yes */
	bool run_python;     /* `inline` (default true): its clients see run_python */
	/* `code_tools`: the code tools its clients may call, by name, or "*"
	 * alone for every one (docs/code-tools.md). */
	const char *const *code_tools;
	size_t ncode_tools;
	/* `sessions`: its clients may keep an interpreter between cells
	 * (docs/sessions.md). Zero when the role has no sessions. */
	struct policy_sessions {
		unsigned max;	    /* sessions the role holds at once, all its clients */
		unsigned idle_s;    /* a session without a cell this long ends */
		unsigned max_cells; /* cells one session runs; the next ends it */
		unsigned memory_mb; /* what one session may hold between cells */
	} sessions;
};

/* Roles are sorted by name. */
size_t policy_role_count(const struct policy *p);
const struct policy_role *policy_role_get(const struct policy *p, size_t i);
const struct policy_role *policy_role_find(const struct policy *p, const char *name);

/* ---- code tools (docs/code-tools.md) --------------------------------------- */

/* A program signed in the policy, served as an MCP tool of its own. Every
 * pointer is borrowed from the policy. */
struct policy_code_tool {
	const char *name;	     /* an MCP tool name: 1 to APPL_CODE_TOOL_NAME_MAX of
				     * A-Z a-z 0-9 _ -, never run_python */
	const char *description;     /* as written */
	const json_t *input_schema;  /* an object schema ("type": "object") */
	const struct schema *input;  /* it, compiled */
	const json_t *output_schema; /* the same, or NULL: none */
	const struct schema *output;
	const json_t *example; /* arguments for `check` (they pass input), or NULL */
	const char *file;      /* the program's file, resolved like image.layout; NULL:
				* the program is `code` */
	const char *code;      /* the program: `code`, or the file's bytes once
				* policy_code_files_read has read them (NULL before) */
	size_t code_len;
	char sha256[65];	 /* the program's SHA-256, hex: `sha256` for a file */
	const char *const *uses; /* nuses patterns then NULL: server.tool, server.* */
	size_t nuses;
	enum policy_access access; /* read (the default) or write */
};

/* Whether s[0..len) is a code tool's name as far as its characters go: 1
 * to APPL_CODE_TOOL_NAME_MAX of A-Z a-z 0-9 _ - (run_python is refused
 * apart). Pure. */
bool policy_code_tool_name_valid(const char *s, size_t len);

/* Code tools are kept sorted by name. */
size_t policy_code_tool_count(const struct policy *p);
const struct policy_code_tool *policy_code_tool_get(const struct policy *p, size_t i);
const struct policy_code_tool *policy_code_tool_find(const struct policy *p, const char *name);

/* Read each code tool's `file` (at most APPL_CELL_CODE_MAX bytes, UTF-8
 * without NUL) and hold it to its `sha256`: a file that differs refuses
 * the policy, naming the file and both digests. After this every code
 * tool has its code. load.h calls it after policy_parse; 0, or negative
 * with err. */
int policy_code_files_read(struct policy *p, struct appl_err *err);

/* Whether role may call the code tool name: POLICY_OK; POLICY_DENY_NO_ROLE;
 * POLICY_DENY_NO_TOOL (there is none); POLICY_DENY_ROLE (the role does not
 * list it, by name or "*"); POLICY_DENY_WRITE (the tool writes, and the
 * role has no write). *out (may be NULL) is the tool when it exists. */
enum policy_verdict policy_code_tool_allowed(const struct policy *p, const char *role,
					     const char *name, const struct policy_code_tool **out);

/* Who makes a call: the cell of a role, or the program of code tool tool
 * (NULL: the role's own cell) a client of role invoked. */
struct policy_caller {
	const char *role;
	const struct policy_code_tool *tool;
	/* `check`'s run of the program's example: a write tool is refused
	 * (POLICY_DENY_CHECK) whatever the tool's access. */
	bool no_writes;
};

/* policy_tool_check for caller: a role's cell as that function decides;
 * a code tool's program with the tool's `uses` in place of the role's
 * patterns (POLICY_DENY_USES) and its access in place of the role's write
 * (POLICY_DENY_WRITE), whatever the role's own patterns say. */
enum policy_verdict policy_call_check(const struct policy *p, const struct policy_caller *caller,
				      const char *server, const char *tool, bool read_only_hint,
				      enum policy_access *access);

/* policy_resources_allowed for caller: for a code tool's program, a use
 * of "server.*". */
bool policy_call_resources(const struct policy *p, const struct policy_caller *caller,
			   const char *server);

/* ---- clients -------------------------------------------------------------- */

/* clients.default_role: the role of a stdio client; NULL when the policy
 * names none (a stdio client then may call nothing). Borrowed. */
const char *policy_client_default_role(const struct policy *p);

#define POLICY_TOKEN_HASH_LEN 32

/* An HTTP client: a bearer token known only by its SHA-256. */
struct policy_token {
	const char *name; /* [a-z][a-z0-9_-]*, unique; for the audit log */
	unsigned char sha256[POLICY_TOKEN_HASH_LEN];
	const char *role; /* names a role of the policy */
};

/* Tokens in file order; names and hashes are unique. */
size_t policy_token_count(const struct policy *p);
const struct policy_token *policy_token_get(const struct policy *p, size_t i);

/* The token whose hash is sha256 (POLICY_TOKEN_HASH_LEN bytes, borrowed), or
 * NULL. Every token is compared in full, in constant time, so the time taken
 * does not tell how much of a guessed hash was right. */
const struct policy_token *policy_token_match(const struct policy *p, const unsigned char *sha256);

/* Whether s[0..len) is a role or client (token) name: [a-z][a-z0-9_-]*, at
 * most APPL_POLICY_LABEL_MAX. Pure. */
bool policy_label_valid(const char *s, size_t len);

/* ---- serving MCP over HTTP (`http`) ---------------------------------------- */

enum policy_listen_kind {
	POLICY_LISTEN_INET4, /* IPV4:PORT */
	POLICY_LISTEN_INET6, /* [IPV6]:PORT */
	POLICY_LISTEN_UNIX,  /* unix:ABSOLUTE_PATH */
};

/* Room for the longest IPv6 text and its NUL (INET6_ADDRSTRLEN). */
#define POLICY_LISTEN_ADDRESS_MAX 46

/* One listen address. Pointers borrowed from the policy. */
struct policy_listen {
	enum policy_listen_kind kind;
	const char *text; /* as written: "127.0.0.1:8080", "[::1]:8080", "unix:/run/a.sock" */
	/* inet: the address as written, without brackets or port ("::1");
	 * unix: empty */
	char address[POLICY_LISTEN_ADDRESS_MAX];
	unsigned char addr[16]; /* inet: network order; 4 bytes for inet4 */
	uint16_t port;		/* inet: 1..65535; unix: 0 */
	const char *path;	/* unix: the socket's absolute path; inet: NULL */
	bool local; /* reachable from this host only: 127.0.0.0/8, ::1 or a unix socket */
};

/* The `http` section. Pointers borrowed from the policy. */
/* http.oauth: JWT access tokens of one authorization server (docs/http.md,
 * OAuth). Strings borrowed from the policy. */
struct policy_oauth {
	const char *issuer;	 /* iss, exactly; an http(s) URL */
	const char *audience;	 /* aud must hold it: this resource's URL (RFC 8707) */
	const char *jwks_path;	 /* an absolute path, or NULL */
	const char *jwks_url;	 /* or this (http:// only to loopback), never both */
	const char *role_claim;	 /* the claim naming the token's role */
	unsigned skew_s;	 /* leeway for exp, nbf and iat */
	unsigned jwks_refresh_s; /* jwks_url fetched again this often */
};

#define POLICY_OAUTH_ROLE_CLAIM_DEFAULT "appliance_role"

struct policy_http {
	const struct policy_listen *listen; /* nlisten (1..APPL_POLICY_HTTP_LISTEN_MAX), unique */
	size_t nlisten;
	const char *path;	    /* the endpoint, "/mcp" unless the policy says */
	const char *const *origins; /* norigins then NULL: http(s)://host[:port] */
	size_t norigins;	    /* 0: only requests without an Origin are served */
	const char *const *hosts;   /* nhosts then NULL: the Host values served */
	size_t nhosts;
	bool hosts_default;   /* hosts is the default (the policy gave none) */
	const char *tls_cert; /* absolute paths, or both NULL: no TLS */
	const char *tls_key;
	/* metrics_listen: where GET /metrics is served, never one of listen;
	 * local (127.0.0.0/8, ::1 or a unix socket): it asks for no token.
	 * NULL: no metrics listener. */
	const struct policy_listen *metrics;
	const struct policy_oauth *oauth; /* NULL: static tokens only */
};

#define POLICY_HTTP_PATH_DEFAULT "/mcp"

/* The `http` section, or NULL when the policy has none (then nothing is
 * served over HTTP). Borrowed. Without allowed_hosts, hosts holds
 * `localhost`, `127.0.0.1` and `[::1]`, each bare and with each inet listen
 * port, and each inet listen address as written, each once. */
const struct policy_http *policy_http(const struct policy *p);

/* Whether addr may replace http.listen for one process (`run --listen`,
 * a replica): written as a listen address is, loopback or with the
 * policy's TLS, and the policy names http.allowed_hosts (its default
 * names the policy's own addresses). 0, or -EINVAL with err. */
int policy_http_listen_check(const struct policy *p, const char *addr, struct appl_err *err);

/* http.metrics_listen as written ("127.0.0.1:9464", "unix:/run/m.sock"),
 * or NULL when the policy has none. Borrowed. It is read when `run`
 * starts, and only then: a policy that would change it needs a restart. */
const char *policy_http_metrics_listen(const struct policy *p);

/* Whether a and b name the same metrics listener: both none, or one
 * address (compared as addresses: [::1] and [0:0:0:0:0:0:0:1] are one). */
bool policy_http_metrics_same(const struct policy *a, const struct policy *b);

/* What `run` checks before it serves HTTPS: http.tls.key is a regular file
 * owned by the effective uid with no permission for group or others (a key
 * others can read is a key others have), and http.tls.cert a regular file.
 * 0 when they are, or when there is no http.tls; else a negative code with
 * err saying which file and why. Looks at the disk (stat), reads nothing. */
int policy_http_tls_check(const struct policy *p, struct appl_err *err);

/* ---- comparing two policies (a reload) ----------------------------------- */

/* Whether a's and b's top-level member top (key of it, when key is not
 * NULL) are equal as written: both absent, or the same JSON value. Pure. */
bool policy_part_same(const struct policy *a, const struct policy *b, const char *top,
		      const char *key);

/* Why the running policy a cannot become b without a restart: the first
 * part that differs among those read only at start (the version, the
 * deployment, runtime, audit, http, telemetry, and the audit and HTTP
 * limits), named
 * as its field ("runtime", "limits.http_body_kb"); NULL when a reload may
 * take b. Pure; borrowed static text. */
const char *policy_reload_restart(const struct policy *a, const struct policy *b);

/* ---- replicas (docs/scale-out.md) ------------------------------------------ */

/* cluster.ledger: the Redis the replicas share ("redis://HOST:PORT[/DB]" or
 * "unix:/PATH"), or NULL when the policy has no `cluster` section. Read at
 * start only. Borrowed. */
const char *policy_cluster_ledger(const struct policy *p);

/* ---- telemetry -------------------------------------------------------------- */

#define POLICY_SERVICE_NAME_DEFAULT "appliance"

/* telemetry.otlp_endpoint: the OTLP/HTTP collector's base URL (spans go to
 * it + "/v1/traces"; http:// only to a loopback address), or NULL: no
 * traces. Read at start only (a reload that changes telemetry needs a
 * restart). */
const char *policy_telemetry_endpoint(const struct policy *p);

/* telemetry.service_name (POLICY_SERVICE_NAME_DEFAULT when left out), or
 * NULL without telemetry. */
const char *policy_telemetry_service(const struct policy *p);

/* ---- audit ---------------------------------------------------------------- */

/* audit.path as written: absolute, or NULL when the policy has no
 * `audit`. */
const char *policy_audit_path(const struct policy *p);

/* What audit.path's file name may hold, replaced by the appliance's name. */
#define POLICY_AUDIT_NAME "{name}"

/* The name an appliance of p goes by without run --name: its deployment,
 * or "appliance" for a policy that names none. Borrowed. */
const char *policy_default_name(const struct policy *p);

/* The audit log's path for the appliance called name (NULL: the default
 * name): audit.path with {name} replaced. 0, -ENOENT (no audit log), or
 * -ENAMETOOLONG. */
int policy_audit_path_for(const struct policy *p, const char *name, char *out, size_t cap);

/* audit.seal: seal lines with the key `appliance audit init` made. */
bool policy_audit_seal(const struct policy *p);

#endif
