/* internal.h: the MCP server core's own types and the functions its
 * files share (session.c dispatches, ask.c asks the client, runs.c keeps
 * the runs in flight, tasks.c keeps the tasks and taskreq.c serves their
 * methods, send.c sends, state.c makes and reads requestStates). The files
 * call each other one way only: session.c uses taskreq.c, ask.c, runs.c,
 * tasks.c and send.c; taskreq.c uses ask.c, runs.c, tasks.c and send.c;
 * ask.c uses runs.c, tasks.c, send.c and state.c; runs.c uses tasks.c and
 * send.c; tasks.c uses send.c; state.c uses nothing. */
#ifndef APPL_MCP_INTERNAL_H
#define APPL_MCP_INTERNAL_H

#include <jansson.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>

#include "jsonrpc/jsonrpc.h"
#include "mcp/session.h"

#define META_SERVER_INFO  "io.modelcontextprotocol/serverInfo"
#define META_RELATED_TASK "io.modelcontextprotocol/related-task"
#define TASKS_EXTENSION	  "io.modelcontextprotocol/tasks"
#define MCP_STATE_NONCE	  16u /* bytes of a requestState's nonce */
#define MCP_STATE_CHAIN	  16u /* and of its chain: a run's, kept by its replays */
/* The questions one state carries: those asked now and those answered
 * before in the same run (a replay elsewhere answers them again). */
#define MCP_STATE_Q_MAX 64u
#define MCP_STATE_RAW_MAX                                                                          \
	(1u + MCP_STATE_NONCE + MCP_STATE_CHAIN + 8u + 1u + MCP_STATE_Q_MAX * (34u + 31u) + 32u)
#define MCP_STATE_TEXT_MAX (((MCP_STATE_RAW_MAX + 2u) / 3u) * 4u)

/* The levels of logging/setLevel, least severe first. */
#define MCP_LOG_LEVELS	      8
#define MCP_LOG_LEVEL_INFO    1
#define MCP_LOG_LEVEL_WARNING 3
extern const char *const mcp_log_levels[MCP_LOG_LEVELS];

/* ---- state.c: a requestState -------------------------------------------------------- */

enum { MCP_STATE_ASKED = 0, MCP_STATE_APPROVED = 1, MCP_STATE_DECLINED = 2 };

struct mcp_state_q {
	unsigned char bind[32]; /* what the question is about (the bridge's) */
	unsigned char was;	/* MCP_STATE_ASKED now, or what the answer was */
	char key[32];		/* its inputRequests key: printable, unique */
};

/* What a requestState says: a parked run (nonce), the run chain its
 * replays keep (chain), when it expires (wall-clock ms: other replicas
 * judge it), and its questions. */
struct mcp_state {
	unsigned char nonce[MCP_STATE_NONCE];
	unsigned char chain[MCP_STATE_CHAIN];
	uint64_t expires_ms;
	size_t n;
	struct mcp_state_q q[MCP_STATE_Q_MAX];
};

/* st as base64url text (cap bytes, NUL-ended), its MAC keyed with key over
 * it, the client that must present it and the code digest it must come
 * with. 0, -E2BIG (too many questions), -EINVAL, -ENOBUFS. Pure. */
int mcp_state_encode(const struct mcp_state *st, const unsigned char key[32], const char *client,
		     const unsigned char code[32], char *text, size_t cap);
/* text[0..len) (untrusted) into out: -EINVAL when malformed, -EACCES when
 * the MAC does not hold for client and code; nothing is read from it
 * before the MAC holds. 0 says nothing of its expiry. Pure. */
int mcp_state_decode(const char *text, size_t len, const unsigned char key[32], const char *client,
		     const unsigned char code[32], struct mcp_state *out);
/* The ledger's key for the approval of bind in chain: the same on every
 * replica. Pure. */
void mcp_state_claim_key(const unsigned char chain[MCP_STATE_CHAIN], const unsigned char bind[32],
			 unsigned char out[32]);

struct mcp_ask {
	struct mcp_ask *next; /* the run's, oldest first */
	struct mcp_run *run;
	char key[32];	/* legacy: the request's id; modern: its inputRequests key */
	json_t *params; /* elicitation/create's */
	unsigned char bind[32];
	bool sent;   /* modern: in the InputRequiredResult the client holds */
	bool legacy; /* an elicitation/create request, answered by its id */
	mcp_answer_fn fn;
	void *token;
	/* answered from a replayed state: given from a loop task */
	const char *pre;
	struct loop_task pre_task;
};

struct mcp_run {
	struct mcp_run *next, *prev;
	struct mcp_session *s;
	json_t *id; /* NULL while parked */
	const struct mcp_revision *rev;
	json_t *token;	/* progressToken, or NULL: no progress */
	uint64_t due;	/* when the next progress goes out */
	uint64_t last;	/* when the last one went */
	json_int_t seq; /* progress: rises by one each notification */
	void *data;
	unsigned char code_digest[32]; /* a code tool's: of its name and arguments */
	bool tool;		       /* a code tool's call: answered with its value */
	struct trace_span *span;       /* its request's span; NULL: none */
	bool structured;	       /* that tool has an output schema */
	bool can_elicit;	       /* modern: the request's client has form elicitation */
	struct mcp_ask *asks;	       /* questions open, oldest first */
	char label[48];		       /* the owner's name for it, bound into requestState */
	unsigned timeout_ms;	       /* how long a requestState lives */
	/* Parked (2026-07-28): the request was answered with input_required,
	 * and the run waits for the retry that carries requestState. */
	bool parked;
	unsigned char nonce[MCP_STATE_NONCE];
	/* Its chain (made at its first park, or its replayed state's), and
	 * the questions of the chain answered so far, which every later
	 * state carries; pre: a replay's answers, each used once. */
	unsigned char chain[MCP_STATE_CHAIN];
	bool chained;
	struct mcp_state_q *answered; /* nanswered, room for MCP_STATE_Q_MAX */
	size_t nanswered;
	struct mcp_state *pre;
	uint64_t expires;
	struct loop_timer *expiry;
	bool owner_done; /* answered by the owner: result (when parked) waits */
	json_t *result;
	struct mcp_task *task;	  /* the task it runs as, or NULL */
	const char *cancelled_by; /* for on_cancel (mcp_run_cancelled_by) */
};

/* A legacy tasks/result waiting for its task to end. */
struct task_wait {
	struct task_wait *next;
	uint64_t serial; /* the session it came in */
	json_t *id;
};

/* A request line (an elicitation) for a legacy task's client, held until
 * a tasks/result opens a way to it. */
struct task_line {
	struct task_line *next;
	char *line;
	size_t len;
	char key[32]; /* the question's (mcp_ask.key) */
};

#define MCP_TASK_ID_LEN	   32 /* hex of 16 random bytes */
#define MCP_TASK_WAITS_MAX 8  /* tasks/result requests waiting for one task */

/* One task (docs/tasks.md): a tools/call run in the background for one
 * client, and then its result, kept until its ttl. Its run lives in a
 * session of its own (hs, no transport of its own: what it sends goes to
 * its client's session, routed here). A task past its ttl, or dropped for
 * a newer one, stays as a marker (gone) so its id says why. */
struct mcp_task {
	struct mcp_task *next;
	struct mcp_server *srv;
	char id[MCP_TASK_ID_LEN + 1];
	char *client, *role;	/* copies: its principal's */
	struct mcp_principal p; /* hs's, pointing at them */
	struct mcp_session *hs; /* its run's session; NULL once gone */
	struct mcp_run *run;	/* while it works; NULL once it ended */
	const struct mcp_revision *rev;
	uint64_t origin;	   /* the session that made it (its serial) */
	const char *status;	   /* once it ended: completed or cancelled; NULL before */
	char *message;		   /* the status message it ended with */
	json_t *result;		   /* completed: the CallToolResult */
	size_t result_bytes;	   /* its size as compact JSON (the metrics' gauge) */
	uint64_t created, updated; /* wall clock, ms */
	uint64_t ttl_ms, expires;  /* expires: loop clock */
	const char *gone;	   /* why it is gone: "expired" or "dropped"; NULL: kept */
	struct task_wait *waits;
	struct task_line *lines;
};

struct listen {
	struct listen *next;
	json_t *id;
	bool tools; /* notifications/tools/list_changed asked for */
};

struct mcp_session {
	struct mcp_session *next, *prev;
	struct mcp_server *srv;
	struct mcp_transport t;
	const struct mcp_principal *p;
	const struct mcp_revision *legacy; /* initialize's pick; NULL before */
	uint64_t
		serial; /* this process's count of sessions: its bind; 0: a task's run session (tasks.c) */
	json_t *legacy_caps; /* initialize's capabilities */
	bool initialized;    /* notifications/initialized seen */
	int log_level;	     /* logging/setLevel's (an index of mcp_log_levels); -1: none */
	bool ended;
	struct mcp_run *runs;
	struct listen *listens;
	unsigned nlistens;
	/* The span of the request being dispatched: a run made for it takes
	 * it (mcp_run_new), else it ends once the request was handled. */
	struct trace_span *span;
};

struct mcp_server {
	struct loop *loop;
	struct mcp_server_hooks hooks;
	struct mcp_session *sessions;
	struct loop_timer *tick;			/* the next progress notification */
	unsigned char key[crypto_generichash_KEYBYTES]; /* requestState's MAC key */
	bool cluster;		       /* key is the replicas' shared one: states replay anywhere */
	uint64_t asks;		       /* questions ever asked */
	uint64_t sessions_made;	       /* sessions ever made */
	struct mcp_task *tasks;	       /* newest first */
	struct loop_timer *task_timer; /* the next task to expire */
};

/* ---- send.c ---------------------------------------------------------------- */

/* Queue line (steals it; NULL: nothing) to s's client, unless s ended;
 * _for: with the answer to related (may be NULL). */
void mcp_send_line(struct mcp_session *s, char *line, size_t len);
void mcp_send_line_for(struct mcp_session *s, const json_t *related, char *line, size_t len);
void mcp_reply_error_data(struct mcp_session *s, const json_t *id, int code, const char *msg,
			  const json_t *data);
void mcp_reply_error(struct mcp_session *s, const json_t *id, int code, const char *msg);
/* result (stolen; NULL: out of memory) as the answer to id under rev, with
 * what rev puts on every result. */
void mcp_reply(struct mcp_session *s, const json_t *id, const struct mcp_revision *rev,
	       json_t *result);
void mcp_notify_for(struct mcp_session *s, const json_t *related, const char *method,
		    const json_t *params);
void mcp_notify(struct mcp_session *s, const char *method, const json_t *params);
/* {name, version}: new. */
json_t *mcp_server_info(void);

/* ---- tasks.c --------------------------------------------------------------- */

/* A new task for req's client, made in session s (its run's session made
 * too; its run not yet), ttl_ms long, on srv's list. NULL on out of
 * memory. */
struct mcp_task *mcp_task_new(struct mcp_session *s, const struct mcp_request *req,
			      uint64_t ttl_ms);
/* The task called id that client may see (kept or gone), or NULL. */
struct mcp_task *mcp_task_find(struct mcp_server *srv, const char *client, const char *id);
/* Its status now: working, input_required, or how it ended. */
const char *mcp_task_status(const struct mcp_task *t);
/* Its status changed: lastUpdatedAt moves. */
void mcp_task_touch(struct mcp_task *t);
/* The Task object under rev (new; NULL on out of memory): message is its
 * statusMessage while it works (NULL: none); detailed (2026-07-28
 * tasks/get): with its result once completed. */
json_t *mcp_task_json(const struct mcp_task *t, const struct mcp_revision *rev, const char *message,
		      bool detailed);
/* t's _meta for what is about it: {related-task: {taskId}} (new). */
json_t *mcp_task_meta(const struct mcp_task *t);
/* Its run answered: it completed with result (stolen) or was cancelled
 * (result NULL; by says who), and every tasks/result waiting gets it. Its
 * run is the caller's to free. */
void mcp_task_end(struct mcp_task *t, json_t *result, const char *by);
/* t ended: every tasks/result waiting for it is answered. */
void mcp_task_answer_waits(struct mcp_task *t);
/* A legacy tasks/result (id, in s) waits for t; the held lines go to it.
 * 0, -ENOMEM, or -EBUSY when MCP_TASK_WAITS_MAX wait already. */
int mcp_task_wait(struct mcp_task *t, struct mcp_session *s, const json_t *id);
/* Whether a tasks/result of s under id waits for a task. */
bool mcp_task_waits_id(const struct mcp_server *srv, const struct mcp_session *s, const json_t *id);
/* The request id of s no longer waits (cancelled). */
void mcp_task_unwait(struct mcp_server *srv, struct mcp_session *s, const json_t *id);
/* The request line (steals it) of question key to t's client: to a
 * tasks/result waiting for it, or held until one comes. */
void mcp_task_send_request(struct mcp_task *t, char *line, size_t len, const char *key);
/* Question key is withdrawn: true when its line was still held (and is
 * dropped: the client never saw it), false when it went out. */
bool mcp_task_unsend(struct mcp_task *t, const char *key);
/* t is gone (why: "expired" or "dropped"): its result, session and lines
 * are freed; its id stays until it expires. Its run must have ended. */
void mcp_task_forget(struct mcp_task *t, const char *why);
/* Take t off srv's list and free it (its run must have ended). */
void mcp_task_free(struct mcp_task *t);
/* The soonest task expiry set on srv's timer. */
void mcp_task_timer_arm(struct mcp_server *srv);

/* ---- runs.c ---------------------------------------------------------------- */

/* The progress timer set for the soonest report due; its handler (data:
 * the server) sends every report due. */
void mcp_tick_arm(struct mcp_server *srv);
void mcp_progress_tick(void *data);
/* Whether caps (a client's capabilities) offer form elicitation. */
bool mcp_can_form_elicit(const json_t *caps);
/* r answers req from now on: its id, revision, progress token. 0 or
 * -ENOMEM. */
int mcp_run_attach(struct mcp_run *r, const struct mcp_request *req);
void mcp_code_digest(const char *code, size_t len, unsigned char out[32]);
/* A run of s for req's code; NULL on out of memory. */
struct mcp_run *mcp_run_new(struct mcp_session *s, const struct mcp_request *req, const char *code,
			    size_t len);
/* Its questions answered "cancelled", unlinked, freed. */
void mcp_run_free(struct mcp_run *r);
bool mcp_id_in_flight(const struct mcp_session *s, const json_t *id);
void mcp_ask_free(struct mcp_ask *a);
void mcp_ask_unlink(struct mcp_ask *a);
/* Every question r has open answered (outcome) and dropped. */
void mcp_asks_end(struct mcp_run *r, const char *outcome);

/* Cancel r for its client (on_cancel; by: who, for the audit log), and
 * free it. */
void mcp_run_cancel(struct mcp_run *r, const char *by);

/* ---- ask.c ------------------------------------------------------------------- */

/* A legacy client's answer to one of its elicitation/create requests. */
void mcp_ask_response(struct mcp_session *s, const struct jsonrpc_msg *m);
/* A retry of a parked run (2026-07-28): params carry requestState and
 * inputResponses; verified, single-use; then the run answers this
 * request. */
/* Returns NULL when the request was answered (resumed, or refused);
 * else a replay: the state verified under the cluster key names a run
 * this server does not hold, and the caller runs the code anew with it
 * (mcp_run_replay). */
struct mcp_state *mcp_ask_retry(struct mcp_session *s, const struct jsonrpc_msg *m,
				const struct mcp_request *req, const char *code, size_t len);
/* r is a replay of st (steals it): its chain and answers. */
void mcp_run_replay(struct mcp_run *r, struct mcp_state *st);
/* A 2026-07-28 tasks/update: responses (an object) answer the questions
 * r's task has open; keys not open are ignored. */
void mcp_ask_update(struct mcp_run *r, const json_t *responses);
/* r's open questions as inputRequests (new; NULL on out of memory). */
json_t *mcp_ask_requests(const struct mcp_run *r);

/* ---- taskreq.c --------------------------------------------------------------- */

/* Whether req asks for its tools/call to run as a task: legacy params.task
 * (2025-11-25), or the 2026-07-28 extension in its capabilities. -1 when
 * params.task is malformed (answered). */
int mcp_task_asked(struct mcp_session *s, const struct jsonrpc_msg *m,
		   const struct mcp_request *req);
/* Start req's call as a task: the client is answered with the task now,
 * and the run is returned for the owner (on_run), or NULL when refused
 * (answered). */
struct mcp_run *mcp_task_start(struct mcp_session *s, const struct jsonrpc_msg *m,
			       const struct mcp_request *req, const char *code, size_t len);
void mcp_m_tasks_get(struct mcp_session *s, const struct jsonrpc_msg *m,
		     const struct mcp_request *req);
void mcp_m_tasks_result(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req);
void mcp_m_tasks_list(struct mcp_session *s, const struct jsonrpc_msg *m,
		      const struct mcp_request *req);
void mcp_m_tasks_cancel(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req);
void mcp_m_tasks_update(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req);
/* Tasks' expiry timer's handler (data: the server). */
void mcp_tasks_expire(void *data);

#endif
