internal import CMicroHTTPD
import Foundation
import SiblingsCrypto
import Synchronization
import WebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// HTTPS and WSS served by the server itself (RFC 8446 and RFC 5246 through ``TLSEngine``, RFC 9110 section 4.2.2):
/// a listening socket of its own, and for each connection a pair of local sockets whose other end libmicrohttpd
/// serves as if the client were on it (`MHD_add_connection`, with the client's address), so everything past the
/// TLS layer (limits, deadlines, upgrades, WebSockets) is the plain server's, unchanged.
///
/// The bytes cross on the WebSocket event loops (``EventLoop``), not a thread per connection. A connection that
/// becomes a WebSocket leaves the pair: ``takeOver(applicationEnd:)`` gives the WebSocket the client's socket and
/// its TLS state, so a relay connection's frames take no extra hop and an idle one holds no pair. ``reload()``
/// reads the certificate and key again; connections made after it show the new certificate, and those open keep
/// theirs.
final class TLSTerminator: Sendable {
    let port: UInt16
    private let listener: Int32
    private let configuration: TLSConfiguration
    private let context: Mutex<TLSContext>
    private let acceptor: Acceptor
    /// The tunnels by the descriptor libmicrohttpd serves (the pair's other end).
    private let tunnels = TunnelRegistry()

    /// Listens on `address` (an IPv4 or IPv6 literal) at `port` (0: the system chooses), and hands each connection
    /// to `add` (which owns the descriptor it is given, and returns false if it refused it). A connection from an
    /// address that holds its share of `share` already is closed before any TLS work is spent on it.
    init(
        address: String, port: UInt16, configuration: TLSConfiguration, share: ConnectionGuard,
        add: @escaping @Sendable (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) throws(HTTPError) {
        let context: TLSContext
        do {
            context = try TLSContext(configuration)
        } catch {
            throw HTTPError(.internalServerError, .server, "TLS cannot start: \(error.message)")
        }
        let (listener, bound) = try Self.listen(address: address, port: port)
        self.listener = listener
        self.port = bound
        self.configuration = configuration
        self.context = Mutex(context)
        acceptor = Acceptor(listener: listener, loop: EventLoop.next(), tunnels: tunnels, share: share, add: add)
        acceptor.context = { [weak self] in self?.context.withLock { $0 } }
        let acceptor = acceptor
        acceptor.loop.execute { acceptor.attach() }
    }

    /// Reads the certificate chain and key again (after a renewal); on failure the old ones stay in use.
    func reload() throws(TLSError) {
        let fresh = try TLSContext(configuration)
        context.withLock { $0 = fresh }
    }

    /// What a WebSocket upgraded on `applicationEnd` (the descriptor libmicrohttpd served) takes over: the client's
    /// socket, its TLS state, and the plaintext the client sent that libmicrohttpd did not read. The tunnel first
    /// sends the client everything libmicrohttpd wrote (the 101), then closes its end of the pair; the caller
    /// closes `applicationEnd`. Nil if the connection is gone already.
    func takeOver(applicationEnd: Int32) -> WebSocketHandoff? {
        guard let key = TunnelRegistry.key(of: applicationEnd), let tunnel = tunnels.tunnel(for: key) else {
            return nil
        }
        if tunnel.loop.isCurrent { return tunnel.handOff(applicationEnd: applicationEnd) }
        let result = Mutex<WebSocketHandoff?>(nil)
        let done = DispatchSemaphore(value: 0)
        tunnel.loop.execute {
            let handoff = tunnel.handOff(applicationEnd: applicationEnd)
            result.withLock { $0 = handoff }
            done.signal()
        }
        done.wait()
        return result.withLock { $0.take() }
    }

    /// Stops taking connections (new ones are refused, as the plain listener's are); returns once no new one can
    /// reach libmicrohttpd. The connections made go on.
    func stopAccepting() {
        let acceptor = acceptor
        if acceptor.loop.isCurrent {
            acceptor.detach()
        } else {
            let done = DispatchSemaphore(value: 0)
            acceptor.loop.execute {
                acceptor.detach()
                done.signal()
            }
            done.wait()
        }
        // Shut down, not closed: the descriptor is closed in deinit, after every use of it.
        _ = shutdown(listener, Int32(SHUT_RDWR))
    }

    /// Never waits: the last reference can go on the acceptor's own loop (a WebSocket's end releasing the server),
    /// or anywhere else. The listener is refused at once and closed on the loop once the acceptor let go of it.
    deinit {
        _ = shutdown(listener, Int32(SHUT_RDWR))
        let acceptor = acceptor
        let listener = listener
        if acceptor.loop.isCurrent {
            acceptor.detach()
            close(listener)
        } else {
            acceptor.loop.execute {
                acceptor.detach()
                close(listener)
            }
        }
    }

    private static func listen(address: String, port: UInt16) throws(HTTPError) -> (Int32, UInt16) {
        var storage = sockaddr_storage()
        var length: socklen_t
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = port.bigEndian
            socketAddress.sin_addr = v4
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: socketAddress, as: sockaddr_in.self) }
        } else if inet_pton(AF_INET6, address, &v6) == 1 {
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = port.bigEndian
            socketAddress.sin6_addr = v6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: socketAddress, as: sockaddr_in6.self) }
        } else {
            throw HTTPError(
                .internalServerError, .server, "\(address) is not an IP address to listen on (like 0.0.0.0 or ::)")
        }
        let fd = socket(
            Int32(storage.ss_family),
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw HTTPError(
                .internalServerError, .server, "could not make a socket: \(String(cString: strerror(errno)))")
        }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0, Glibc.listen(fd, 1024) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw HTTPError(
                .internalServerError, .server,
                "could not listen on \(address) port \(port) (\(reason)); choose another port or stop the program "
                    + "using it")
        }
        length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let chosen =
            Int32(storage.ss_family) == AF_INET
            ? withUnsafeBytes(of: storage) { $0.load(as: sockaddr_in.self).sin_port }
            : withUnsafeBytes(of: storage) { $0.load(as: sockaddr_in6.self).sin6_port }
        return (fd, UInt16(bigEndian: chosen))
    }
}

/// A WebSocket's connection, out of its tunnel: the client's non-blocking socket, its TLS state, the plaintext
/// received and not yet read by libmicrohttpd, and the sealed bytes (the 101, and anything before it) the socket
/// has not taken yet, which the WebSocket writes before its first frame.
struct WebSocketHandoff: @unchecked Sendable {
    // @unchecked: the engine changes hands once, from the tunnel's loop to the WebSocket, and is never shared.
    let network: Int32
    let engine: TLSEngine
    let pending: Data
    let unsent: Data
}

/// The tunnels by the socket libmicrohttpd serves, so an upgrade finds its connection's tunnel. A socket is known by
/// its inode, not its descriptor's number: the upgrade gets a duplicate, and libmicrohttpd closes its own number,
/// which another connection may take at once.
private final class TunnelRegistry: Sendable {
    private let bySocket = Mutex<[UInt64: TLSTunnel]>([:])

    /// The inode of the socket `fd` refers to, or nil if it is not open.
    static func key(of fd: Int32) -> UInt64? {
        var status = stat()
        return fstat(fd, &status) == 0 ? UInt64(status.st_ino) : nil
    }

    func register(_ tunnel: TLSTunnel, key: UInt64) { bySocket.withLock { $0[key] = tunnel } }

    /// Forgets `tunnel`.
    func remove(_ tunnel: TLSTunnel, key: UInt64) {
        bySocket.withLock { if $0[key] === tunnel { $0[key] = nil } }
    }

    func tunnel(for key: UInt64) -> TLSTunnel? { bySocket.withLock { $0[key] } }
}

/// The listening socket on its event loop: accepts every connection waiting, pairs it with a local socket that
/// goes to libmicrohttpd, and starts its ``TLSTunnel``.
private final class Acceptor: EventLoopChannel, @unchecked Sendable {
    // @unchecked: `tag`, `pausedUntil` and `context` are touched on `loop`'s thread only (`context` is set once,
    // before the first hop there).
    let listener: Int32
    let loop: EventLoop
    let add: @Sendable (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    let share: ConnectionGuard
    let tunnels: TunnelRegistry
    var context: () -> TLSContext? = { nil }
    private var tag: UInt64?
    /// Set when the process ran out of descriptors: accepting waits until then (the backlog holds the rest).
    private var pausedUntil: ContinuousClock.Instant?

    init(
        listener: Int32, loop: EventLoop, tunnels: TunnelRegistry, share: ConnectionGuard,
        add: @escaping @Sendable (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) {
        self.listener = listener
        self.loop = loop
        self.tunnels = tunnels
        self.share = share
        self.add = add
    }

    func attach() {
        tag = loop.add(self, fd: listener, reading: true, writing: false, timerSlack: .milliseconds(50))
    }

    func detach() {
        if let tag { loop.remove(tag, fd: listener) }
        tag = nil
    }

    func readable() {
        while tag != nil {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listener, $0, &length)
                }
            }
            guard fd >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: stop for a moment rather than be woken at once for the same connection.
                    if let tag { loop.watch(tag, fd: listener, reading: false, writing: false) }
                    pausedUntil = .now + .milliseconds(100)
                    loop.schedule(at: pausedUntil!)
                default: break
                }
                return
            }
            accepted(fd, address, length)
        }
    }

    private func accepted(_ network: Int32, _ address: sockaddr_storage, _ length: socklen_t) {
        // The per-address share is taken here, before any TLS work (libmicrohttpd's accept policy checks again when
        // the connection is added), and given back when the tunnel ends or the connection becomes a WebSocket.
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let named = withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { CMicroHTTPD_address_text($0, &text, text.count) }
        }
        let client =
            named == 1 ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        guard share.reserveTunnel(client) else {
            close(network)
            return
        }
        var handedOver = false
        defer { if !handedOver { share.tunnelEnded(client) } }
        _ = fcntl(network, F_SETFD, FD_CLOEXEC)
        _ = fcntl(network, F_SETFL, fcntl(network, F_GETFL) | O_NONBLOCK)
        var one: Int32 = 1
        _ = setsockopt(network, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var pair: [Int32] = [-1, -1]
        guard let context = context(),
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0
        else {
            close(network)
            return
        }
        _ = fcntl(pair[0], F_SETFL, fcntl(pair[0], F_GETFL) | O_NONBLOCK)
        guard let engine = try? TLSEngine(server: context) else {
            close(network)
            close(pair[0])
            close(pair[1])
            return
        }
        guard let key = TunnelRegistry.key(of: pair[1]) else {
            close(network)
            close(pair[0])
            close(pair[1])
            return
        }
        let tunnel = TLSTunnel(
            network: network, application: pair[0], key: key, engine: engine, tunnels: tunnels,
            share: (share, client), loop: EventLoop.next())
        tunnels.register(tunnel, key: key)
        // libmicrohttpd owns pair[1] from here, and closes it at once if its accept policy refuses the address.
        let added = withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { add(pair[1], $0, length) }
        }
        guard added else {
            tunnels.remove(tunnel, key: key)
            close(network)
            close(pair[0])
            return
        }
        handedOver = true
        tunnel.loop.execute { tunnel.attach() }
    }

    func writable() {}

    func timerFired(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard let until = pausedUntil else { return nil }
        guard now >= until else { return until }
        pausedUntil = nil
        if let tag { loop.watch(tag, fd: listener, reading: true, writing: false) }
        return nil
    }
}

/// One client's TLS connection and its plaintext twin: records from the client are opened into the local socket
/// libmicrohttpd reads, and what it writes is sealed back. Each direction buffers at most ``highWater`` bytes
/// before it stops reading its source, so a slow client holds back the server and a slow server the client.
///
/// A socket the tunnel is not reading is taken out of epoll (``parked``), not left in with an empty mask: epoll
/// reports a hang-up whatever the mask, and a level-triggered hang-up on a socket nobody reads would spin the loop.
/// Once libmicrohttpd is done, what is left for the client gets ``flushDeadline`` to go out.
private final class TLSTunnel: @unchecked Sendable {
    // @unchecked: every member is touched on `loop`'s thread only.
    static let highWater = 256 << 10
    static let flushDeadline: Duration = .seconds(30)

    let loop: EventLoop
    private let network: Int32
    private let application: Int32
    /// The pair's other end, which libmicrohttpd serves, as the registry knows it.
    private let key: UInt64
    private let engine: TLSEngine
    private let tunnels: TunnelRegistry
    /// The per-address place this connection holds, given back when it ends.
    private let share: (guard: ConnectionGuard, address: String?)
    private var networkTag: UInt64?
    private var applicationTag: UInt64?
    /// Sockets taken out of epoll while the tunnel does not read them (and has nothing to write to them).
    private var parked: (network: Bool, application: Bool) = (false, false)
    private var toNetwork = Data()
    private var toApplication = Data()
    /// The client sent its last byte (a FIN, or a close_notify), or its records stopped making sense.
    private var networkEnded = false
    /// libmicrohttpd closed its end (the exchange is over, or it refused the connection).
    private var applicationEnded = false
    /// libmicrohttpd reads no more (a send to it failed): what the client sends is dropped, and what
    /// libmicrohttpd still wrote (an early answer, a 413) is read to its end and sealed.
    private var applicationDeaf = false
    /// libmicrohttpd was told the client has nothing more to say.
    private var applicationShutDown = false
    /// The handshake failed: the alert goes out, then the connection closes.
    private var failed = false
    private var finished = false
    private var deadline: ContinuousClock.Instant?

    init(
        network: Int32, application: Int32, key: UInt64, engine: TLSEngine, tunnels: TunnelRegistry,
        share: (guard: ConnectionGuard, address: String?), loop: EventLoop
    ) {
        self.network = network
        self.application = application
        self.key = key
        self.engine = engine
        self.tunnels = tunnels
        self.share = share
        self.loop = loop
    }

    /// What the event loop calls for one of the two sockets.
    private final class Side: EventLoopChannel {
        let tunnel: TLSTunnel
        let isNetwork: Bool

        init(_ tunnel: TLSTunnel, isNetwork: Bool) {
            self.tunnel = tunnel
            self.isNetwork = isNetwork
        }

        func readable() { isNetwork ? tunnel.networkReadable() : tunnel.applicationReadable() }
        func writable() { tunnel.settle() }
        func timerFired(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
            isNetwork ? tunnel.timerFired(now: now) : nil
        }
    }

    func attach() {
        networkTag = loop.add(
            Side(self, isNetwork: true), fd: network, reading: true, writing: false, timerSlack: .seconds(1))
        applicationTag = loop.add(
            Side(self, isNetwork: false), fd: application, reading: true, writing: false, timerSlack: .seconds(1))
        if networkTag == nil || applicationTag == nil { finish() }
    }

    private func timerFired(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard !finished, let deadline else { return nil }
        guard now >= deadline else { return deadline }
        // The client took nothing for the whole deadline after the exchange ended: give up on it.
        finish()
        return nil
    }

    private func networkReadable() {
        guard !finished else { return }
        if networkEnded {
            // Not reading any more, so only a hang-up or an error wakes this side: the client is gone.
            if Self.hungUp(network) { finish() }
            return
        }
        guard toApplication.count < Self.highWater else {
            // Held back; a hang-up here is a reset or a close, which ends the connection.
            if Self.hungUp(network) { return finish() }
            return settle()
        }
        let buffer = loop.readBuffer
        let count = recv(network, buffer.baseAddress, buffer.count, 0)
        if count > 0 {
            engine.receive(Data(bytes: buffer.baseAddress!, count: count))
            openRecords()
        } else if count == 0 {
            networkEnded = true
        } else if errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR {
            return finish()
        }
        settle()
    }

    /// Whether `fd` reports a hang-up or an error now.
    private static func hungUp(_ fd: Int32) -> Bool {
        var probe = pollfd(fd: fd, events: 0, revents: 0)
        return poll(&probe, 1, 0) > 0 && probe.revents & Int16(POLLHUP | POLLERR) != 0
    }

    /// Takes the handshake on, and opens the records that arrived.
    private func openRecords() {
        if !engine.isHandshakeComplete {
            do {
                try engine.handshake()
            } catch {
                // The alert (if OpenSSL made one) goes out before the close.
                failed = true
                networkEnded = true
            }
        }
        if engine.isHandshakeComplete {
            do {
                let plaintext = try engine.read()
                if !applicationDeaf { toApplication.append(plaintext) }
            } catch {
                // A close_notify, or a record that did not authenticate: the client says no more.
                networkEnded = true
            }
        }
        toNetwork.append(engine.takeOutput())
    }

    private func applicationReadable() {
        guard !finished, !applicationEnded else { return }
        // Held back while the client is slow: taken out of epoll until ``settle()`` has room (a hang-up from
        // libmicrohttpd would otherwise be reported for ever); what it wrote stays in the pair until then.
        guard toNetwork.count < Self.highWater else { return settle() }
        let buffer = loop.readBuffer
        let count = recv(application, buffer.baseAddress, buffer.count, 0)
        if count > 0, engine.isHandshakeComplete {
            do {
                try engine.write(Data(bytes: buffer.baseAddress!, count: count))
            } catch {
                return finish()
            }
            toNetwork.append(engine.takeOutput())
        } else if count > 0 {
            // libmicrohttpd never speaks before a request, and none can arrive before the handshake.
            return finish()
        } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            applicationEnded = true
            deadline = .now + Self.flushDeadline
            loop.schedule(at: deadline!)
            if let applicationTag, !parked.application {
                loop.unwatch(applicationTag, fd: application)
                parked.application = true
            }
            if engine.isHandshakeComplete {
                engine.close()
                toNetwork.append(engine.takeOutput())
            }
        }
        settle()
    }

    /// Writes what is buffered as far as each socket takes it, closes when both sides are done, and watches each
    /// socket for what it is waiting for.
    func settle() {
        guard !finished else { return }
        guard send(&toNetwork, to: network) else { return finish() }
        if !applicationDeaf, !send(&toApplication, to: application) {
            // libmicrohttpd stopped reading (it answered early, or refused the body): what the client sends from
            // now on is dropped, and what libmicrohttpd wrote is still read to its end and sealed.
            applicationDeaf = true
            toApplication = Data()
        }
        if networkEnded, toApplication.isEmpty, !applicationShutDown, !applicationEnded, !applicationDeaf {
            applicationShutDown = true
            _ = shutdown(application, Int32(SHUT_WR))
        }
        if toNetwork.isEmpty, failed || applicationEnded { return finish() }
        if let networkTag {
            loop.watch(
                networkTag, fd: network, reading: !networkEnded && toApplication.count < Self.highWater,
                writing: !toNetwork.isEmpty)
        }
        if let applicationTag, !applicationEnded {
            let reading = toNetwork.count < Self.highWater
            let writing = !toApplication.isEmpty
            if reading || writing {
                if parked.application {
                    loop.rewatch(applicationTag, fd: application, reading: reading, writing: writing)
                    parked.application = false
                } else {
                    loop.watch(applicationTag, fd: application, reading: reading, writing: writing)
                }
            } else if !parked.application {
                loop.unwatch(applicationTag, fd: application)
                parked.application = true
            }
        }
    }

    /// Sends as much of `pending` as `fd` takes now; false if the socket failed.
    private func send(_ pending: inout Data, to fd: Int32) -> Bool {
        while !pending.isEmpty {
            let sent = pending.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 {
                pending = pending.count == sent ? Data() : pending.dropFirst(sent)
            } else if errno == EINTR {
                continue
            } else {
                return errno == EAGAIN || errno == EWOULDBLOCK
            }
        }
        return true
    }

    /// The connection became a WebSocket on `applicationEnd`: what libmicrohttpd wrote (the 101) is sealed, what
    /// the client sent and libmicrohttpd did not read is gathered, and the tunnel steps aside, leaving the client's
    /// socket open. What the socket does not take at once goes to the WebSocket to write before its first frame,
    /// so nothing here waits on the client. Nil (and the connection closed) if the tunnel is over already.
    func handOff(applicationEnd: Int32) -> WebSocketHandoff? {
        guard !finished, engine.isHandshakeComplete else { return nil }
        // The 101 is in the pair already: libmicrohttpd wrote it before it handed the socket over.
        let buffer = loop.readBuffer
        while !applicationEnded {
            let count = recv(application, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            guard count > 0 else { break }
            do {
                try engine.write(Data(bytes: buffer.baseAddress!, count: count))
            } catch {
                finish()
                return nil
            }
            toNetwork.append(engine.takeOutput())
        }
        guard send(&toNetwork, to: network) else {
            finish()
            return nil
        }
        // In order: what the pair holds that libmicrohttpd did not read, then what never reached the pair.
        var pending = Data()
        while case let count = recv(applicationEnd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT)), count > 0 {
            pending.append(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count)
        }
        pending.append(toApplication)
        toApplication = Data()
        let unsent = toNetwork
        toNetwork = Data()
        finished = true
        release()
        close(application)
        return WebSocketHandoff(network: network, engine: engine, pending: pending, unsent: unsent)
    }

    /// Takes both sockets out of the loop and gives back the registry entry and the per-address place.
    private func release() {
        if let networkTag { loop.remove(networkTag, fd: network) }
        if let applicationTag { loop.remove(applicationTag, fd: application) }
        networkTag = nil
        applicationTag = nil
        tunnels.remove(self, key: key)
        share.guard.tunnelEnded(share.address)
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        release()
        close(network)
        close(application)
    }
}
