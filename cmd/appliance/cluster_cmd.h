/* cluster_cmd.h: `appliance cluster-key FILE`, the key the replicas of one
 * deployment share (docs/scale-out.md).
 */
#ifndef APPL_CMD_CLUSTER_CMD_H
#define APPL_CMD_CLUSTER_CMD_H

/* cluster-key FILE (argv[0] "cluster-key"): 32 random bytes as 64 hex
 * digits and a newline, written to a new FILE (mode 0600; an existing one
 * is never replaced). Returns the exit status: 0, 1 when it could not be
 * written, 2 on a usage error. */
int cmd_cluster_key(int argc, char **argv);

/* What `appliance help cluster-key` prints. */
void cluster_key_help(void);

#endif
