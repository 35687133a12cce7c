/* fuzz_proto.c: the runner-line parser and order checker on hostile bytes.
 *
 * The input is split at '\n' into lines, as the host's reader splits the
 * runner's stream; each line is parsed, fed to a state that starts as a
 * running cell, and every accepted message is pushed through the host-side
 * encoders (a call's args answered as a result, out data as an error), so
 * whatever the parser lets through is also something the encoders handle.
 * File entries the order checker lets through go to a files collector
 * under small limits, whose list must always make a result object. After
 * done the state goes on as a kept runner's (a session's): the next cell.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cell.h"
#include "cell/files.h"
#include "cell/proto.h"

static const struct cell_files_limits FILES = {
	.max_count = 3, .max_bytes = 100000, .max_total = 150000};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void answer(const struct cell_msg *msg)
{
	char *line = NULL;
	size_t len = 0;

	if (msg->type == CELL_MSG_CALL) {
		if (cell_proto_result_encode(msg->u.call.id, msg->u.call.args, &line, &len, NULL) ==
		    0)
			free(line);
	} else if (msg->type == CELL_MSG_OUT) {
		if (cell_proto_error_encode(1, CELL_ERR_REFUSED, json_string_value(msg->u.out.data),
					    json_string_length(msg->u.out.data), &line, &len,
					    NULL) == 0)
			free(line);
	} else if (msg->type == CELL_MSG_DONE && msg->u.done.error) {
		if (cell_proto_cell_encode(json_string_value(msg->u.done.error),
					   json_string_length(msg->u.done.error),
					   msg->u.done.result, &FILES, NULL, false, &line, &len,
					   NULL) == 0)
			free(line);
	}
}

/* The files' list as the result object shows it: it must always make one. */
static void files_check(const struct cell_files *f)
{
	struct cell_outcome o = {.out = "", .files = cell_files_list(f)};
	json_t *obj = cell_outcome_json(&o);

	if (!obj)
		__builtin_trap();
	json_decref(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cell_files *files = cell_files_new(&FILES);
	struct cell_proto_state *st = cell_proto_state_new();
	const char *p = (const char *)data;
	const char *end = p + size;
	struct appl_err err;

	if (!st || !files) {
		cell_proto_state_free(st);
		cell_files_free(files);
		return 0;
	}
	while (p <= end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct cell_msg msg;

		if (cell_proto_parse(p, len, &msg, &err) == 0) {
			/* a ready line moves a fresh state on to running */
			int fed = cell_proto_state_feed(st, &msg, &err);

			if (fed == 0 && cell_proto_state_phase(st) == CELL_PHASE_IDLE)
				cell_proto_state_cell_sent(st, &err);
			/* a kept runner (a session's) after done: the next cell,
			 * its call ids going on rising, its files a list of its own */
			if (fed == 0 && cell_proto_state_phase(st) == CELL_PHASE_DONE) {
				if (cell_proto_state_again(st, &err) < 0 ||
				    cell_proto_state_cell_sent(st, &err) < 0)
					__builtin_trap();
				files_check(files);
				cell_files_free(files);
				if (!(files = cell_files_new(&FILES))) {
					cell_proto_msg_clear(&msg);
					cell_proto_state_free(st);
					return 0;
				}
			}
			/* what the order allows, the collector takes */
			if (fed == 0 && msg.type == CELL_MSG_FILE &&
			    cell_files_feed(files, &msg, &err) < 0)
				__builtin_trap();
			answer(&msg);
			cell_proto_msg_clear(&msg);
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	files_check(files);
	cell_files_free(files);
	cell_proto_state_free(st);
	return 0;
}
