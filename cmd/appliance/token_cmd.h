/* token_cmd.h: `appliance token NAME ROLE`, a new bearer token for an HTTP
 * client and the clients.tokens entry that admits it.
 */
#ifndef APPL_CMD_TOKEN_CMD_H
#define APPL_CMD_TOKEN_CMD_H

/* The prefix of every token: a secret scanner, or a person, can tell an
 * appliance token in a log or a paste at a glance. */
#define TOKEN_PREFIX "appliance_"

/* Random bytes in a token: 256 bits, 43 base64url characters. */
#define TOKEN_RANDOM_BYTES 32

/* token NAME ROLE (argv[0] "token"). Prints the token on stdout, once, and
 * on the next line {"name": NAME, "sha256": HEX, "role": ROLE}, HEX the
 * SHA-256 of the token's text as sent after "Authorization: Bearer ";
 * writes nothing to disk. Returns the exit status: 0, 1 when the output
 * could not be written, 2 on a usage error (NAME or ROLE not a name a
 * policy takes). */
int cmd_token(int argc, char **argv);

/* What `appliance help token` and `appliance token --help` print. */
void token_help(void);

#endif
