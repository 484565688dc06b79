#ifndef SIBLINGS_CMICROHTTPD_SHIM_H
#define SIBLINGS_CMICROHTTPD_SHIM_H

#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

/// MHD_OPTION_URI_LOG_CALLBACK's callback: called with the request line's URI, before the headers are read, on
/// the connection's thread; what it returns becomes the request's `con_cls`.
typedef void *(*CMicroHTTPD_URILogCallback)(void *cls, const char *uri, struct MHD_Connection *connection);

/// `MHD_start_daemon` is variadic (options as a NULL-terminated list), which Swift cannot call.
/// This fixed wrapper listens on 127.0.0.1:`port` only (0 lets the kernel choose), with a limit on
/// open connections, an idle timeout in seconds, an accept policy, completion and connection callbacks, an
/// error logger (given first, so that option errors reach it too; it only sees messages when `flags` has
/// MHD_USE_ERROR_LOG) and a URI log callback, all given `cls`. Returns NULL on failure.
static inline struct MHD_Daemon *CMicroHTTPD_start_loopback(
    unsigned int flags, uint16_t port, unsigned int connection_limit, unsigned int timeout_seconds,
    MHD_AcceptPolicyCallback accept_policy, MHD_AccessHandlerCallback handler,
    MHD_RequestCompletedCallback completed, MHD_NotifyConnectionCallback notify, MHD_LogCallback logger,
    CMicroHTTPD_URILogCallback uri_log, void *cls) {
    struct sockaddr_in address;
    memset(&address, 0, sizeof(address));
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return MHD_start_daemon(
        flags, port, accept_policy, cls, handler, cls,
        MHD_OPTION_EXTERNAL_LOGGER, logger, cls,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
        MHD_OPTION_NOTIFY_COMPLETED, completed, cls,
        MHD_OPTION_NOTIFY_CONNECTION, notify, cls,
        MHD_OPTION_URI_LOG_CALLBACK, uri_log, cls,
        MHD_OPTION_END);
}

/// Shuts a quiesced listening socket down so it takes no more connections, without closing it (libmicrohttpd's
/// threads may still hold the descriptor until the daemon stops). Returns shutdown's result.
static inline int CMicroHTTPD_refuse_connections(MHD_socket listening) {
    return shutdown(listening, SHUT_RDWR);
}

/// The port the daemon listens on (`MHD_get_daemon_info` is variadic); 0 if it cannot say.
static inline uint16_t CMicroHTTPD_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// An IPv4 or IPv6 address as text: writes a NUL-terminated address into `buffer` and returns 1, or returns
/// 0 for another family.
static inline int CMicroHTTPD_address_text(const struct sockaddr *address, char *buffer, size_t size) {
    if (address == NULL) return 0;
    if (address->sa_family == AF_INET) {
        return inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, buffer, size) != NULL;
    }
    if (address->sa_family == AF_INET6) {
        return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, buffer, size) != NULL;
    }
    return 0;
}

/// The peer's IP address as text (`MHD_get_connection_info` is variadic), as CMicroHTTPD_address_text
/// writes it; 0 if libmicrohttpd cannot say.
static inline int CMicroHTTPD_client_address(struct MHD_Connection *connection, char *buffer, size_t size) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL) return 0;
    return CMicroHTTPD_address_text(info->client_addr, buffer, size);
}

/// The connection's socket (`MHD_get_connection_info` is variadic); -1 if it cannot say.
static inline int CMicroHTTPD_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/// What MHD_OPTION_NOTIFY_CONNECTION stored for the connection; NULL if nothing.
static inline void *CMicroHTTPD_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

/// `MHD_upgrade_action` is variadic; this closes an upgraded connection (MHD_UPGRADE_ACTION_CLOSE), which
/// an application must do exactly once for every connection it was handed by an upgrade handler.
static inline enum MHD_Result CMicroHTTPD_upgrade_close(struct MHD_UpgradeResponseHandle *urh) {
    return MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

#endif
