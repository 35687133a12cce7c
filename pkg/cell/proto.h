/* proto.h: runner protocol v1, host side (docs/runner-protocol.md).
 *
 * Pure code, no system calls: a parser for one runner-to-host line, a state
 * checker for the order of those lines, and encoders for the host-to-runner
 * lines. The runner shares its interpreter with hostile code, which can write
 * any bytes to the protocol pipe, so every line is parsed as hostile: capped
 * before allocation, strict JSON (appl_json_load), exact field sets, checked
 * types. Any refusal here is a protocol violation: the caller ends the run.
 */
#ifndef APPL_CELL_PROTO_H
#define APPL_CELL_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

#define CELL_PROTO_VERSION 1

/* The resource reader every namespace has (`await ns.read_resource(uri)`):
 * no tool entry's fn may take it. */
#define CELL_PROTO_READ_FN "read_resource"

enum cell_msg_type {
	CELL_MSG_NONE = 0, /* a cleared message */
	CELL_MSG_READY,	   /* {"t":"ready","v":1} */
	CELL_MSG_OUT,	   /* {"t":"out","data":STRING} */
	CELL_MSG_CALL,	   /* {"t":"call","id":N,"tool":STRING,"args":OBJECT}, and
			    * {"t":"read","id":N,"server":STRING,"uri":STRING} */
	CELL_MSG_DONE,	   /* {"t":"done","error":null|STRING,"result":ANY} */
	CELL_MSG_FILE,	   /* {"t":"file","name":STRING,"data":BASE64,"more":BOOL}, and
			    * {"t":"skip","name":STRING,"why":WORD} */
	CELL_MSG_FAIL,	   /* {"t":"fail","error":STRING}: instead of ready, a runner
			    * that cannot serve (a preloaded module failed) */
};
#define CELL_MSG_TYPES 7

/* Why an entry of /out was left out: `skip.why` on the wire, and the
 * reason in the result. */
enum cell_file_why {
	CELL_FILE_KEPT = 0,    /* not left out (a `file` chunk) */
	CELL_FILE_SYMLINK,     /* "symlink" */
	CELL_FILE_DIRECTORY,   /* "directory" */
	CELL_FILE_DEVICE,      /* "device": a character or block device */
	CELL_FILE_FIFO,	       /* "fifo" */
	CELL_FILE_SOCKET,      /* "socket" */
	CELL_FILE_OTHER,       /* "other": any other kind of entry */
	CELL_FILE_UNREADABLE,  /* "unreadable": it could not be opened or read */
	CELL_FILE_MAX_COUNT,   /* "max_count": limits.files.max_count files came before */
	CELL_FILE_MAX_BYTES,   /* "max_bytes": larger than limits.files.max_bytes */
	CELL_FILE_MAX_TOTAL,   /* "max_total_bytes": it would pass limits.files.max_total_bytes */
	CELL_FILE_MAX_ENTRIES, /* "max_entries": /out held more than APPL_RUNNER_FILE_ENTRIES_MAX
				 * entries; this one and those after it were not looked at */
	CELL_FILE_WHY_N
};

/* The word of why (static), NULL for CELL_FILE_KEPT. */
const char *cell_file_why_name(enum cell_file_why why);

/* One parsed runner line. The json_t pointers are owned by the message
 * (released by cell_proto_msg_clear); take your own reference with
 * json_incref to keep one longer. */
struct cell_msg {
	enum cell_msg_type type;
	union {
		struct {
			int version; /* always CELL_PROTO_VERSION */
		} ready;
		struct {
			json_t *data; /* string */
		} out;
		struct {
			json_int_t id; /* >= 0 */
			json_t *tool;  /* string, 1 to APPL_RUNNER_TOOL_NAME_MAX bytes */
			json_t *args;  /* object */
			/* A resource read: tool is the server's name (1 to
			 * APPL_RUNNER_TOOL_NAME_MAX bytes), args {"uri": uri}
			 * with uri 1 to APPL_RUNNER_URI_MAX bytes. */
			bool read;
		} call;
		struct {
			json_t *error;	/* string, or NULL when the cell succeeded */
			json_t *result; /* any value (json null when there is none) */
		} done;
		struct {
			json_t *error; /* string, at most APPL_RUNNER_FAIL_MAX bytes */
		} fail;
		struct {
			json_t *name; /* string, 1 to APPL_RUNNER_FILE_NAME_MAX bytes */
			/* A chunk's bytes, decoded from base64: at most
			 * APPL_RUNNER_FILE_CHUNK_MAX (malloc'ed; NULL when
			 * empty, and for a skip). */
			unsigned char *data;
			size_t len;
			bool more;		/* more chunks of this file follow */
			enum cell_file_why why; /* CELL_FILE_KEPT for a chunk, else the skip's */
		} file;
	} u;
};

/* Parse buf[0..len) (one line without its newline; not NUL-terminated, may
 * hold any bytes) into *msg, which must be cleared or zeroed. Returns 0, or a
 * negative code with err filled and *msg left empty: -EFBIG longer than
 * APPL_RUNNER_LINE_MAX, -E2BIG nested deeper than APPL_JSON_DEPTH_MAX,
 * -EINVAL anything else (NUL byte, not JSON, duplicate key, not an object,
 * unknown or missing `t`, missing or extra field, wrong type or value). */
int cell_proto_parse(const char *buf, size_t len, struct cell_msg *msg, struct appl_err *err);

/* Release what msg owns and zero it; safe on a zeroed or cleared message. */
void cell_proto_msg_clear(struct cell_msg *msg);

/* ---- order of messages ----------------------------------------------------- */

enum cell_proto_phase {
	CELL_PHASE_BOOT,    /* waiting for ready */
	CELL_PHASE_IDLE,    /* ready seen, no cell sent yet (a warm sandbox) */
	CELL_PHASE_RUNNING, /* cell sent: out, call, file and done allowed */
	CELL_PHASE_DONE,    /* done seen: nothing more is allowed */
	CELL_PHASE_FAILED,  /* a violation was seen: everything is refused */
};

struct cell_proto_state;

/* A state in CELL_PHASE_BOOT (new; free with cell_proto_state_free), or NULL
 * when out of memory. */
struct cell_proto_state *cell_proto_state_new(void);
void cell_proto_state_free(struct cell_proto_state *st);

/* Record that the host sent the cell line: IDLE to RUNNING. -EINVAL (and the
 * state fails) in any other phase. */
int cell_proto_state_cell_sent(struct cell_proto_state *st, struct appl_err *err);

/* Check that msg (borrowed, parsed) may come now and advance. Refused with
 * -EINVAL, and the state stays FAILED after: a message before ready, a second
 * ready, out/call/file/done before the cell was sent, anything after done, a
 * call id not greater than the previous call's (which is how a reused id is
 * caught without a table: the runner numbers calls 1, 2, 3...); and for the
 * files: while a file's chunks say more follow, a skip, done, or a chunk of
 * another name (a file's chunks come one after the other), and more than
 * APPL_RUNNER_FILE_ENTRIES_MAX + 1 entries (files and skips). */
int cell_proto_state_feed(struct cell_proto_state *st, const struct cell_msg *msg,
			  struct appl_err *err);

enum cell_proto_phase cell_proto_state_phase(const struct cell_proto_state *st);

/* Calls accepted so far. */
unsigned long cell_proto_state_calls(const struct cell_proto_state *st);

/* A kept runner (a session's: the cell line said keep) finished its cell
 * and waits for the next: DONE to IDLE. Call ids go on rising across the
 * cells. -EINVAL (and the state fails) in any other phase. */
int cell_proto_state_again(struct cell_proto_state *st, struct appl_err *err);

/* ---- host-to-runner lines ---------------------------------------------------
 * Each encoder builds the message with jansson and writes it with
 * JSON_COMPACT into *line (new, malloc'ed; free() it): the JSON text, a '\n',
 * and a NUL after it; *len counts the newline, not the NUL. A line longer than
 * APPL_RUNNER_HOST_LINE_MAX is refused with -EFBIG. */

/* A `tools` entry: {"tool":tool,"ns":ns,"fn":fn} plus "doc":doc when doc is
 * not NULL (all borrowed, NUL-terminated UTF-8). tool is what call.tool will
 * name (1 to APPL_RUNNER_TOOL_NAME_MAX bytes); ns and fn are the Python names
 * the code uses (`await ns.fn(...)`): ASCII identifiers of at most
 * APPL_RUNNER_PY_NAME_MAX bytes, not keywords, not starting with "__", and ns
 * not a name the cell already has (a builtin, ToolError, asyncio); doc is at
 * most APPL_RUNNER_DOC_MAX bytes. Returns a new reference, or NULL with err
 * filled (-EINVAL, -ENOMEM). */
json_t *cell_proto_tool_new(const char *tool, const char *ns, const char *fn, const char *doc,
			    struct appl_err *err);

/* What the runner may send of the files in /out (limits.files). */
struct cell_files_limits {
	unsigned max_count; /* files returned; 0: none */
	size_t max_bytes;   /* one file */
	size_t max_total;   /* every file returned, together */
};

/* {"t":"cell","code":code,"tools":tools,"files":{"max_count":...,
 * "max_bytes":...,"max_total_bytes":...}}, with "args":args when args is not
 * NULL (a code tool's arguments: the code's global `args`) and "keep":true
 * when keep (the runner waits for another cell after done: a session's).
 * code[0..code_len) is UTF-8 without NUL, at most APPL_CELL_CODE_MAX bytes;
 * tools (borrowed) is an array of at most APPL_RUNNER_TOOLS_MAX entries each
 * shaped as cell_proto_tool_new makes them, no (ns, fn) pair twice; files
 * (borrowed) within the ceilings of limits.h; args (borrowed, may be NULL) an
 * object nesting at most APPL_JSON_DEPTH_MAX - 1 levels, else -EINVAL /
 * -E2BIG. */
int cell_proto_cell_encode(const char *code, size_t code_len, const json_t *tools,
			   const struct cell_files_limits *files, const json_t *args, bool keep,
			   char **line, size_t *len, struct appl_err *err);

/* The line that asks a runner restored from a checkpoint to reseed its
 * generators and say ready again (runner.py matches these exact bytes). */
#define CELL_PROTO_WAKE_LINE "{\"t\":\"wake\"}\n"

/* {"t":"result","id":id,"ok":value}; value (borrowed) nests at most
 * APPL_JSON_DEPTH_MAX - 1 levels, so the line fits the runner's parser too. */
int cell_proto_result_encode(json_int_t id, const json_t *value, char **line, size_t *len,
			     struct appl_err *err);

/* What kind of failure a ToolError is; the code branches on it (e.kind). */
enum cell_error_kind {
	CELL_ERR_REFUSED,     /* "refused": the bridge said no (policy, schema, caps) */
	CELL_ERR_ERROR,	      /* "error": the tool or its server failed */
	CELL_ERR_TIMEOUT,     /* "timeout": no answer within the call's timeout */
	CELL_ERR_UNAVAILABLE, /* "unavailable": the server is not there */
	CELL_ERR_DECLINED,    /* "declined": the approval the call needed was not given */
};

/* The kind's name on the wire; static. */
const char *cell_error_kind_name(enum cell_error_kind kind);

/* {"t":"result","id":id,"error":msg,"kind":KIND}; msg[0..msg_len) is UTF-8
 * and is cut at a character boundary to APPL_TOOL_ERROR_MAX bytes (the most
 * the code is shown); a NUL byte in it is replaced by '?'. */
int cell_proto_error_encode(json_int_t id, enum cell_error_kind kind, const char *msg,
			    size_t msg_len, char **line, size_t *len, struct appl_err *err);

#endif
