/* verify.h: the reading side of the audit log: `appliance audit verify`
 * and `appliance audit show` (docs/audit.md, "Verification").
 *
 * The log is untrusted input: whoever can write the file can put anything
 * in it, and the checker's job is to say so. Every line is read with a cap
 * (AUDIT_LINE_MAX), parsed by jansson with duplicate keys refused, and every
 * member is type-checked before it is used; a name of a previous file is
 * a plain file name in the directory of the file given, opened without
 * following symlinks, and the chain of files is followed at most
 * AUDIT_VERIFY_FILES_MAX steps (file indexes must fall by one at each step,
 * so a loop cannot be followed at all).
 */
#ifndef APPL_AUDIT_VERIFY_H
#define APPL_AUDIT_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "audit/format.h"
#include "base/err.h"
#include "base/limits.h"

#define AUDIT_VERIFY_FILES_MAX	   100000  /* files of one chain followed */
#define AUDIT_VERIFY_KEYS_MAX	   64	   /* --key values */
#define AUDIT_VERIFY_DIR_LOGS_MAX  4096	   /* logs in one directory (audit_verify_dir) */
#define AUDIT_VERIFY_DIR_FILES_MAX 1000000 /* files the logs of one directory read */

/* The files the logs of one directory have read (verify_seen.c). */
struct audit_seen;

struct audit_verify_opts {
	/* The auditor's k0 of each key the log was sealed with (borrowed;
	 * copies are made in locked memory and wiped). nkeys 0: seals are
	 * counted, not checked. */
	const unsigned char (*keys)[AUDIT_KEY_BYTES];
	size_t nkeys;
	/* --head FILE, or NULL: STATE/audit/ID.head of the log's absolute
	 * path. An empty FILE (/dev/null) says "no head": the head rule is
	 * skipped and the report says so. */
	const char *head_file;
	/* Where audit/ID.head and audit/ID.lock live; NULL: nowhere (then
	 * only head_file can give a head). */
	const char *state_dir;
	/* --seal FILE, or NULL: with keys, the sealing state the log is
	 * compared with is STATE/audit/ID.seal beside the head it was
	 * checked against (none with head_file: then only this gives one).
	 * An empty FILE says "none": not compared, and the report says so. */
	const char *seal_file;
	/* The time the newest seal's age is measured against (unix ms); 0:
	 * the clock's. */
	int64_t now_ms;
	/* Set by audit_verify_dir for each of its logs: head_file and
	 * seal_file are the log's NAME.head and NAME.seal in its directory,
	 * opened without following a symlink and read only when regular
	 * files, and messages name them so. */
	bool in_dir;
	/* The files the directory's logs read so far (borrowed; NULL: none
	 * kept): a file one of them read is a problem for the next. */
	struct audit_seen *seen;
};

/* Check file, and the files it continues (log.open's previous, in the
 * same directory), by every rule of docs/audit.md "Verification". Prints a
 * short report to out (borrowed): on success one line
 *
 *     FILE: 1234 lines in 2 files, chain intact, head matches (line 1234),
 *     sealed through line 1200 (2026-12-01T14:00:00.000Z), sealing state
 *     matches (epoch 12)
 *
 * (or "no seals", or "N seals not checked (no --key)") and notes such as
 * an acknowledged torn line, each "FILE:LINE: note: ..."; on a problem one
 * line "FILE:LINE: why" for the first problem, LINE the physical line in
 * that file (FILE is the previous file's path when the problem is in one;
 * "FILE: why" for a problem that is on no line). Returns 0 when all is
 * good, 1 when a problem was found, < 0 when the log could not be read at
 * all (err filled). */
int audit_verify(const char *file, const struct audit_verify_opts *o, FILE *out,
		 struct appl_err *err);

/* Check every log in the directory dir (not recursive), each as
 * audit_verify would with o (borrowed; its head_file and seal_file must
 * be NULL, in_dir and seen are set here), in byte order of their names:
 * every entry whose name does not end in `.` and digits (a rotated file,
 * which a log reaches through `previous`), `.head` or `.seal` is a log's
 * newest file; NAME.head and NAME.seal beside it, when there, are its
 * head and sealing state (as head_file and seal_file). An entry that is
 * not a regular file is a problem, never followed; so is a rotated file
 * that no log's chain reached, a NAME.head or NAME.seal with no log NAME,
 * and a file one log read that another reaches too (no file is read
 * twice). Prints each log's report as audit_verify does (a log that
 * cannot be read: one line "DIR/NAME: why"), then the stray files, then
 * one line
 *
 *     DIR: 3 logs, 2 intact, 1 with problems, 0 stray files
 *
 * A directory of no log says so before that line ("DIR: no log in this
 * directory"); one of more than AUDIT_VERIFY_DIR_LOGS_MAX is not checked
 * at all, and says so in one line (no summary). Returns 0 when every log
 * is intact and nothing is stray, 1 otherwise, < 0 when the directory
 * cannot be read, memory ran out, or its logs read more than
 * AUDIT_VERIFY_DIR_FILES_MAX files (err filled). */
int audit_verify_dir(const char *dir, const struct audit_verify_opts *o, FILE *out,
		     struct appl_err *err);

/* Print the lines of file (this file only) readably to out: appliance
 * starts and stops, runs (client, role, revision, code bytes), their calls
 * (tool, outcome, ms or the refusal's reason) and ends (reason, duration,
 * calls, output bytes). Text from the log is escaped; a line that is not
 * a log line is shown as such. No check is made: that is audit_verify's.
 * 0, or < 0 when the file cannot be read (err filled). */
int audit_show(const char *file, FILE *out, struct appl_err *err);

/* Whether show has a form for ev; an event it has none for is printed
 * as one this version does not know. */
bool audit_show_knows(const char *ev);

/* The same file summed up, one line per run, in the order the runs came:
 * when, who (client, role, revision, code size), the code tool it ran if
 * any, the tools it called and how often, how many calls were refused or
 * failed, and how it ended. At most 100000 runs are summed up. 0 or <0. */
int audit_show_runs(const char *file, FILE *out, struct appl_err *err);

#define AUDIT_TOOL_NAME_MAX APPL_CODE_TOOL_NAME_MAX /* bytes of a code tool's name */

/* Whether name is a code tool's name: policy_code_tool_name_valid. */
bool audit_tool_name_valid(const char *name);

struct audit_show_opts {
	bool runs;	  /* a line per run (audit_show_runs), not per event */
	const char *tool; /* only the lines of this code tool's runs (a run.start
			   * naming it and the later lines of that run), and its
			   * run.refused lines; NULL: every line */
};

/* audit_show or audit_show_runs as opts says. The ids of the tool's runs
 * are kept for at most 100000 runs; the lines of runs past that are not
 * shown, and a last line says how many runs that was. 0, or < 0 when the
 * file cannot be read or opts->tool is no code tool's name (err filled). */
int audit_show_with(const char *file, const struct audit_show_opts *opts, FILE *out,
		    struct appl_err *err);

#endif
