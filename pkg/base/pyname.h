/* pyname.h: the Python names a cell's namespaces, functions and parameters
 * cannot take, in one place for the policy, the stubs and the runner
 * protocol. Python 3.11, the interpreter of the cell image. */
#ifndef APPL_BASE_PYNAME_H
#define APPL_BASE_PYNAME_H

#include <stdbool.h>

/* A keyword: `class.run()` or `f(from=1)` would not even parse. */
bool appl_py_keyword(const char *s);

/* A name the cell's globals already hold (the builtins, with those `site`
 * adds, and the runner's ToolError, asyncio, tools and a code tool's args):
 * a namespace of that name would hide it from the code. */
bool appl_py_reserved(const char *s);

#endif
