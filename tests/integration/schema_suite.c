/* schema_suite.c: pkg/schema against the official JSON-Schema-Test-Suite.
 *
 * Runs every case of <suite>/draft2020-12/ *.json and <suite>/draft7/ *.json
 * (files at the top of each folder; the suite's optional/ folder is not
 * run). The only cases not run are the groups listed, each with a reason, in
 * the exclusions file; and an excluded group must still be refused by
 * schema_new with -ENOTSUP, so an exclusion is a fail-closed test, not a
 * skip. A "*" line excludes the groups of a file that schema_new refuses;
 * a group of that file which compiles is run and must pass. An exclusion
 * that matches nothing is an error too.
 *
 * Prints "schema-suite: N passed, N failed, N excluded"; exits non-zero when
 * any case failed. Run from the top of the repository:
 *
 *   SCHEMA_SUITE_DIR        default tests/data/json-schema-test-suite
 *   SCHEMA_SUITE_EXCLUSIONS default tests/data/schema-suite-exclusions.txt
 *   SCHEMA_SUITE_VERBOSE=1  print every case
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/schema.h"

#define LINE_MAX_LEN 1024

struct exclusion {
	char file[256];	 /* "draft7/refRemote.json" */
	char group[512]; /* a group's description, or "*" for the whole file */
	unsigned used;
};

struct run {
	struct exclusion *ex;
	size_t n_ex;
	unsigned long passed, failed, excluded;
	int verbose;
	enum schema_draft draft; /* the folder's dialect, for schemas without $schema */
};

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* One line "file | group | reason"; the group may itself hold " | ". */
static int exclusion_parse(char *line, struct exclusion *ex)
{
	char *first = strstr(line, " | "), *last = NULL, *p;

	for (p = line; (p = strstr(p, " | ")); p += 3)
		last = p;
	if (!first || last == first || !*trim(last + 3))
		return -1;
	*first = '\0';
	*last = '\0';
	snprintf(ex->file, sizeof(ex->file), "%s", trim(line));
	snprintf(ex->group, sizeof(ex->group), "%s", trim(first + 3));
	return 0;
}

static int exclusions_load(struct run *run, const char *path)
{
	char line[LINE_MAX_LEN];
	unsigned lineno = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "schema-suite: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *s = trim(line);
		lineno++;
		if (!*s || *s == '#')
			continue;
		struct exclusion *grown = realloc(run->ex, (run->n_ex + 1) * sizeof(*grown));
		if (!grown)
			abort();
		run->ex = grown;
		memset(&run->ex[run->n_ex], 0, sizeof(run->ex[0]));
		if (exclusion_parse(s, &run->ex[run->n_ex]) < 0) {
			fprintf(stderr, "schema-suite: %s:%u: want \"file | group | reason\"\n",
				path, lineno);
			fclose(f);
			return -1;
		}
		run->n_ex++;
	}
	fclose(f);
	return 0;
}

static struct exclusion *excluded(struct run *run, const char *file, const char *group)
{
	for (size_t i = 0; i < run->n_ex; i++) {
		struct exclusion *ex = &run->ex[i];
		if (!strcmp(ex->file, file) &&
		    (!strcmp(ex->group, "*") || !strcmp(ex->group, group)))
			return ex;
	}
	return NULL;
}

static void fail(struct run *run, const char *file, const char *group, const char *test,
		 const char *why)
{
	run->failed++;
	printf("FAIL %s | %s | %s: %s\n", file, group, test, why);
}

static void run_tests(struct run *run, const char *file, const char *group, const struct schema *s,
		      const json_t *tests)
{
	size_t i;
	json_t *t;

	json_array_foreach(tests, i, t) {
		const char *desc = json_string_value(json_object_get(t, "description"));
		int want = json_is_true(json_object_get(t, "valid"));
		struct appl_err err = {0};
		int rc = schema_validate(s, json_object_get(t, "data"), &err);
		char why[700];

		if (rc != 0 && rc != -EINVAL) {
			snprintf(why, sizeof(why), "error %d: %s", rc, err.msg);
			fail(run, file, group, desc, why);
		} else if ((rc == 0) != want) {
			snprintf(why, sizeof(why), "expected %s, got %s%s",
				 want ? "valid" : "invalid",
				 rc == 0 ? "valid" : "invalid: ", rc == 0 ? "" : err.msg);
			fail(run, file, group, desc, why);
		} else {
			run->passed++;
			if (run->verbose)
				printf("ok   %s | %s | %s%s%s\n", file, group, desc,
				       rc ? " -> " : "", rc ? err.msg : "");
		}
	}
}

static void run_group(struct run *run, const char *file, const json_t *g)
{
	const char *group = json_string_value(json_object_get(g, "description"));
	const json_t *tests = json_object_get(g, "tests");
	struct exclusion *ex = excluded(run, file, group);
	struct appl_err err = {0};
	struct schema *s = NULL;
	int rc = schema_new_draft(json_object_get(g, "schema"), run->draft, &s, &err);
	char why[700];

	/* A whole-file exclusion covers the groups the validator refuses; a
	 * group of that file which compiles is run like any other. */
	if (ex && !strcmp(ex->group, "*") && rc == 0)
		ex = NULL;
	if (ex) {
		ex->used++;
		run->excluded += json_array_size(tests);
		if (rc != -ENOTSUP) {
			snprintf(why, sizeof(why), "excluded, but not refused as unsupported (%d)",
				 rc);
			fail(run, file, group, "(compile)", why);
		} else if (run->verbose) {
			printf("excl %s | %s -> %s\n", file, group, err.msg);
		}
		schema_free(s);
		return;
	}
	if (rc < 0) {
		snprintf(why, sizeof(why), "schema refused (%d): %s", rc, err.msg);
		run->failed += json_array_size(tests);
		printf("FAIL %s | %s | (all %zu tests): %s\n", file, group, json_array_size(tests),
		       why);
		return;
	}
	run_tests(run, file, group, s, tests);
	schema_free(s);
}

static int run_file(struct run *run, const char *dir, const char *draft, const char *name)
{
	char path[4096], file[512];
	json_error_t jerr;
	json_t *groups;
	size_t i;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, draft, name);
	snprintf(file, sizeof(file), "%s/%s", draft, name);
	groups = json_load_file(path, JSON_ALLOW_NUL, &jerr);
	if (!json_is_array(groups)) {
		fprintf(stderr, "schema-suite: %s: %s\n", path, jerr.text);
		json_decref(groups);
		return -1;
	}
	for (i = 0; i < json_array_size(groups); i++)
		run_group(run, file, json_array_get(groups, i));
	json_decref(groups);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_draft(struct run *run, const char *dir, const char *draft)
{
	char path[4096];
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, draft);
	d = opendir(path);
	if (!d) {
		fprintf(stderr, "schema-suite: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len < 6 || strcmp(de->d_name + len - 5, ".json"))
			continue;
		char **grown = realloc(names, (n + 1) * sizeof(*names));
		if (!grown || !(grown[n] = strdup(de->d_name)))
			abort();
		names = grown;
		n++;
	}
	closedir(d);
	if (n == 0) {
		fprintf(stderr, "schema-suite: %s: no test files\n", path);
		rc = -1;
	}
	qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		if (run_file(run, dir, draft, names[i]) < 0)
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(void)
{
	const char *dir = getenv("SCHEMA_SUITE_DIR");
	const char *exf = getenv("SCHEMA_SUITE_EXCLUSIONS");
	const char *verbose = getenv("SCHEMA_SUITE_VERBOSE");
	struct run run = {0};
	int rc = 0;

	dir = dir && *dir ? dir : "tests/data/json-schema-test-suite";
	exf = exf && *exf ? exf : "tests/data/schema-suite-exclusions.txt";
	run.verbose = verbose && *verbose && strcmp(verbose, "0");
	if (exclusions_load(&run, exf) < 0)
		return 2;
	run.draft = SCHEMA_DRAFT_2020_12;
	if (run_draft(&run, dir, "draft2020-12") < 0)
		rc = 2;
	run.draft = SCHEMA_DRAFT_07;
	if (run_draft(&run, dir, "draft7") < 0)
		rc = 2;
	for (size_t i = 0; i < run.n_ex; i++) {
		if (run.ex[i].used)
			continue;
		printf("FAIL exclusion matches nothing: %s | %s\n", run.ex[i].file,
		       run.ex[i].group);
		run.failed++;
	}
	printf("schema-suite: %lu passed, %lu failed, %lu excluded\n", run.passed, run.failed,
	       run.excluded);
	free(run.ex);
	if (rc)
		return rc;
	return run.failed ? 1 : 0;
}
