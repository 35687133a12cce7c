/* process.h: the process-wide state the engine keeps, in one place: the
 * children reaped. (main blocks the signals and sets the subreaper; the
 * engine watches them on its loop.) */
#ifndef APPL_ENGINE_PROCESS_H
#define APPL_ENGINE_PROCESS_H

/* Reap every child that has ended: at the end of a command, after its
 * servers and sandboxes were stopped, so none is left a zombie. */
void engine_reap_children(void);

#endif
