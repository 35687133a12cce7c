/* json.h: strict loading of untrusted JSON on top of jansson.
 *
 * Every JSON document the appliance reads (a manifest, a policy, a JSON-RPC
 * message, a runner line) comes through appl_json_load: the size is checked
 * before jansson allocates anything, nesting depth is checked by a byte scan
 * (jansson's own limit is a build-time 2048), duplicate keys, \u0000 in
 * strings and a raw NUL byte anywhere are rejected, and trailing bytes after
 * the value are an error.
 */
#ifndef APPL_JSON_JSON_H
#define APPL_JSON_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

/* Parse buf[0..len) (not NUL-terminated) as exactly one JSON value.
 * Refuses len > max_len before parsing. Returns a new reference, or NULL with
 * err filled ("what" names the document in the message). */
json_t *appl_json_load(const char *buf, size_t len, size_t max_len, unsigned max_depth,
		       const char *what, struct appl_err *err);

/* Refuse any key of obj not listed in allowed (NULL-terminated). path names
 * obj in messages ("limits", "config.rootfs"); borrowed. */
int appl_json_keys_check(const json_t *obj, const char *const *allowed, const char *path,
			 struct appl_err *err);

/* 1 when v (a parsed value) nests at most levels levels of arrays and
 * objects, else 0. The recursion is bounded by levels, not by v. */
int appl_json_depth_within(const json_t *v, unsigned levels);

/* The length of v as json_dumpb(v, JSON_COMPACT | JSON_ENCODE_ANY) writes
 * it, counted without writing it (a byte scan of each string, several
 * times faster than jansson's encoder): for the caps on arguments, results
 * and lines, and to size a buffer before the one real encoding. */
size_t appl_json_size(const json_t *v);

/* jansson's name for a value's type, for messages. */
const char *appl_json_type_name(const json_t *v);

#endif
