/* limits.h: every cap and timing of the ledger client, in one place (the
 * ledger's own: pkg/base/limits.h holds the appliance's). */
#ifndef APPL_LEDGER_LIMITS_H
#define APPL_LEDGER_LIMITS_H

/* ---- what a caller hands in ---------------------------------------------- */
#define LEDGER_KEY_MAX	  64u				  /* a key, in bytes */
#define LEDGER_VALUE_MAX  (4u * 1024 * 1024 + 64u * 1024) /* a stored value */
#define LEDGER_TTL_MS_MAX (24u * 60 * 60 * 1000)	  /* a claim's life */
#define LEDGER_URL_MAX	  512u				  /* the whole URL */
#define LEDGER_HOST_MAX	  253u				  /* a DNS name, or an address */
#define LEDGER_DB_MAX	  65535u

/* ---- how long, how many --------------------------------------------------- */
/* A command not answered within this is told LEDGER_ERROR "timed out". */
#define LEDGER_TIMEOUT_MS 2000u
/* Commands of callers held at once (sent, or timed out and still owed a
 * reply by the server); past it a new one is told "too many in flight". */
#define LEDGER_INFLIGHT_MAX 256u
/* Bytes of values being stored at once (LEDGER_INFLIGHT_MAX values of
 * LEDGER_VALUE_MAX would be a gigabyte of output buffer). */
#define LEDGER_PUT_BYTES_MAX (32u * 1024 * 1024)
/* Reconnecting: the first wait, doubled after each failure up to the last. */
#define LEDGER_BACKOFF_MIN_MS 100u
#define LEDGER_BACKOFF_MAX_MS 5000u
/* While connected but not ready, a probe is sent this often. */
#define LEDGER_PROBE_MS 1000u
/* The probe key's life (one key for every replica, overwritten). */
#define LEDGER_PROBE_TTL_MS 60000u

/* ---- what the server sends ------------------------------------------------ */
/* A status, error or integer line; Redis's are a few dozen bytes. */
#define LEDGER_LINE_MAX 1024u
/* A bulk reply: a tag byte and a value. */
#define LEDGER_BULK_MAX (1u + LEDGER_VALUE_MAX)
/* Bytes read from the socket at once. */
#define LEDGER_READ_CHUNK (64u * 1024)
/* A reason text given to a caller, NUL included. */
#define LEDGER_WHY_MAX 192u

/* ---- the resolver thread -------------------------------------------------- */
#define LEDGER_RESOLVER_STACK (512u * 1024)

#endif
