/* dl.c: see dl.h. */
#include "base/dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

int appl_dl_load(struct appl_dl_lib *lib, struct appl_err *err)
{
	void *h;

	if (lib->rc == 0) {
		lib->rc = -EIO;
		if (!(h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL))) {
			const char *e = dlerror();
			snprintf(lib->why, sizeof(lib->why), "%s could not be loaded: %s%s%s",
				 lib->soname, e ? e : "unknown error",
				 lib->package ? "; install the Debian package " : "",
				 lib->package ? lib->package : "");
			goto out;
		}
		for (size_t i = 0; i < lib->nsyms; i++)
			if (!(*lib->syms[i].slot = dlsym(h, lib->syms[i].name))) {
				snprintf(lib->why, sizeof(lib->why), "%s has no %s", lib->soname,
					 lib->syms[i].name);
				goto out;
			}
		lib->rc = 1;
	}
out:
	if (lib->rc < 0)
		return appl_err_set(err, lib->rc, "%s", lib->why);
	return 0;
}
