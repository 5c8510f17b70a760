/*
 * activation.h: the listening sockets a service manager hands berthd
 * (systemd's socket activation: the sd_listen_fds protocol), and the
 * readiness message it waits for (sd_notify's READY=1).
 *
 * A service manager that holds berthd's sockets lets clients connect
 * before berthd runs: their connections wait in the socket's backlog, and
 * berthd answers them once it serves. The protocol, as systemd documents
 * it in sd_listen_fds(3) and sd_notify(3):
 *
 *   LISTEN_PID      the pid the sockets are meant for (berthd's own, or
 *                   the variables were left for another process);
 *   LISTEN_FDS      how many sockets there are, from descriptor 3 on;
 *   LISTEN_FDNAMES  their names, separated by ':' (FileDescriptorName=);
 *   NOTIFY_SOCKET   a datagram socket to send "READY=1" to (Type=notify).
 *
 * berthd takes the socket named "socket" as its Unix socket (--socket),
 * "listen" as its TCP socket (--listen; still only with --token-file) and
 * "http" as the HTTP gateway's (--http). A Unix socket under another name,
 * or with no name, is the Unix socket when there is only one; a TCP socket
 * must be named. A passed socket takes the place of the option: berthd
 * neither binds nor removes it, and serves --listen or --http on it even
 * when the option is not given.
 *
 * Written from the protocol's description rather than with libsystemd:
 * it is two environment variables and a loop over descriptors, and berth
 * then needs no library that is not on every system it runs on.
 *
 * Process-wide state: there is one environment and one set of passed
 * descriptors per process. Loop thread only.
 */
#ifndef BERTH_API_ACTIVATION_H
#define BERTH_API_ACTIVATION_H

#include <uv.h>

/* api_activation_init reads and unsets LISTEN_PID, LISTEN_FDS and
 * LISTEN_FDNAMES, checks every passed descriptor (a listening stream
 * socket, of the family its name asks for, names not repeated) and marks
 * it close-on-exec, so that no tool inherits it. Call it before anything
 * spawns a process. Returns the number of sockets passed (0 when none or
 * when they were meant for another pid), or -1 with *errmsg (malloc'd)
 * naming the descriptor and what is wrong with it. */
int api_activation_init(char **errmsg);

/* api_activation_address returns where the socket passed as name
 * ("socket", "listen", "http") listens, "HOST:PORT" ("[V6]:PORT") for TCP
 * or the path of a Unix socket (borrowed, valid until the process ends),
 * or NULL when none was passed under that name. */
const char *api_activation_address(const char *name);

/* api_activation_open_pipe opens pipe (initialized, not yet open) on the
 * Unix socket passed as "socket". Returns 1 when it did (the pipe owns
 * the descriptor then), 0 when no such socket was passed, or a negative
 * libuv error. */
int api_activation_open_pipe(uv_pipe_t *pipe);

/* api_activation_tcp_bind opens tcp (initialized, not yet bound) on the
 * TCP socket passed as name when there is one (the handle owns it then),
 * else binds it to addr. Returns 0 or a negative libuv error. */
int api_activation_tcp_bind(uv_tcp_t *tcp, const char *name,
			    const struct sockaddr *addr);

/* api_activation_notify sends state ("READY=1") to $NOTIFY_SOCKET when a
 * service manager set it; nothing otherwise. A failure is logged, never
 * fatal: the manager then decides by its own time-out. */
void api_activation_notify(const char *state);

#endif
