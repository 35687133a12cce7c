/* url.h: where the ledger's Redis server is, from its URL (pure parsing).
 *
 *   redis://HOST:PORT[/DB]   HOST a name, an IPv4 address or [an IPv6 one]
 *   unix:/PATH               a Unix socket (DB 0)
 *
 * No credentials (user:password@): a secret in a URL ends up in process
 * listings, logs and error messages. No TLS (rediss://): the ledger belongs
 * on a private network or a Unix socket. Neither is accepted.
 */
#ifndef APPL_LEDGER_URL_H
#define APPL_LEDGER_URL_H

#include <stdbool.h>

#include "base/err.h"
#include "ledger/limits.h"

#define LEDGER_PATH_MAX 107u /* sun_path less its NUL */

struct ledger_url {
	bool unix_socket;
	char path[LEDGER_PATH_MAX + 1]; /* unix_socket */
	char host[LEDGER_HOST_MAX + 1]; /* else: the name or address, no brackets */
	bool literal;			/* host is an address: nothing to look up */
	unsigned port;
	unsigned db;
};

/* Parse url (borrowed) into *u. 0, or -EINVAL with err saying which part
 * is wrong (the URL itself is not quoted). */
int ledger_url_parse(const char *url, struct ledger_url *u, struct appl_err *err);

#endif
