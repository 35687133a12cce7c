/* internal.h: what the files of the policy parser share (policy.c, walk.c,
 * check.c, limits.c, servers.c, server_check.c, roles.c, access.c,
 * clients.c, http.c), and nothing outside pkg/policy includes.
 *
 * The parsed document (struct policy) and the field walker's types live
 * here; each section's file fills its part of struct policy through its
 * own field tables. Calls go one way: policy.c (the document) calls the
 * sections; a section may call one read before it (clients.c calls
 * roles.c, roles.c calls servers.c: the names they check); every file
 * may call walk.c and the checks (check.c, server_check.c), which call
 * nothing of the package; access.c (the decisions) reads what roles.c and
 * servers.c parsed. */
#ifndef APPL_POLICY_INTERNAL_H
#define APPL_POLICY_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/limits.h"
#include "policy/policy.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A field's path in a message; a longer one is cut, never overflows. */
#define FIELD_PATH_MAX 320

struct rule { /* one entry of `tools` */
	const char *pattern;
	enum policy_access access;
	bool approval; /* its calls need a person's yes */
};

/* The default allowed_hosts: three loopback names, bare and with each
 * port, and each inet listen address as written. */
#define HTTP_LOOPBACK_NAMES 3
#define HTTP_DEFAULT_HOSTS                                                                         \
	(HTTP_LOOPBACK_NAMES * (1 + APPL_POLICY_HTTP_LISTEN_MAX) + APPL_POLICY_HTTP_LISTEN_MAX)
#define HTTP_HOST_WITH_PORT 16 /* "localhost:65535", NUL included */
_Static_assert(HTTP_DEFAULT_HOSTS <= APPL_POLICY_HTTP_HOSTS_MAX,
	       "the default allowed_hosts must fit where a given list goes");

/* The `http` section: fixed-size, so parsing it allocates nothing. */
struct http_section {
	struct policy_http pub; /* what policy_http hands out */
	struct policy_listen listen[APPL_POLICY_HTTP_LISTEN_MAX];
	struct policy_listen metrics; /* pub.metrics points here when given */
	const char *origins[APPL_POLICY_HTTP_ORIGINS_MAX + 1];
	const char *hosts[APPL_POLICY_HTTP_HOSTS_MAX + 1];
	char with_port[HTTP_LOOPBACK_NAMES * APPL_POLICY_HTTP_LISTEN_MAX][HTTP_HOST_WITH_PORT];
	struct policy_oauth oauth; /* pub.oauth points here when given */
};

struct policy {
	json_t *root; /* owns every string the accessors hand out */
	unsigned version;
	uint64_t serial;
	int64_t expires;
	const char *deployment; /* POLICY_DEPLOYMENT_DEFAULT when absent */
	const char *layout_raw; /* as written */
	char *layout;		/* resolved against base_dir */
	const char *digest;
	char *preload; /* image.preload, its names joined by commas; NULL: none */
	const char *runsc;
	const char *platform;
	bool rootless;
	bool restore; /* runtime.restore (default true; root only) */
	struct policy_limits limits;
	struct policy_server *servers;
	size_t nservers;
	bool http;
	struct rule *rules;
	size_t nrules;
	struct code_tool *code_tools; /* sorted by name */
	size_t ncode_tools;
	struct policy_role *roles;
	size_t nroles;
	const char *default_role;
	struct policy_token *tokens;
	size_t ntokens;
	const char *audit_path;
	bool audit_seal;
	const char *approvals_command;
	const char *otlp_endpoint; /* telemetry.otlp_endpoint; NULL: no traces */
	const char *service_name;
	struct http_section *serve; /* NULL: no `http` section */
	const char *ledger;	    /* cluster.ledger; NULL: no `cluster` section */
};

/* One entry of `code_tools`: what policy_code_tool_get hands out, and
 * what it owns (code_tools.c). */
struct code_tool {
	struct policy_code_tool pub;
	char *file; /* resolved */
	char *code; /* the file's bytes, once read */
	const char **uses;
	struct schema *input, *output;
};

struct ctx {
	struct policy *p;
	const char *base_dir;
	struct appl_err *err;
};

enum ftype {
	F_UINT, /* integer in [min, max] into an unsigned */
	F_BOOL, /* true or false into a bool */
	F_STR,	/* string of at most maxlen bytes, passed to check, into a const char * */
	F_FN,	/* anything else: parse does it all */
};

typedef int (*str_check_fn)(const char *s, size_t len, const char *path, struct appl_err *err);
typedef int (*parse_fn)(struct ctx *c, void *base, const json_t *v, const char *path);

struct field {
	const char *name;
	enum ftype type;
	bool required;
	size_t off;		/* F_UINT, F_BOOL, F_STR: where in base */
	unsigned min, max, def; /* F_UINT; def also for F_BOOL */
	const char *sdef;	/* F_STR: the default */
	size_t maxlen;		/* F_STR */
	str_check_fn check;	/* F_STR, optional */
	parse_fn parse;		/* F_FN */
};

/* ---- characters ------------------------------------------------------------ */

static inline bool is_lower(char ch)
{
	return ch >= 'a' && ch <= 'z';
}

static inline bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static inline bool is_alpha(char ch)
{
	return is_lower(ch) || (ch >= 'A' && ch <= 'Z');
}

/* ---- the field walker (walk.c) --------------------------------------------- */

/* Fill err with "policy: out of memory"; returns -ENOMEM. */
int policy_ctx_nomem(struct ctx *c);

/* parent.key, and parent[i], into out (FIELD_PATH_MAX bytes), cut to fit. */
void policy_path_key(char *out, const char *parent, const char *key);
void policy_path_index(char *out, const char *parent, size_t i);

/* Each field of tab[0..n) given its default in base. */
void policy_fields_default(const struct field *tab, size_t n, void *base);

/* obj must be an object holding only keys of tab and every required one;
 * each value is parsed by its field, in table order, into base. An unknown
 * key is refused naming the closest field when it looks like a slip. */
int policy_fields_parse(struct ctx *c, const json_t *obj, const struct field *tab, size_t n,
			void *base, const char *path);

/* v is an array of min to max elements (what names them in the message). */
int policy_array_check(struct ctx *c, const json_t *v, size_t min, size_t max, const char *what,
		       const char *path);

/* v is an object of at most max members. */
int policy_map_check(struct ctx *c, const json_t *v, size_t max, const char *what,
		     const char *path);

/* The strings of the array v (its size checked by the caller) as a new
 * NULL-terminated array in *out (*n of them), each at most maxlen and
 * passing its check (element 0 first's, the others rest's; NULL: none).
 * *out is set as soon as it is allocated: the caller frees it on failure
 * too. */
int policy_strings_parse(struct ctx *c, const json_t *v, size_t maxlen, str_check_fn first,
			 str_check_fn rest, const char *path, const char ***out, size_t *n);

/* An array of min to max unique strings, each at most maxlen and passing
 * check, into out (room for max and a NULL; borrowed from the document),
 * counted in *n. With nocase, two that differ in case only are the same. */
int policy_strings_unique_parse(struct ctx *c, const json_t *v, size_t min, size_t max,
				size_t maxlen, const char *what, str_check_fn check, bool nocase,
				const char *path, const char **out, size_t *n);

/* raw (a path as written) resolved against the policy's directory unless
 * absolute, into *out (new; the caller frees it, on failure too). */
int policy_path_resolve(struct ctx *c, const char *raw, const char *path, char **out);

/* ---- string checks (check.c, server_check.c), each a str_check_fn --------- */

int policy_abs_path_check(const char *s, size_t len, const char *path, struct appl_err *err);

/* The `cluster` section (cluster.c), into the policy. */
int policy_cluster_parse(struct ctx *c, void *base, const json_t *v, const char *path);

/* http.oauth (oauth.c) into o. */
struct policy_oauth;
int policy_oauth_parse(struct ctx *c, struct policy_oauth *o, const json_t *v, const char *path);
int policy_layout_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_digest_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_platform_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_label_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_deployment_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_env_name_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_url_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_server_url_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_header_name_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_header_value_check(const char *s, size_t len, const char *path, struct appl_err *err);
int policy_user_check(const char *s, size_t len, const char *path, struct appl_err *err);

/* A server's name (NUL-terminated: a JSON key), and a header name the
 * appliance sets itself and a policy may not. */
int policy_server_name_check(const char *s, const char *path, struct appl_err *err);
int policy_header_reserved_check(const char *name, const char *path, struct appl_err *err);

/* ---- the sections, each a parse_fn of the top-level table ------------------ */

/* limits.c, servers.c, roles.c (tools and roles), clients.c, http.c. */
int policy_limits_parse(struct ctx *c, void *base, const json_t *v, const char *path);
int policy_servers_parse(struct ctx *c, void *base, const json_t *v, const char *path);
int policy_tools_parse(struct ctx *c, void *base, const json_t *v, const char *path);
int policy_roles_parse(struct ctx *c, void *base, const json_t *v, const char *path);
int policy_clients_parse(struct ctx *c, void *base, const json_t *v, const char *path);
int policy_http_parse(struct ctx *c, void *base, const json_t *v, const char *path);
int policy_code_tools_parse(struct ctx *c, void *base, const json_t *v, const char *path);
void policy_code_tools_free(struct policy *p);

/* A `tools` or `uses` pattern: "server.tool" or "server.*", the server
 * declared in `servers` (servers.c). */
int policy_pattern_check(struct ctx *c, const char *pat, const char *path);

/* The `tools` entry that decides server.tool (the exact one, else the
 * wildcard), or NULL (access.c). */
const struct rule *policy_rule_of(const struct policy *p, const char *server, const char *tool);

/* What the whole document must hold of its servers, judged once every
 * section is read: a rootless policy asks no server for a user or a
 * network of its own, and no two servers share a user (servers.c). */
int policy_servers_confine_check(const struct policy *p, struct appl_err *err);
/* Sessions need root: rootless, no cgroup freezes or measures a kept
 * sandbox. */
int policy_roles_sessions_check(const struct policy *p, struct appl_err *err);

/* "read" or "write" into *out (roles.c): a `tools` entry's access, a code
 * tool's. */
int policy_access_parse(struct ctx *c, const json_t *v, const char *path, enum policy_access *out);

/* 2: pat names exactly server.tool; 1: pat is server.*; 0: neither
 * (roles.c). */
int policy_pattern_match(const char *pat, const char *server, const char *tool);

#endif
