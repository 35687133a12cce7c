/* listen.h: check's own listeners on the host, which a probe cell must not
 * reach: opened before the cell starts, counted once it has ended. */
#ifndef APPL_CHECK_LISTEN_H
#define APPL_CHECK_LISTEN_H

#include <jansson.h>
#include <stddef.h>

#define CHECK_ADDRS_MAX 16 /* host addresses tried, per family and kind */

struct check_listeners {
	int fds[2 * CHECK_ADDRS_MAX];
	size_t n;
};

/* A listener (type SOCK_STREAM or SOCK_DGRAM) at addr (text, of family),
 * port chosen by the kernel, kept in l. The port, or -1 with errno. */
int check_listen_open(struct check_listeners *l, int family, int type, const char *addr);

/* A listener on every address of this machine's own interfaces but
 * loopback and IPv6 link-local ones; *addrs gets a new array of
 * [family (4 or 6), address, port]. 0, or -ENOMEM. */
int check_listen_hosts(struct check_listeners *l, int type, json_t **addrs);

/* Connections and datagrams that reached l. A connection to a listener is
 * queued by the kernel before connect() returns, a datagram before
 * sendto() does, so once the cell has ended there is nothing more to wait
 * for. */
unsigned check_listen_arrivals(struct check_listeners *l);

void check_listen_close(struct check_listeners *l);

#endif
