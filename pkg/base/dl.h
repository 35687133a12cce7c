/* dl.h: a shared library loaded when it is first needed, not at exec. */
#ifndef APPL_BASE_DL_H
#define APPL_BASE_DL_H

#include <stddef.h>

#include "base/err.h"

/* One function of the library: its symbol, and where its address goes (a
 * function pointer of the right type, cast to void **). */
struct appl_dl_sym {
	const char *name;
	void **slot;
};

/* A library and its functions; rc and why hold the first attempt's answer
 * (zeroed before it: not tried). package is the Debian package that ships
 * soname, named when it cannot be loaded: dpkg-shlibdeps does not see a
 * dlopen, so the .deb only recommends it (debian/control). NULL: none. */
struct appl_dl_lib {
	const char *soname;
	const char *package;
	const struct appl_dl_sym *syms;
	size_t nsyms;
	int rc; /* 0 not tried, 1 loaded, -EIO failed */
	char why[APPL_ERR_MSG_MAX];
};

/* The appl_dl_lib of soname, shipped by the Debian package pkg, whose
 * functions are the array syms. */
#define APPL_DL_LIB(so, pkg, symbols)                                                              \
	{                                                                                          \
		.soname = (so), .package = (pkg), .syms = (symbols),                               \
		.nsyms = sizeof(symbols) / sizeof((symbols)[0])                                    \
	}

/* Load lib and fill every slot, once (one thread only; the appliance loads
 * from its loop): 0, or -EIO with err saying what was missing, on this and
 * every later call. */
int appl_dl_load(struct appl_dl_lib *lib, struct appl_err *err);

#endif
