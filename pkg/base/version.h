/* version.h: the appliance's version, in one place: `appliance version`
 * (also --version and -V), serverInfo to clients, clientInfo to upstream
 * servers, the audit log's start lines. docs/appliance.1 names it in its
 * .TH line too (tests/integration/test_cli.py holds the two together). */
#ifndef APPL_BASE_VERSION_H
#define APPL_BASE_VERSION_H

#define APPL_VERSION "0.1.0"

#endif
