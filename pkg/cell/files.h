/* files.h: the files a cell left in /out, as the host takes them from its
 * runner's `file` and `skip` lines (docs/runner-protocol.md).
 *
 * Pure code, no system calls. The runner shares its interpreter with hostile
 * code, which can forge any of these lines, so nothing the runner says is
 * taken on trust: limits.files is enforced here again (a file's data past a
 * limit is dropped as it comes, never held), each file's type is judged from
 * its first bytes (never from its name), and each name, whether the file is
 * returned or left out, is reduced to a safe basename that no other entry
 * of the same run has.
 */
#ifndef APPL_CELL_FILES_H
#define APPL_CELL_FILES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "cell/proto.h"

#define CELL_FILE_TYPE_OCTETS "application/octet-stream"

/* limits.files' defaults (limits.h). */
void cell_files_limits_init(struct cell_files_limits *lim);

struct cell_files;

/* A collector for one run under lim (copied). New, or NULL when out of
 * memory. */
struct cell_files *cell_files_new(const struct cell_files_limits *lim);
void cell_files_free(struct cell_files *f);

/* Take one parsed `file` or `skip` message (borrowed; any other type is
 * refused). A chunk while no file is open begins one; the chunks of one file
 * must come one after the other, as cell_proto_state_feed checks. 0, or
 * -EINVAL (a chunk of another name while a file is open, more entries than
 * the protocol allows) or -ENOMEM with err. */
int cell_files_feed(struct cell_files *f, const struct cell_msg *m, struct appl_err *err);

/* The entries so far, in the order they came (borrowed; valid until the
 * next feed or cell_files_free): an array of
 *   {"name", "bytes", "type", "sha256", "text" or "data"}   returned
 *   {"name", "reason"}                                      left out
 * where name is the safe name, type a MIME type, sha256 64 lowercase hex
 * digits, text the file as a string (text types), data its base64 (the
 * others) and reason a cell_file_why_name word. A file still open is not
 * listed. */
const json_t *cell_files_list(const struct cell_files *f);

/* The MIME type of a file from its bytes (static): image/png, image/jpeg,
 * image/gif and image/webp by their signatures; UTF-8 text without NUL or
 * C0 controls other than tab, newline, carriage return and form feed as
 * application/json (one strict JSON value), text/csv (two or more non-empty
 * lines, each with the same number of commas, at least one), or text/plain;
 * anything else CELL_FILE_TYPE_OCTETS. */
const char *cell_file_type(const unsigned char *data, size_t len);

/* Whether type (from cell_file_type) is one returned as text. */
bool cell_file_type_is_text(const char *type);

/* name[0..len) (any bytes) as a safe basename into out: what follows the
 * last '/', each character outside [A-Za-z0-9._-] replaced by '_', leading
 * dots removed, cut to APPL_FILE_NAME_MAX bytes, "file" when nothing is
 * left. */
void cell_file_name_safe(const char *name, size_t len, char out[APPL_FILE_NAME_MAX + 1]);

#endif
