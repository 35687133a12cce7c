/* listen.c: check's listeners on the host (listen.h). */
#define _GNU_SOURCE
#include "check/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void *addr_of(struct sockaddr_storage *ss, int family)
{
	return family == AF_INET6 ? (void *)&((struct sockaddr_in6 *)ss)->sin6_addr
				  : (void *)&((struct sockaddr_in *)ss)->sin_addr;
}

int check_listen_open(struct check_listeners *l, int family, int type, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len =
		family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	int fd, port;

	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)family;
	if (l->n == sizeof(l->fds) / sizeof(l->fds[0]) ||
	    inet_pton(family, addr, addr_of(&ss, family)) != 1)
		return -1;
	if ((fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 8) < 0) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		close(fd);
		return -1;
	}
	port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					: ((struct sockaddr_in *)&ss)->sin_port);
	l->fds[l->n++] = fd;
	return port;
}

/* Only addresses of this machine's own interfaces, so a packet that got
 * out of the cell would still never leave the host. IPv6 link-local
 * addresses are left out: they need an interface scope. */
static bool address_wanted(const struct ifaddrs *ifa, char *text, size_t cap)
{
	const void *in;

	if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK))
		return false;
	if (ifa->ifa_addr->sa_family == AF_INET) {
		in = &((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
	} else if (ifa->ifa_addr->sa_family == AF_INET6) {
		const struct in6_addr *a6 =
			&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;

		if (IN6_IS_ADDR_LINKLOCAL(a6) || IN6_IS_ADDR_LOOPBACK(a6))
			return false;
		in = a6;
	} else {
		return false;
	}
	return inet_ntop(ifa->ifa_addr->sa_family, in, text, (socklen_t)cap) != NULL;
}

int check_listen_hosts(struct check_listeners *l, int type, json_t **addrs)
{
	struct ifaddrs *all, *ifa;
	char text[INET6_ADDRSTRLEN];
	int port;

	*addrs = json_array();
	if (!*addrs || getifaddrs(&all) < 0) {
		json_decref(*addrs);
		*addrs = NULL;
		return -ENOMEM;
	}
	for (ifa = all; ifa; ifa = ifa->ifa_next) {
		if (!address_wanted(ifa, text, sizeof(text)))
			continue;
		if ((port = check_listen_open(l, ifa->ifa_addr->sa_family, type, text)) < 0)
			continue; /* a tentative or duplicate address */
		json_array_append_new(
			*addrs, json_pack("[i, s, i]", ifa->ifa_addr->sa_family == AF_INET6 ? 6 : 4,
					  text, port));
	}
	freeifaddrs(all);
	return 0;
}

unsigned check_listen_arrivals(struct check_listeners *l)
{
	unsigned n = 0;
	char buf[64];

	for (size_t i = 0; i < l->n; i++) {
		int type = 0, fd;
		socklen_t len = sizeof(type);

		getsockopt(l->fds[i], SOL_SOCKET, SO_TYPE, &type, &len);
		if (type == SOCK_STREAM) {
			while ((fd = accept4(l->fds[i], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
				close(fd);
				n++;
			}
		} else {
			while (recv(l->fds[i], buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC) >= 0)
				n++;
		}
	}
	return n;
}

void check_listen_close(struct check_listeners *l)
{
	for (size_t i = 0; i < l->n; i++)
		close(l->fds[i]);
	l->n = 0;
}
