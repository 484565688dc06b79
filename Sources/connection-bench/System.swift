internal import CEpoll
import CommandLineKit
import Foundation
import Glibc

// The operating-system pieces connection-bench stands on: epoll, the stop signals, the descriptor limit, time,
// randomness, SHA-1 for the WebSocket handshake, and its errors and output.

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One line on standard output, at once (scripts wait for the `ready` line).
func say(_ line: String) { StandardStreams().out(line) }

/// One line on standard error, prefixed with the program's name.
func warn(_ line: String) { StandardStreams().err("connection-bench: \(line)") }

/// Nanoseconds on the monotonic clock.
func monotonicNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// `strerror(code)`, with short names for the reasons a load client tallies most.
func describe(errno code: Int32) -> String {
    switch code {
    case ECONNREFUSED: return Reason.refused
    case ECONNRESET: return "reset"
    case EPIPE: return "broken pipe"
    case ETIMEDOUT: return "timed out in TCP"
    default: return String(cString: strerror(code))
    }
}

/// Failure reasons compared by the code, not only shown.
enum Reason {
    /// The connect was refused: nothing listens on the port (the server is gone).
    static let refused = "refused"
}

/// epoll(7) through the project's CEpoll module. Kept to what the load client uses: one registration per socket
/// (edge-triggered, never modified; close(2) removes it) and a wait that reports each ready socket's token.
final class Epoll {
    static let input = CEpoll_IN
    static let output = CEpoll_OUT
    static let error = CEpoll_ERR
    static let hangUp = CEpoll_HUP
    static let readHangUp = CEpoll_RDHUP
    static let edgeTriggered = CEpoll_ET
    /// Events taken per wait (CEpoll_wait's most).
    static let capacity = 256

    let descriptor: Int32
    private let tags = UnsafeMutablePointer<UInt64>.allocate(capacity: Epoll.capacity)
    private let ready = UnsafeMutablePointer<UInt32>.allocate(capacity: Epoll.capacity)

    init() throws {
        let descriptor = CEpoll_create()
        guard descriptor >= 0 else { throw BenchError("epoll_create1 failed: \(describe(errno: errno))") }
        self.descriptor = descriptor
    }

    deinit {
        tags.deallocate()
        ready.deallocate()
        _ = Glibc.close(descriptor)
    }

    /// Watches `socket` for `mask`, reporting it with `token`; 0, or the errno of the failure.
    func add(_ socket: Int32, token: UInt32, mask: UInt32) -> Int32 {
        CEpoll_watch(descriptor, socket, 1, mask, UInt64(token)) == 0 ? 0 : errno
    }

    /// Waits up to `milliseconds` and calls `body(token, mask)` for each ready socket; an interrupted wait returns
    /// with nothing reported.
    func wait(milliseconds: Int32, _ body: (UInt32, UInt32) -> Void) throws {
        let count = CEpoll_wait(descriptor, tags, ready, Int32(Self.capacity), milliseconds)
        guard count >= 0 else {
            let code = errno
            if code == EINTR { return }
            throw BenchError("epoll_wait failed: \(describe(errno: code))")
        }
        for index in 0..<Int(count) { body(UInt32(truncatingIfNeeded: tags[index]), ready[index]) }
    }
}

/// The write end of the pipe SIGTERM and SIGINT are reported through; written only by the signal handler, set once
/// before the handler is installed.
nonisolated(unsafe) var stopPipeWriteEnd: Int32 = -1

/// SIGTERM and SIGINT as a readable pipe, so the epoll loop sees them (the handler only writes one byte, which is
/// async-signal-safe). SIGPIPE is ignored: every send also passes MSG_NOSIGNAL.
final class StopSignal {
    let readEnd: Int32

    init() throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw BenchError("pipe failed: \(describe(errno: errno))") }
        for end in ends {
            let flags = fcntl(end, F_GETFL)
            _ = fcntl(end, F_SETFL, flags | O_NONBLOCK)
        }
        readEnd = ends[0]
        stopPipeWriteEnd = ends[1]
        let handler: @convention(c) (Int32) -> Void = { _ in
            var byte: UInt8 = 1
            _ = Glibc.write(stopPipeWriteEnd, &byte, 1)
        }
        _ = signal(SIGTERM, handler)
        _ = signal(SIGINT, handler)
        _ = signal(SIGPIPE, SIG_IGN)
    }

    /// Empties the pipe.
    func drain() {
        var bytes: (UInt64, UInt64) = (0, 0)
        while withUnsafeMutableBytes(of: &bytes, { Glibc.read(readEnd, $0.baseAddress, $0.count) }) > 0 {}
    }
}

/// SplitMix64 seeded from the system generator: WebSocket keys, masks and subjects for a load client, fast.
struct FastRandom: RandomNumberGenerator {
    private var state: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count {
            var word = next()
            for _ in 0..<min(8, count - out.count) {
                out.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return out
    }
}

/// The client's side of the RFC 6455 opening handshake and frames.
enum WebSocketWire {
    /// One masked frame with FIN set, as a client sends it (RFC 6455, 5.2 and 5.3).
    static func maskedFrame(opcode: UInt8, payload: [UInt8], random: inout FastRandom) -> [UInt8] {
        var frame: [UInt8] = [0x80 | opcode]
        frame.reserveCapacity(payload.count + 14)
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) {
                frame.append(UInt8(truncatingIfNeeded: UInt64(payload.count) >> shift))
            }
        }
        let key = random.bytes(4)
        frame += key
        for (index, byte) in payload.enumerated() { frame.append(byte ^ key[index & 3]) }
        return frame
    }
}

/// How many times each reason happened, in the order each first happened.
struct Tally {
    private(set) var reasons: [String] = []
    private var counts: [String: Int] = [:]
    private(set) var total = 0

    mutating func add(_ reason: String, count: Int = 1) {
        if counts[reason] == nil { reasons.append(reason) }
        counts[reason, default: 0] += count
        total += count
    }

    mutating func merge(_ other: Tally) {
        for reason in other.reasons { add(reason, count: other.count(of: reason)) }
    }

    func count(of reason: String) -> Int { counts[reason] ?? 0 }

    /// "12 reset before the 101, 3 timeout after 30 s": the first `limit` reasons.
    func summary(limit: Int = 5) -> String {
        var parts = reasons.prefix(limit).map { "\(count(of: $0)) \($0)" }
        if reasons.count > limit { parts.append("and \(reasons.count - limit) other reasons") }
        return parts.joined(separator: ", ")
    }

    /// `<label> count=C reason="..."`, one line per reason.
    func lines(_ label: String) -> [String] {
        reasons.map { "\(label) count=\(count(of: $0)) reason=\"\($0)\"" }
    }
}
