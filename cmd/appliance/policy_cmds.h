/* policy_cmds.h: the signing subcommands, keygen, sign and verify.
 *
 * Each takes argv with argv[0] the subcommand's name and returns the exit
 * status: 0 on success, 1 on a refusal or failure (one line on stderr
 * saying why), 2 on a usage error.
 */
#ifndef APPL_CMD_POLICY_CMDS_H
#define APPL_CMD_POLICY_CMDS_H

/* keygen --public FILE --secret FILE */
int cmd_keygen(int argc, char **argv);

/* sign --secret FILE POLICY: writes POLICY.sig */
int cmd_sign(int argc, char **argv);

/* verify [--trust PUBKEY | --trust-dir DIR] [--state-dir DIR] POLICY.sig */
int cmd_verify(int argc, char **argv);

/* What `appliance help keygen|sign|verify` and `appliance keygen|sign|verify
 * --help` print. */
void keygen_help(void);
void sign_help(void);
void verify_help(void);

#endif
