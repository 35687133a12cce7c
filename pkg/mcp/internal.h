/* internal.h: the MCP server core's own types and the functions its
 * files share (session.c dispatches, ask.c asks the client, runs.c keeps
 * the runs in flight, send.c sends). The files call each other one way
 * only: session.c uses ask.c, runs.c and send.c; ask.c uses runs.c and
 * send.c; runs.c uses send.c. */
#ifndef APPL_MCP_INTERNAL_H
#define APPL_MCP_INTERNAL_H

#include <jansson.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>

#include "jsonrpc/jsonrpc.h"
#include "mcp/session.h"

#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
#define MCP_STATE_NONCE	 16u /* bytes of a requestState's nonce */

/* The levels of logging/setLevel, least severe first. */
#define MCP_LOG_LEVELS	      8
#define MCP_LOG_LEVEL_INFO    1
#define MCP_LOG_LEVEL_WARNING 3
extern const char *const mcp_log_levels[MCP_LOG_LEVELS];

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
	unsigned char asks_digest[32]; /* the questions that state asked */
	uint64_t expires;
	struct loop_timer *expiry;
	bool owner_done; /* answered by the owner: result (when parked) waits */
	json_t *result;
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
	uint64_t serial;		   /* this process's count of sessions: its bind */
	json_t *legacy_caps;		   /* initialize's capabilities */
	bool initialized;		   /* notifications/initialized seen */
	int log_level; /* logging/setLevel's (an index of mcp_log_levels); -1: none */
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
	uint64_t asks;					/* questions ever asked */
	uint64_t sessions_made;				/* sessions ever made */
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

/* ---- ask.c ------------------------------------------------------------------- */

/* A legacy client's answer to one of its elicitation/create requests. */
void mcp_ask_response(struct mcp_session *s, const struct jsonrpc_msg *m);
/* A retry of a parked run (2026-07-28): params carry requestState and
 * inputResponses; verified, single-use; then the run answers this
 * request. */
void mcp_ask_retry(struct mcp_session *s, const struct jsonrpc_msg *m,
		   const struct mcp_request *req, const char *code, size_t len);

#endif
