import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Ports on 127.0.0.1 for servers a test starts itself (nats-server, nginx).
public enum Loopback {
    /// A port no socket holds now: the kernel's pick for a socket bound to port 0, released at once.
    public static func freePort() throws -> Int {
        let (socket, port) = try bound(listening: false)
        close(socket)
        return port
    }

    /// A socket on 127.0.0.1 that takes connections into its backlog and never answers them (a server that
    /// stalls), and its port; close it when done.
    public static func silentListener() throws -> (socket: Int32, port: Int) {
        try bound(listening: true)
    }

    private static func bound(listening: Bool) throws -> (Int32, Int) {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw VectorError("cannot open a socket on 127.0.0.1") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        guard bound == 0, !listening || listen(socket, 8) == 0 else {
            close(socket)
            throw VectorError("no free port on 127.0.0.1")
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return (socket, Int(UInt16(bigEndian: address.sin_port)))
    }
}
