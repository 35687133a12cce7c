/* internal.h: what trace.c (spans) hands export.c (the tracer); for
 * pkg/trace's files only. */
#ifndef APPL_TRACE_INTERNAL_H
#define APPL_TRACE_INTERNAL_H

#include <jansson.h>

#include "trace/trace.h"

/* A span that ended, as its OTLP JSON object (a reference is taken): held
 * for the next batch, or counted as dropped when the queue is full. */
void tracer_queue(struct tracer *t, json_t *span);

/* n spans that could not be made into their object: counted as dropped. */
void tracer_lost(struct tracer *t, unsigned n);

#endif
