/* version.h: the appliance's version, in one place: `appliance version`,
 * serverInfo to clients, clientInfo to upstream servers. */
#ifndef APPL_BASE_VERSION_H
#define APPL_BASE_VERSION_H

#define APPL_VERSION "0.1.0"

#endif
