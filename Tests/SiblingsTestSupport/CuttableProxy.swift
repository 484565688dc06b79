import Foundation
import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on a loopback port that a test can cut and mend: the link between one relay node and NATS, say.
/// ``cut()`` closes every connection through it at once and refuses new ones (each is accepted and closed) until
/// ``mend()``. A thread of its own accepts; each connection is pumped both ways by a thread of its own with poll(2).
public final class CuttableProxy: Sendable {
    public let port: Int
    private let targetPort: Int
    private let listener: Int32
    private struct State {
        var cut = false
        var stopped = false
        /// The descriptors of every open pair, to close on a cut.
        var open: Set<Int32> = []
    }
    private let state = Mutex(State())

    /// Forwards 127.0.0.1:`port` (a free one) to 127.0.0.1:`targetPort`.
    public init(to targetPort: Int) throws {
        self.targetPort = targetPort
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw VectorError("the proxy could not make a socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard bound == 0, listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw VectorError("the proxy could not listen: errno \(errno)")
        }
        var actual = sockaddr_in()
        var actualLength = length
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &actualLength) }
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: actual.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Closes every connection through the proxy, and refuses new ones until ``mend()``.
    public func cut() {
        let open = state.withLock { state -> Set<Int32> in
            state.cut = true
            return state.open
        }
        // shutdown(2) wakes the pumps, which close their descriptors themselves.
        for descriptor in open { shutdown(descriptor, Int32(SHUT_RDWR)) }
    }

    /// Lets new connections through again.
    public func mend() { state.withLock { $0.cut = false } }

    /// Stops accepting and cuts everything.
    public func stop() {
        state.withLock { $0.stopped = true }
        cut()
        shutdown(listener, Int32(SHUT_RDWR))
    }

    deinit { close(listener) }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return address
    }

    private func acceptLoop() {
        while true {
            let client = retryingInterrupts { accept(listener, nil, nil) }
            if client < 0 { return }
            let (refuse, stopped) = state.withLock { ($0.cut, $0.stopped) }
            if stopped {
                close(client)
                return
            }
            if refuse {
                close(client)
                continue
            }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: UInt16(targetPort))
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard upstream >= 0, connected == 0 else {
                if upstream >= 0 { close(upstream) }
                close(client)
                continue
            }
            state.withLock { $0.open.formUnion([client, upstream]) }
            Thread.detachNewThread { [self] in pump(client, upstream) }
        }
    }

    /// Copies both ways until either side ends (or a cut shuts both down), then closes both.
    private func pump(_ a: Int32, _ b: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
        loop: while true {
            let ready = retryingInterrupts { poll(&fds, 2, 1000) }
            if ready < 0 { break }
            if state.withLock({ $0.cut }) { break }
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let from = entry.fd
                let to = index == 0 ? b : a
                let count = read(from, &buffer, buffer.count)
                if count <= 0 { break loop }
                var sent = 0
                while sent < count {
                    let written = buffer.withUnsafeBytes { write(to, $0.baseAddress! + sent, count - sent) }
                    if written <= 0 { break loop }
                    sent += written
                }
            }
        }
        state.withLock { $0.open.subtract([a, b]) }
        close(a)
        close(b)
    }
}
