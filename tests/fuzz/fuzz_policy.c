/* fuzz_policy.c: the policy document parser on hostile bytes.
 *
 * A policy is parsed before anything else of the appliance runs, and the
 * bytes are hostile until their signature is checked (and the parser must
 * hold even for a signer's mistake). Whatever parses must keep the promises
 * of policy.h: every limit in its range, absolute paths, names within their
 * caps, roles that exist. Each accepted policy is then asked about every
 * tool its own patterns name, for every role, so the access rules run on
 * what the parser let through. The serial's bytes, as `sign --serial`
 * finds them, must be in the input, digits only, and say the serial the
 * parser read. Seeds: tests/data/policy and policy/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "policy/serial.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			__builtin_trap();                                                          \
	} while (0)

static void limits_check(const struct policy *p)
{
	struct policy_limits l;

	policy_limits_get(p, &l);
	CHECK(l.deadline_s >= APPL_DEADLINE_S_MIN && l.deadline_s <= APPL_DEADLINE_S_CEIL);
	CHECK(l.max_calls >= APPL_MAX_CALLS_MIN && l.max_calls <= APPL_MAX_CALLS_CEIL);
	CHECK(l.memory_mb >= APPL_MEMORY_MB_MIN && l.memory_mb <= APPL_MEMORY_MB_CEIL);
	CHECK(l.nofile >= APPL_NOFILE_MIN && l.nofile <= APPL_NOFILE_CEIL);
	CHECK(l.pids >= APPL_PIDS_MIN && l.pids <= APPL_PIDS_CEIL);
	CHECK(l.pool <= APPL_POOL_CEIL && l.cells >= 1 && l.cells <= APPL_CELLS_CEIL);
	CHECK(l.max_output_bytes <= l.stop_output_bytes);
	CHECK(l.stop_output_bytes <= APPL_STOP_OUTPUT_BYTES_CEIL);
}

/* Ask about "server.tool" (or "server.*", as the tool "*") for every role. */
static void ask(const struct policy *p, const char *pattern)
{
	const char *dot = strchr(pattern, '.');
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	size_t n;

	CHECK(dot && (size_t)(dot - pattern) <= APPL_POLICY_SERVER_NAME_MAX);
	n = (size_t)(dot - pattern);
	memcpy(server, pattern, n);
	server[n] = '\0';
	CHECK(policy_server_find(p, server) != NULL);
	for (size_t r = 0; r < policy_role_count(p); r++) {
		const char *role = policy_role_get(p, r)->name;
		for (int hint = 0; hint < 2; hint++) {
			enum policy_access acc;
			enum policy_verdict v =
				policy_tool_check(p, server, dot + 1, hint, role, &acc);
			CHECK(policy_verdict_text(v) != NULL);
			if (v == POLICY_OK)
				CHECK(acc == POLICY_ACCESS_READ || policy_role_get(p, r)->write);
		}
	}
}

static void servers_check(const struct policy *p)
{
	for (size_t i = 0; i < policy_server_count(p); i++) {
		const struct policy_server *s = policy_server_get(p, i);
		CHECK(strlen(s->name) <= APPL_POLICY_SERVER_NAME_MAX);
		CHECK(i == 0 || strcmp(policy_server_get(p, i - 1)->name, s->name) < 0);
		if (s->kind == POLICY_SERVER_STDIO) {
			CHECK(s->argc >= 1 && s->argv[0][0] == '/' && s->argv[s->argc] == NULL);
			CHECK(!s->cwd || s->cwd[0] == '/');
		} else {
			CHECK(policy_http_used(p) && s->url &&
			      s->nheaders <= APPL_POLICY_HEADERS_MAX);
			for (size_t h = 0; h < s->nheaders; h++)
				CHECK(!strpbrk(s->headers[h].value, "\r\n"));
		}
	}
}

static void roles_check(const struct policy *p)
{
	const char *def = policy_client_default_role(p);

	CHECK(!def || policy_role_find(p, def));
	for (size_t i = 0; i < policy_token_count(p); i++) {
		const struct policy_token *t = policy_token_get(p, i);
		CHECK(policy_role_find(p, t->role) != NULL);
		CHECK(policy_token_match(p, t->sha256) == t);
	}
	for (size_t r = 0; r < policy_role_count(p); r++) {
		const struct policy_role *role = policy_role_get(p, r);
		for (size_t i = 0; i < role->ntools; i++)
			ask(p, role->tools[i]);
	}
}

static void serial_span_check(const uint8_t *data, size_t size, const struct policy *p)
{
	struct appl_err err = {0};
	size_t off, n;
	uint64_t v;

	if (policy_serial_find((const char *)data, size, &off, &n, &v, &err) < 0)
		return;
	CHECK(n >= 1 && off <= size && n <= size - off && v >= 1);
	for (size_t i = off; i < off + n; i++)
		CHECK(data[i] >= '0' && data[i] <= '9');
	CHECK(!p || v == policy_serial(p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct appl_err err = {0};
	struct policy *p = NULL;
	int rc = policy_parse((const char *)data, size, "/etc/appliance", &p, &err);

	serial_span_check(data, size, p);

	if (rc < 0) {
		CHECK(p == NULL && err.code == rc && err.msg[0] != '\0');
		CHECK(strlen(err.msg) < sizeof(err.msg));
		return 0;
	}
	CHECK(p != NULL && policy_serial(p) >= 1);
	CHECK(policy_image_layout(p)[0] == '/');
	CHECK(strncmp(policy_image_digest(p), "sha256:", 7) == 0);
	CHECK(policy_runtime_runsc(p)[0] == '/');
	CHECK(!policy_audit_path(p) || policy_audit_path(p)[0] == '/');
	limits_check(p);
	servers_check(p);
	roles_check(p);
	policy_free(p);
	return 0;
}
