/* front_int.h: what the files of the HTTP front share (front.c opens and
 * closes it, front_drive.c runs MHD from the loop, front_admit.c judges
 * requests, front_answer.c answers them). Not part of the API.
 *
 * The files call one way only: front.c uses the three others, front_admit.c
 * uses front_answer.c and front_drive.c, front_answer.c uses
 * front_drive.c.
 */
#ifndef APPL_HTTP_FRONT_INT_H
#define APPL_HTTP_FRONT_INT_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/dl.h"
#include "http/front.h"
#include "log/log.h"
#include "loop/loop.h"

/* libmicrohttpd is loaded by the first front, not at exec: an appliance
 * serving stdio never maps it and GnuTLS behind it (about 2.5 MiB of
 * resident pages at start, and GnuTLS's start-up code). Every function
 * the front calls is reached through this table. */
/* clang-format off */
#define MHD_FNS(X) \
	X(add_response_header) \
	X(create_response_from_buffer) \
	X(create_response_from_callback) \
	X(destroy_response) \
	X(get_connection_info) \
	X(get_connection_values) \
	X(get_daemon_info) \
	X(get_timeout) \
	X(lookup_connection_value) \
	X(queue_response) \
	X(resume_connection) \
	X(run) \
	X(start_daemon) \
	X(stop_daemon) \
	X(suspend_connection) \
	X(get_version)
/* clang-format on */

struct front_mhd_fns {
#define X(name) __typeof__(MHD_##name) *name;
	MHD_FNS(X)
#undef X
};

/* libmicrohttpd's functions, filled by http_front_load (front_drive.c). */
extern struct front_mhd_fns front_mhd;

#define PEER_MAX 64u

struct listener {
	struct http_front *f;
	struct MHD_Daemon *d;
	int lfd, efd;
	unsigned port;
	char *unix_path; /* removed at close */
	bool failed;	 /* MHD refused it: the socket may be gone */
};

/* One client connection, from MHD's accept to its close. Connections are
 * kept in the order of their deadline (start + slow_s), which is also the
 * order they were put in, so one timer serves them all. */
struct conn {
	struct http_front *f;
	int fd;
	uint64_t deadline;
	bool listed;
	/* The request line's target as sent, from on_target to the access
	 * handler's first call: MHD's bytes, valid for that request only. */
	const char *target;
	struct conn *prev, *next;
};

enum req_state {
	REQ_READING, /* head admitted, body coming */
	REQ_REFUSED, /* a refusal is queued */
	REQ_OWNER,   /* the owner holds it */
	REQ_DONE,    /* the owner let go (answered); MHD finishes it */
};

/* What a request's target names (front.h). */
enum req_kind {
	REQ_MCP,      /* cfg.path: the owner's */
	REQ_HEALTHZ,  /* HTTP_FRONT_HEALTHZ: answered by the front */
	REQ_READYZ,   /* HTTP_FRONT_READYZ: answered by the front */
	REQ_RESOURCE, /* a path of cfg.resource: its metadata, by the front */
	REQ_NOWHERE,  /* anything else: 404 */
};

struct http_req {
	struct http_front *f;
	enum req_kind kind;
	struct conn *c;
	struct MHD_Connection *mc;
	enum req_state state;
	const char *method;
	char peer[PEER_MAX];
	const void *principal;
	void *data;
	char *body;
	size_t len, cap, dropped;
	bool too_big;
	bool suspended, watching, aborting, owned;
	/* The answer, made by the owner, queued by the access handler. */
	struct MHD_Response *resp;
	unsigned status;
	/* The token step's refusal: 0 none came, else what cfg.bearer said
	 * (401, 403): the challenge names the error. */
	unsigned token_refused;
	bool queued;
	/* A stream's pending bytes: out[off..olen). */
	bool stream, stream_end, stream_cut;
	char *out;
	size_t off, olen, ocap;
	struct http_req *lprev, *lnext; /* the front's live requests */
};

struct http_front {
	struct loop *loop;
	struct http_front_config cfg;
	struct listener ls[HTTP_FRONT_LISTEN_MAX];
	size_t nls;
	struct loop_timer *mhd_timer, *slow_timer;
	struct loop_task kick;
	struct conn *head, *tail;
	struct http_req *reqs;
	struct log_rate rate;
	bool closing;
	unsigned in_mhd; /* inside MHD_run (its callbacks may call us back) */
};

/* ---- front_drive.c ---- */

/* Loop callbacks: MHD's timer and the next round's kick (data: the front),
 * its epoll set readable, the slow-client timer. */
void front_on_kick(void *data);
void front_on_epoll(struct loop *loop, int fd, uint32_t events, void *data);
void front_on_slow(void *data);
/* Start c's clock for its next request / take it off the clock. */
void front_conn_list(struct conn *c);
void front_conn_unlist(struct conn *c);
/* Suspend r until its owner answers, watching for the client's hang-up;
 * wake it; stop watching. */
void front_req_suspend(struct http_req *r);
void front_req_resume(struct http_req *r);
void front_req_unwatch(struct http_req *r);

/* ---- front_answer.c ---- */

/* Refuse r with status (why: our own word, for the log); now answers at
 * once, else after the body is read. */
void front_refuse(struct http_req *r, unsigned status, const char *why, bool now);
/* Queue r's refusal (r->status). */
void front_refusal_queue(struct http_req *r);
/* Answer a probe (r->kind HEALTHZ or READYZ), whole: from the access
 * handler. */
enum MHD_Result front_probe_answer(struct http_req *r);
/* Hand the owner's answer to MHD, or suspend until there is one. */
enum MHD_Result front_deliver(struct http_req *r);

/* ---- front_admit.c ---- */

/* The daemon serving l's socket (flags and tls: its TLS options), its hooks
 * the admission's; NULL when MHD refuses it. */
struct MHD_Daemon *front_daemon_start(struct listener *l, unsigned flags,
				      struct MHD_OptionItem *tls);

#endif
