/* limits.h: every hard cap of the appliance, in one place.
 *
 * Each byte stream that comes from outside (a client, a sandbox, an upstream
 * server, a file on disk) is bounded by one of the names below, checked before
 * anything is allocated for it. The policy may lower a limit, or raise one up
 * to its _CEIL; it can never go past the ceiling. Sizes are in bytes unless the
 * name says otherwise.
 */
#ifndef APPL_BASE_LIMITS_H
#define APPL_BASE_LIMITS_H

/* ---- errors and logs ---------------------------------------------------- */
#define APPL_ERR_MSG_MAX    512	 /* one error message, NUL included */
#define APPL_TOOL_ERROR_MAX 500	 /* a ToolError message seen by the code */
#define APPL_LOG_LINE_MAX   2048 /* one log line on stderr */

/* ---- JSON (every parser) ------------------------------------------------ */
/* jansson's own nesting limit is fixed at 2048 when it is built; ours is
 * checked by a pre-scan before jansson sees the bytes. */
#define APPL_JSON_DEPTH_MAX 64

/* ---- downstream: MCP client to appliance -------------------------------- */
#define APPL_RPC_MESSAGE_MAX (4u * 1024 * 1024) /* one JSON-RPC message */
#define APPL_CELL_CODE_MAX   (256u * 1024)	/* run_python's code */

/* One answer the appliance writes: run_python's carries the files a cell
 * left (limits.files) besides its result object. It must fit an HTTP
 * stream's queue (HTTP_FRONT_STREAM_MAX, 16 MiB) with the event's framing,
 * and a stdio client's (MCP_STDIO_QUEUE_MAX). */
#define APPL_RPC_ANSWER_MAX (15u * 1024 * 1024)
/* What run_python's answer holds besides the files, at its largest: the
 * result object twice (as structuredContent, and escaped once more as the
 * text item), with APPL_MAX_OUTPUT_BYTES_CEIL of output whose every byte
 * escapes to six (seven in the text item), the result value and the
 * files' list. */
#define APPL_RUN_ANSWER_BASE_MAX (4u * 1024 * 1024)

/* ---- runner protocol: sandbox to host ----------------------------------- */
/* 16 KiB of arguments made of control characters escape to about 96 KiB;
 * the cap leaves room for that and the envelope. */
#define APPL_RUNNER_LINE_MAX (128u * 1024)
/* Host to runner, queued: room for the largest host line (a cell line) and
 * more; it grows only as far as needed. */
#define APPL_RUNNER_OUTBUF_MAX (APPL_RUNNER_HOST_LINE_MAX + 1024u * 1024)
#define APPL_CELL_RESULT_MAX   (64u * 1024) /* a cell's result value */
#define APPL_TRACEBACK_KEEP    2048	    /* tail of a traceback kept */

/* ---- upstream MCP servers ----------------------------------------------- */
#define APPL_UPSTREAM_MESSAGE_MAX     (4u * 1024 * 1024)
#define APPL_UPSTREAM_STDERR_LINE_MAX 1024 /* logged, escaped, cut */
#define APPL_UPSTREAM_TOOLS_MAX	      1024 /* tools per server */
#define APPL_UPSTREAM_PAGES_MAX	      64   /* tools/list pages followed */

/* ---- files read at start ------------------------------------------------ */
#define APPL_POLICY_FILE_MAX	(256u * 1024)
#define APPL_SIGNATURE_FILE_MAX 4096
#define APPL_KEY_FILE_MAX	4096

/* ---- OCI image layout ---------------------------------------------------- */
#define APPL_IMAGE_MANIFEST_MAX (64u * 1024)		    /* manifest blob */
#define APPL_IMAGE_CONFIG_MAX	(256u * 1024)		    /* config blob */
#define APPL_IMAGE_SBOM_MAX	(16u * 1024 * 1024)	    /* the SBOM beside a layout */
#define APPL_IMAGE_INDEX_MAX	(64u * 1024)		    /* index.json (read for messages) */
#define APPL_IMAGE_LAYERS_MAX	16			    /* layers per manifest */
#define APPL_IMAGE_LAYER_MAX	(1024ull * 1024 * 1024)	    /* one layer blob */
#define APPL_IMAGE_UNPACKED_MAX (4ull * 1024 * 1024 * 1024) /* all files unpacked */
#define APPL_IMAGE_ENTRIES_MAX	200000			    /* tar entries, all layers */
#define APPL_IMAGE_PATH_MAX	1024			    /* one entry name */

/* ---- per-cell limits: default and ceiling (policy `limits`) ------------- */
#define APPL_DEADLINE_S_DEF	    90
#define APPL_DEADLINE_S_CEIL	    3600
#define APPL_MAX_CALLS_DEF	    200
#define APPL_MAX_CALLS_CEIL	    10000
#define APPL_CALL_TIMEOUT_S_DEF	    30
#define APPL_CALL_TIMEOUT_S_CEIL    600
#define APPL_MAX_ARGS_BYTES_DEF	    (16u * 1024)
#define APPL_MAX_ARGS_BYTES_CEIL    (256u * 1024)
#define APPL_MAX_RESULT_BYTES_DEF   (64u * 1024)
#define APPL_MAX_RESULT_BYTES_CEIL  (1024u * 1024)
#define APPL_MAX_OUTPUT_BYTES_DEF   (8u * 1024) /* output kept */
#define APPL_MAX_OUTPUT_BYTES_CEIL  (256u * 1024)
#define APPL_STOP_OUTPUT_BYTES_DEF  (1024u * 1024) /* output that stops a run */
#define APPL_STOP_OUTPUT_BYTES_CEIL (16u * 1024 * 1024)
/* A sandbox must say ready within boot_s of its start (runsc, the
 * Sentry, the interpreter and the runner's imports); a slow host (nested
 * virtualisation, emulation, ptrace) may need more. */
#define APPL_BOOT_S_DEF	    10
#define APPL_BOOT_S_CEIL    300
#define APPL_MEMORY_MB_DEF  256
#define APPL_MEMORY_MB_MIN  16
#define APPL_MEMORY_MB_CEIL 4096
#define APPL_PIDS_DEF	    64
#define APPL_PIDS_CEIL	    1024
#define APPL_NOFILE_DEF	    64
#define APPL_NOFILE_CEIL    4096
#define APPL_TMPFS_MB_DEF   16
#define APPL_TMPFS_MB_CEIL  1024
/* A role's sessions (docs/sessions.md): kept interpreters between cells. */
#define APPL_SESSION_MAX_MIN	    1
#define APPL_SESSION_MAX_DEF	    4
#define APPL_SESSION_MAX_CEIL	    64
#define APPL_SESSION_IDLE_S_MIN	    1
#define APPL_SESSION_IDLE_S_DEF	    600
#define APPL_SESSION_IDLE_S_CEIL    86400
#define APPL_SESSION_MAX_CELLS_MIN  1
#define APPL_SESSION_MAX_CELLS_DEF  500
#define APPL_SESSION_MAX_CELLS_CEIL 100000
#define APPL_SESSION_MEMORY_MB_MIN  64
#define APPL_SESSION_MEMORY_MB_DEF  512
#define APPL_SESSION_MEMORY_MB_CEIL 65536
/* Sessions of the whole appliance at once, every role's together. */
#define APPL_SESSIONS_MAX 256u
/* An ended session's handle is still answered with why it ended for this
 * long, and at most this many are remembered (the oldest go first); after
 * that it is answered as one that never existed. */
#define APPL_SESSIONS_ENDED_S	3600u
#define APPL_SESSIONS_ENDED_MAX 1024u
#define APPL_CONCURRENCY_DEF	16 /* calls in flight per cell */
#define APPL_CONCURRENCY_CEIL	256
#define APPL_CELLS_DEF		4 /* cells in flight */
#define APPL_CELLS_CEIL		64
#define APPL_POOL_DEF		2 /* warm sandboxes */
#define APPL_POOL_CEIL		32
/* Protocol lines a run's runner may send (every `out`, `call`, `ready` and
 * `done`): a line that counts toward no other cap, such as an empty `out`,
 * still costs one. A busy honest run sends its calls and a few hundred
 * output lines (each up to 4096 characters). */
#define APPL_MAX_RUNNER_LINES_DEF  20000u
#define APPL_MAX_RUNNER_LINES_CEIL 1000000u
#define APPL_RUNNER_LINES_SPARE	   64u /* lines a run needs besides its calls, at least */
/* The audit log (docs/audit.md): a seal at least every this many lines and
 * seconds, and a new file before one would pass this many KiB. */
#define APPL_AUDIT_SEAL_LINES_DEF  1000u
#define APPL_AUDIT_SEAL_LINES_CEIL 1000000u
#define APPL_AUDIT_SEAL_S_DEF	   300u
#define APPL_AUDIT_SEAL_S_CEIL	   86400u
#define APPL_AUDIT_ROTATE_KB_DEF   65536u    /* 64 MiB */
#define APPL_AUDIT_ROTATE_KB_CEIL  16777216u /* 16 GiB */
/* audit verify --key: the newest seal of a log that does not rest after a
 * stop may be twice audit_seal_s old (the timer's period and its due
 * time), and this many seconds more (a busy loop, clocks of two hosts). */
#define APPL_AUDIT_SEAL_LATE_S 60u
/* Approvals: how long one question waits for its answer, and how many
 * questions one run may ask. */
#define APPL_APPROVAL_TIMEOUT_S_DEF  120u
#define APPL_APPROVAL_TIMEOUT_S_CEIL 3600u
#define APPL_MAX_APPROVALS_DEF	     10u
#define APPL_MAX_APPROVALS_CEIL	     1000u

/* Files a cell leaves in /out (limits.files): how many come back, the
 * largest one, and all of them together. Each file costs up to twice its
 * size in run_python's answer (text escaped, or base64), which must fit
 * APPL_RPC_ANSWER_MAX beside the rest of the answer: hence the ceilings
 * (pkg/policy/limits.c asserts it). */
#define APPL_FILES_MAX_COUNT_DEF	8u
#define APPL_FILES_MAX_COUNT_CEIL	64u
#define APPL_FILES_MAX_BYTES_DEF	(1024u * 1024)
#define APPL_FILES_MAX_BYTES_CEIL	(5u * 1024 * 1024)
#define APPL_FILES_MAX_TOTAL_BYTES_DEF	(4u * 1024 * 1024)
#define APPL_FILES_MAX_TOTAL_BYTES_CEIL (5u * 1024 * 1024)

/* One HTTP client's share of the cell slots when the policy does not name
 * it: one fewer than limits.cells (at least 1), so one client's burst never
 * holds every slot and another client's cell starts at once. */
#define APPL_HTTP_CELLS_PER_CLIENT_FOR(cells) ((cells) > 1u ? (cells)-1u : 1u)

/* Serving MCP over HTTP (policy `http`; the limits are in `limits` too):
 * open connections, sessions one bearer token may hold, cells one client
 * may have in flight (more wait their turn) and waiting, the request body
 * (KiB), a session's idle expiry, and the time a request's headers and body
 * have to arrive (a client that trickles bytes holds a connection). */
#define APPL_HTTP_CONNECTIONS_DEF	  256u
#define APPL_HTTP_CONNECTIONS_CEIL	  4096u
#define APPL_HTTP_SESSIONS_PER_TOKEN_DEF  32u
#define APPL_HTTP_SESSIONS_PER_TOKEN_CEIL 1024u
#define APPL_HTTP_CELLS_PER_CLIENT_DEF	  APPL_HTTP_CELLS_PER_CLIENT_FOR(APPL_CELLS_DEF)
#define APPL_HTTP_CELLS_PER_CLIENT_CEIL	  64u
#define APPL_HTTP_WAITING_PER_CLIENT_DEF  64u
#define APPL_HTTP_WAITING_PER_CLIENT_CEIL 1024u
#define APPL_HTTP_BODY_KB_DEF		  2048u
#define APPL_HTTP_BODY_KB_CEIL		  4096u /* APPL_RPC_MESSAGE_MAX: more buys nothing */
#define APPL_HTTP_IDLE_S_DEF		  600u
#define APPL_HTTP_IDLE_S_CEIL		  86400u
#define APPL_HTTP_SLOW_S_DEF		  30u
#define APPL_HTTP_SLOW_S_CEIL		  600u
/* The first SIGTERM over HTTP drains: runs in flight have this long to end
 * before the appliance stops anyway; 0: it stops at once. */
#define APPL_HTTP_DRAIN_S_DEF  30u
#define APPL_HTTP_DRAIN_S_CEIL 3600u
/* MCP tasks (docs/tasks.md): how long a task and its result are kept, and
 * how many one client may hold (working or kept); each result is at most
 * APPL_RPC_ANSWER_MAX. */
#define APPL_TASK_TTL_S_DEF	   3600u
#define APPL_TASK_TTL_S_CEIL	   86400u
#define APPL_TASKS_PER_CLIENT_DEF  16u
#define APPL_TASKS_PER_CLIENT_CEIL 64u
#define APPL_HTTP_HEADER_BYTES	   (16u * 1024) /* a request's head: past it, 431 */
/* A WWW-Authenticate value: Bearer, an error and resource_metadata="URL",
 * the URL built from http.oauth.audience (APPL_POLICY_URL_MAX) */
#define APPL_HTTP_CHALLENGE_MAX (5u * 1024)
#define APPL_HTTP_TLS_FILE_MAX	(64u * 1024) /* a PEM file read at start */
/* Runs waiting for a slot, all HTTP clients together (each is also held to
 * limits.http_waiting_per_client): one client's queue cannot fill it. */
#define APPL_HTTP_RUNS_WAITING_MAX 1024u

/* Memory the sandbox's own gVisor kernel (Sentry, gofer) may use on top of
 * what the code may use, when the memory cgroup is applied as root. */
#define APPL_GVISOR_ALLOWANCE_MB 192

/* ---- JSON Schema validator (pkg/schema) ---------------------------------- */
/* A tool's input schema comes from an upstream server, which may be hostile,
 * and so do the arguments checked against it: compiling and validating are
 * both bounded, and a schema past a cap is refused rather than half-checked. */
#define APPL_SCHEMA_DEPTH_MAX	      APPL_JSON_DEPTH_MAX /* nesting of schema and instance */
#define APPL_SCHEMA_NODES_MAX	      4096		  /* subschemas compiled per schema */
#define APPL_SCHEMA_MEMORY_MAX	      (8u * 1024 * 1024)  /* compiled form of one schema */
#define APPL_SCHEMA_URI_MAX	      2048		  /* one $id or $ref, resolved */
#define APPL_SCHEMA_REGEXES_MAX	      256		  /* patterns compiled per schema */
#define APPL_SCHEMA_PATTERN_MAX	      1024		  /* bytes of one pattern */
#define APPL_SCHEMA_REGEX_NEST_MAX    64		  /* parentheses nesting in a pattern */
#define APPL_SCHEMA_EVAL_DEPTH_MAX    256		  /* nested subschema evaluations */
#define APPL_SCHEMA_VISITS_MAX	      100000		  /* subschemas evaluated per validation */
#define APPL_SCHEMA_COMPARES_MAX      2000000 /* values compared (enum, const, uniqueItems) */
#define APPL_SCHEMA_REGEX_CALLS_MAX   4096    /* regex matches per validation */
#define APPL_SCHEMA_REGEX_MATCH_LIMIT 20000   /* PCRE2 match limit, per match */
#define APPL_SCHEMA_REGEX_DEPTH_LIMIT 1000    /* PCRE2 backtracking depth, per match */
#define APPL_SCHEMA_REGEX_HEAP_KIB    1024    /* PCRE2 heap, per match */
#define APPL_SCHEMA_NAME_SHOWN_MAX    64      /* a name quoted in a message */
#define APPL_SCHEMA_PATH_SHOWN_MAX    200     /* an instance path in a message */

/* ---- runner protocol (cell) ---------------------------------------------- */
/* The host to runner direction: a `cell` line carries code (escaping can make
 * it six times longer) and the tool list; a `result` line one tool result. */
#define APPL_RUNNER_HOST_LINE_MAX (4u * 1024 * 1024)
#define APPL_RUNNER_TOOL_NAME_MAX 256u	       /* call.tool, bytes */
#define APPL_RUNNER_URI_MAX	  4096u	       /* read.uri, bytes: a resource URI */
#define APPL_RUNNER_PY_NAME_MAX	  64u	       /* a tool's ns or fn name */
#define APPL_RUNNER_DOC_MAX	  (16u * 1024) /* a tool's stub text */
#define APPL_RUNNER_TOOLS_MAX	  1024u	       /* tools given to one cell */
/* done.error: APPL_TRACEBACK_KEEP characters, at most 4 UTF-8 bytes each. */
#define APPL_RUNNER_ERROR_MAX (4u * APPL_TRACEBACK_KEEP)
/* A `fail` line's error: runner.py's FAIL_ERROR_MAX characters, as UTF-8. */
#define APPL_RUNNER_FAIL_MAX (4u * 1024u)
/* Nesting of a value the runner sends (a deeper cell result becomes its
 * repr); well inside APPL_JSON_DEPTH_MAX with the envelope around it. */
#define APPL_RUNNER_VALUE_DEPTH_MAX 32u
/* Files out of /out (docs/runner-protocol.md, `file` and `skip`): the raw
 * bytes of one `file` line (base64 makes them 64 KiB, far below the line
 * cap), a name as the runner sends it (a Linux name is at most 255 bytes;
 * each byte that is not UTF-8 becomes a 3-byte U+FFFD), and the entries of
 * /out the runner looks at: one more is reported as `max_entries`, and a
 * runner that reports more than that breaks the protocol. */
#define APPL_RUNNER_FILE_CHUNK_MAX   (48u * 1024)
#define APPL_RUNNER_FILE_NAME_MAX    1024u
#define APPL_RUNNER_FILE_ENTRIES_MAX 128u
/* A name as the client sees it: a safe basename, at most this many bytes. */
#define APPL_FILE_NAME_MAX 100u
/* Runner lines the files of one run may take, honestly sent: a line per
 * APPL_RUNNER_FILE_CHUNK_MAX bytes of each file (at least one per file),
 * and one per entry left out. They count toward limits.max_runner_lines
 * like every line, so a policy's budget must leave room for them. */
#define APPL_FILES_LINES(count, total)                                                             \
	((total) / APPL_RUNNER_FILE_CHUNK_MAX + (count) + APPL_RUNNER_FILE_ENTRIES_MAX + 1)

/* ---- sandbox ------------------------------------------------------------- */
/* The oldest gVisor release the appliance was tested with (YYYYMMDD.N, as in
 * `runsc --version`): an older runsc is refused at start. 20240729.0 is
 * Debian's runsc for Debian 12 in bookworm-backports, the first with the
 * systrap platform in Debian. A build for a baseline measurement may set
 * another (-DAPPL_RUNSC_TESTED_DATE=...). */
#ifndef APPL_RUNSC_TESTED_DATE
#define APPL_RUNSC_TESTED_DATE	20240729u
#define APPL_RUNSC_TESTED_PATCH 0u
#endif
/* The first release whose Sentry is known here to mount an EROFS image as
 * the root (runsc's rootfs hint) and restore it: older ones get the rootfs
 * directory through a gofer. */
#define APPL_RUNSC_EROFS_DATE 20240729u
/* The first release known here to take --directfs=false: its Sentry then
 * opens no host file itself (every file through a gofer or its own EROFS
 * image) and its seccomp filter drops the host file-system calls. Older
 * releases have no directfs to turn off. */
#define APPL_RUNSC_NO_DIRECTFS_DATE   20240729u
#define APPL_MKFS_EROFS_TIMEOUT_MS    120000 /* building the image once per digest */
#define APPL_RUNSC_VERSION_OUT_MAX    4096u  /* what `runsc --version` may print */
#define APPL_RUNSC_VERSION_TIMEOUT_MS 10000
#define APPL_SANDBOX_DEV_TMPFS_KB     64u     /* the /dev tmpfs: device nodes only */
#define APPL_SANDBOX_CPU_PERIOD_US    100000u /* cgroup CPU period; quota = 1 CPU */
#define APPL_SANDBOX_PATH_MAX	      4096u   /* rootfs and cgroups paths */

/* ---- cell run ------------------------------------------------------------ */
#define APPL_RUNNER_READ_BLOCK (64u * 1024) /* one read from the runner */

/* ---- policy signatures --------------------------------------------------- */
/* The files themselves are capped above (APPL_POLICY_FILE_MAX,
 * APPL_SIGNATURE_FILE_MAX, APPL_KEY_FILE_MAX); these bound what is in them
 * and around them. */
#define APPL_SIG_COMMENT_MAX	 1024 /* an untrusted comment line, prefix included */
#define APPL_TRUSTED_COMMENT_MAX 1024 /* the trusted comment, prefix excluded */
#define APPL_POLICY_NAME_MAX	 255  /* file:NAME in the trusted comment */
#define APPL_TRUST_KEYS_MAX	 64   /* keys in one trust directory */
#define APPL_TRUST_ENTRIES_MAX	 1024 /* entries read from one trust directory */
#define APPL_DIR_PATH_DEPTH_MAX	 64   /* components of a trust or state directory path */

/* The rollback floor (pkg/policy/state.c): one line per deployment, the
 * highest serial accepted for it. A line is the name, the serial (at most
 * 20 digits), the SHA-256 in hex (64), the key id (16) and the time (20),
 * with separators; the file holds the header and at most
 * APPL_POLICY_DEPLOYMENTS_MAX lines (about 12 MiB when full). */
#define APPL_POLICY_DEPLOYMENT_MAX  64
#define APPL_POLICY_DEPLOYMENTS_MAX 65536u
#define APPL_POLICY_FLOOR_LINE_MAX                                                                 \
	(APPL_POLICY_DEPLOYMENT_MAX + 1 + 20 + 1 + 64 + 1 + 16 + 1 + 20 + 1)
#define APPL_POLICY_STATE_FILE_MAX (64u + APPL_POLICY_DEPLOYMENTS_MAX * APPL_POLICY_FLOOR_LINE_MAX)

/* ---- policy document (pkg/policy) ----------------------------------------- */
/* The least value of each per-cell limit above: a policy sets a limit
 * anywhere from its _MIN to its _CEIL (APPL_MEMORY_MB_MIN is above). */
#define APPL_DEADLINE_S_MIN	    1
#define APPL_MAX_CALLS_MIN	    1
#define APPL_CALL_TIMEOUT_S_MIN	    1
#define APPL_MAX_ARGS_BYTES_MIN	    1
#define APPL_MAX_RESULT_BYTES_MIN   1
#define APPL_MAX_OUTPUT_BYTES_MIN   1 /* and at most stop_output_bytes */
#define APPL_STOP_OUTPUT_BYTES_MIN  1
#define APPL_PIDS_MIN		    1
#define APPL_NOFILE_MIN		    16 /* the interpreter and the runner's private descriptors */
#define APPL_TMPFS_MB_MIN	    1
#define APPL_CONCURRENCY_MIN	    1
#define APPL_CELLS_MIN		    1
#define APPL_POOL_MIN		    0 /* no warm sandbox: every cell boots cold */
#define APPL_BOOT_S_MIN		    1
#define APPL_MAX_RUNNER_LINES_MIN   APPL_RUNNER_LINES_SPARE
#define APPL_AUDIT_SEAL_LINES_MIN   1
#define APPL_AUDIT_SEAL_S_MIN	    1
#define APPL_AUDIT_ROTATE_KB_MIN    16 /* room for a few lines of 8 KiB at most */
#define APPL_APPROVAL_TIMEOUT_S_MIN 1
#define APPL_MAX_APPROVALS_MIN	    0 /* every gated call is refused */
/* limits.files (max_bytes at most max_total_bytes) */
#define APPL_FILES_MAX_COUNT_MIN       0 /* no file comes back; /out is still emptied */
#define APPL_FILES_MAX_BYTES_MIN       1
#define APPL_FILES_MAX_TOTAL_BYTES_MIN 1

/* The least value of each HTTP limit. */
#define APPL_HTTP_CONNECTIONS_MIN	 1
#define APPL_HTTP_SESSIONS_PER_TOKEN_MIN 1
#define APPL_HTTP_CELLS_PER_CLIENT_MIN	 1
#define APPL_HTTP_WAITING_PER_CLIENT_MIN 1
/* 64 KiB: room for a short program and the envelope; the default must hold
 * the longest program escaped at its worst (pkg/policy/limits.c asserts
 * it). */
#define APPL_HTTP_BODY_KB_MIN 64
#define APPL_HTTP_IDLE_S_MIN  10
#define APPL_HTTP_SLOW_S_MIN  1
#define APPL_HTTP_DRAIN_S_MIN 0
/* limits.task_ttl_s must be at least limits.deadline_s; left out, it is at
 * least the deadline and this, and a task's ttl is never less (unless the
 * policy's ttl is). */
#define APPL_TASK_TTL_SPARE_S	  60u
#define APPL_TASK_TTL_S_MIN	  60u
#define APPL_TASKS_PER_CLIENT_MIN 1u

/* What one policy may hold. The document needs 4 levels of nesting, and a
 * code tool's schemas begin at the 4th: 24 leaves a schema 20 levels;
 * more is refused before jansson builds anything. */
#define APPL_POLICY_DEPTH_MAX	     24
#define APPL_POLICY_SERVERS_MAX	     64
#define APPL_POLICY_SERVER_NAME_MAX  32	  /* becomes a Python namespace */
#define APPL_POLICY_TOOL_NAME_MAX    128  /* the tool part of a server.tool pattern */
#define APPL_POLICY_TOOL_RULES_MAX   1024 /* entries of `tools` */
#define APPL_POLICY_ROLES_MAX	     64
#define APPL_POLICY_ROLE_TOOLS_MAX   1024 /* patterns of one role */
#define APPL_POLICY_LABEL_MAX	     32	  /* a role or client name */
#define APPL_POLICY_TOKENS_MAX	     256  /* HTTP clients */
#define APPL_POLICY_PATH_MAX	     1024 /* a path written in the policy */
#define APPL_PRELOAD_MAX	     16	  /* image.preload: modules named */
#define APPL_PRELOAD_NAME_MAX	     128  /* bytes of one module name */
#define APPL_CODE_TOOLS_MAX	     64	  /* code_tools entries */
#define APPL_CODE_TOOL_NAME_MAX	     64	  /* an MCP tool name of ours */
#define APPL_CODE_TOOL_DESC_MAX	     4096 /* a code tool's description, bytes */
#define APPL_CODE_TOOL_USES_MAX	     256  /* patterns of one code tool's uses */
#define APPL_POLICY_ARGV_MAX	     64	  /* elements of a stdio server's command */
#define APPL_POLICY_ARG_MAX	     4096 /* one element */
#define APPL_POLICY_ENV_MAX	     64	  /* environment names passed to one server */
#define APPL_POLICY_ENV_NAME_MAX     128
#define APPL_POLICY_URL_MAX	     2048
#define APPL_POLICY_HEADERS_MAX	     32 /* per HTTP server */
#define APPL_POLICY_HEADER_NAME_MAX  128
#define APPL_POLICY_HEADER_VALUE_MAX 4096 /* the template, before {env:NAME} is filled */
/* The `http` section: where and how the appliance serves MCP over HTTP. */
#define APPL_POLICY_HTTP_LISTEN_MAX 8 /* listen addresses */
/* A listen address as written, bounded before it is read: "unix:" and a
 * path (each kind then has its own cap). */
#define APPL_POLICY_HTTP_LISTEN_TEXT (5 + APPL_POLICY_PATH_MAX)
#define APPL_POLICY_UNIX_PATH_MAX    107 /* sun_path holds 108 bytes, NUL included */
#define APPL_POLICY_HTTP_PATH_MAX    256 /* the endpoint's path */
/* http.oauth: the role claim's name; the clock skew allowed for exp, nbf
 * and iat; how often a jwks_url is fetched again. */
#define APPL_POLICY_OAUTH_CLAIM_MAX	 64
#define APPL_POLICY_OAUTH_SKEW_S_DEF	 60u
#define APPL_POLICY_OAUTH_SKEW_S_CEIL	 300u
#define APPL_POLICY_OAUTH_REFRESH_S_DEF	 300u
#define APPL_POLICY_OAUTH_REFRESH_S_MIN	 60u
#define APPL_POLICY_OAUTH_REFRESH_S_CEIL 86400u
#define APPL_POLICY_HTTP_ORIGINS_MAX	 32
#define APPL_POLICY_HTTP_HOSTS_MAX	 64
#define APPL_POLICY_HTTP_HOST_MAX	 255 /* a Host header value, host[:port] */
/* An origin: "https://" and a host[:port] of at most APPL_POLICY_HTTP_HOST_MAX. */
#define APPL_POLICY_HTTP_ORIGIN_MAX (8 + APPL_POLICY_HTTP_HOST_MAX)

/* ---- jsonrpc (pkg/jsonrpc) ----------------------------------------------- */
/* A whole message is capped by its caller (APPL_RPC_MESSAGE_MAX downstream,
 * APPL_UPSTREAM_MESSAGE_MAX upstream); these bound the parts echoed back or
 * matched against tables, so a hostile peer cannot make us repeat megabytes. */
#define APPL_JSONRPC_ID_MAX	       256u  /* bytes of a string id */
#define APPL_JSONRPC_METHOD_MAX	       256u  /* bytes of a method name */
#define APPL_JSONRPC_ERROR_MESSAGE_MAX 1024u /* error.message we send, cut at a character */

/* ---- stubs: Python names and stub text (pkg/stubs) ------------------------ */
/* Tool names, descriptions and schemas come from upstream servers and are
 * shown to the model: each piece is escaped, then cut to these sizes (bytes
 * of output unless the name says otherwise). docs/stubs.md. */
#define APPL_STUBS_DESC_READ_MAX    (64u * 1024) /* bytes of a description read */
#define APPL_STUBS_SUMMARY_MAX	    160u	 /* the one-line summary */
#define APPL_STUBS_DOC_DESC_MAX	    4096u	 /* the description in a stub */
#define APPL_STUBS_PARAM_DESC_MAX   512u	 /* one parameter's description in a stub */
#define APPL_STUBS_PROPS_MAX	    256u	 /* properties of an input schema read */
#define APPL_STUBS_SIGNATURE_MAX    4096u /* a stub's parameter list; the rest go to **kwargs */
#define APPL_STUBS_TYPE_MAX	    160u  /* one rendered type; a longer one is Any */
#define APPL_STUBS_UNION_MAX	    8u	  /* members of a union; more is Any */
#define APPL_STUBS_ENUM_MAX	    16u	  /* values in a Literal[...] */
#define APPL_STUBS_VALUES_READ_MAX  256u  /* enum values read */
#define APPL_STUBS_LITERAL_MAX	    64u	  /* a default or value shown as a literal */
#define APPL_STUBS_SCHEMA_DEPTH_MAX 16u	  /* nesting followed in a schema, $ref hops included */
#define APPL_STUBS_TYPE_VISITS_MAX  512u  /* subschemas read to render one type */
#define APPL_STUBS_NAME_SHOWN_MAX   256u  /* the MCP name in a stub */
#define APPL_STUBS_TEXT_MAX	    APPL_RUNNER_DOC_MAX /* one stub */
#define APPL_STUBS_LINE_MAX	    400u		/* one tool's line in the description */
#define APPL_STUBS_RETURNS_MAX	    160u /* a return annotation; a longer one is a plain type */
/* All stubs given to one cell. With code of APPL_CELL_CODE_MAX bytes, both
 * escaped at their worst, the cell line still fits APPL_RUNNER_HOST_LINE_MAX. */
#define APPL_STUBS_DOCS_TOTAL_MAX   (640u * 1024)
#define APPL_STUBS_DESCRIPTION_MIN  2048u /* run_python's description */
#define APPL_STUBS_DESCRIPTION_DEF  (16u * 1024)
#define APPL_STUBS_DESCRIPTION_CEIL (256u * 1024)

/* ---- upstream client (pkg/upstream) ----------------------------------- */
/* A server is started, and answers, within these; a hostile or broken one
 * costs at most a bounded wait and bounded memory (docs/upstream.md). */
#define APPL_UPSTREAM_INIT_TIMEOUT_MS 10000 /* initialize and the whole first tools/list */
#define APPL_UPSTREAM_BACKOFF_MIN_MS  500   /* wait after the first death */
#define APPL_UPSTREAM_BACKOFF_MAX_MS  30000 /* doubling stops here */
/* A run that lasted this long resets the wait to APPL_UPSTREAM_BACKOFF_MIN_MS. */
#define APPL_UPSTREAM_STABLE_MS	     60000
#define APPL_UPSTREAM_KILL_WAIT_MS   1000		 /* upstream_free waits this long to reap */
#define APPL_UPSTREAM_PENDING_MAX    4096		 /* calls pending per server */
#define APPL_UPSTREAM_OUTBUF_MAX     (16u * 1024 * 1024) /* queued for the server's stdin */
#define APPL_UPSTREAM_PIPE_BYTES     (1024u * 1024)	 /* the server's stdout pipe, asked */
#define APPL_UPSTREAM_LIST_BYTES_MAX (16u * 1024 * 1024) /* all pages of one tools/list */
#define APPL_UPSTREAM_CURSOR_MAX     1024		 /* bytes of one nextCursor */
#define APPL_UPSTREAM_TOOL_NAME_MAX  128 /* MCP asks 1 to 128; longer tools are skipped */
/* A stdio server's own cgroup (servers.NAME.memory_mb, .pids): generous,
 * since Node alone wants a few hundred MiB; they bound a runaway server, not
 * a normal one. */
#define APPL_UPSTREAM_MEMORY_MB_DEF 1024u
#define APPL_UPSTREAM_MEMORY_MB_MIN 64u
#define APPL_UPSTREAM_MEMORY_MB_MAX (64u * 1024)
#define APPL_UPSTREAM_PIDS_DEF	    256u
#define APPL_UPSTREAM_PIDS_MIN	    8u
#define APPL_UPSTREAM_PIDS_MAX	    32768u
#define APPL_UPSTREAM_NOFILE	    4096u /* RLIMIT_NOFILE of a server */
/* Calls in flight to one server at once, all cells together
 * (servers.NAME.concurrency); the server's slots are shared fairly between
 * the cells that wait. The ceiling is 32 because the HTTP transport keeps at
 * most 32 calls in flight per server (UP_HTTP_CALLS_MAX in
 * pkg/upstream/http.c): a higher value would buy nothing. */
#define APPL_SERVER_CONCURRENCY_MIN  1
#define APPL_SERVER_CONCURRENCY_DEF  16
#define APPL_SERVER_CONCURRENCY_CEIL 32
/* The system user servers run as when the policy names none (created when
 * missing). */
#define APPL_UPSTREAM_USER   "appliance-upstream"
#define APPL_POLICY_USER_MAX 32
/* The uids servers without a user named in the policy take one of their
 * own from (docs/upstream.md, Confinement): by default 0x14000-0x14fff, above
 * every 16-bit id (system users, regular users, systemd's dynamic users and
 * nobody) and below the first range useradd gives out in /etc/subuid
 * (100000). `--server-uids FIRST-LAST` moves it, within MIN-MAX. A uid is
 * held by a lock on a file of its number in APPL_SERVER_UID_DIR. */
#define APPL_SERVER_UID_FIRST 81920u
#define APPL_SERVER_UID_LAST  86015u
#define APPL_SERVER_UID_MIN   1000u
#define APPL_SERVER_UID_MAX   2147483646u
#define APPL_SERVER_UIDS_MAX  (1u << 20) /* ids in one range */
#define APPL_SERVER_UID_DIR   "/run/appliance/uids"

/* ---- gateway ------------------------------------------------------------- */
/* run_python calls waiting for a free cell slot: beyond, a call is refused at
 * once, so a client cannot make the appliance hold unbounded code. */
#define APPL_RUNS_WAITING_MAX 64
/* A stdio start that failed waits this long for the client's first
 * request, to answer it with the reason (mcp_stdio_refuse_first). */
#define APPL_START_REFUSE_WAIT_MS 5000

/* ---- the admin socket (docs/operating.md) ---------------------------------- */
/* NAME in NAME.PID.sock: [A-Za-z0-9][A-Za-z0-9_-]*, as long as a deployment. */
#define APPL_ADMIN_NAME_MAX 64
/* One request line, its newline included: {"op":"reload"} and room. */
#define APPL_ADMIN_REQUEST_MAX 256
/* Peers served at once; one more is told "busy" and closed, so a peer that
 * opens connections and keeps them cannot make the loop hold unbounded
 * state. */
#define APPL_ADMIN_CONNECTIONS_MAX 8
/* A peer's request must have come, and its answer gone, within this: a
 * silent peer cannot keep a slot. */
#define APPL_ADMIN_TIMEOUT_MS 5000
/* One answer line (a status), written by the appliance, read by `status`. */
#define APPL_ADMIN_ANSWER_MAX (1024u * 1024)
/* How long `appliance reload` waits for each appliance's answer. */
#define APPL_ADMIN_RELOAD_WAIT_MS 300000
/* Sockets `status` and `reload` look at in one directory. */
#define APPL_ADMIN_SOCKETS_MAX 1024

/* ---- bridge -------------------------------------------------------------- */
/* A tool's value for the code nests at most this deep (as the runner's own
 * values do); a deeper result is refused, not cut. */
#define APPL_TOOL_RESULT_DEPTH_MAX APPL_RUNNER_VALUE_DEPTH_MAX
/* Calls of one cell waiting for an in-flight slot: beyond, a call is refused
 * (each holds at most max_args_bytes of arguments). */
#define APPL_BRIDGE_WAITING_MAX 1024u

/* ---- warm pool ------------------------------------------------------------ */
#define APPL_POOL_BACKOFF_MIN_MS 500   /* wait after a failed boot */
#define APPL_POOL_BACKOFF_MAX_MS 30000 /* doubling stops here */

/* ---- metrics (docs/metrics.md) -------------------------------------------- */
/* Label combinations one family keeps; past it a count goes to the family's
 * overflow series, so no input can grow the registry without end. */
#define APPL_METRICS_SERIES_MAX 1024u
/* One label value, bytes: the longest name the policy gives a tool. */
#define APPL_METRICS_LABEL_MAX APPL_POLICY_TOOL_NAME_MAX
/* The page /metrics answers with; the two caps above keep it well below. */
#define APPL_METRICS_TEXT_MAX (8u * 1024 * 1024)
/* The metrics listener (http.metrics_listen): its connections at once, the
 * time a request's head may take, and the body a GET may carry. */
#define APPL_METRICS_CONNECTIONS 8u
#define APPL_METRICS_SLOW_S	 10u
#define APPL_METRICS_BODY_MAX	 1024u

#endif
