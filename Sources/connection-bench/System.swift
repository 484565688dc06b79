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

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit then in force.
func raiseDescriptorLimit() -> Int {
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    var limit = rlimit()
    guard getrlimit(resource, &limit) == 0 else { return 1024 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(resource, &raised) != 0 {
            // An unlimited hard limit cannot be the soft one for descriptors (fs.nr_open caps it).
            raised.rlim_cur = min(limit.rlim_max, 1 << 20)
            _ = setrlimit(resource, &raised)
        }
        _ = getrlimit(resource, &limit)
    }
    return Int(clamping: limit.rlim_cur)
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

/// SHA-1 (FIPS 180-4), only for `Sec-WebSocket-Accept` (RFC 6455, 4.2.2); never for anything secret.
enum SHA1 {
    static func hash(_ message: [UInt8]) -> [UInt8] {
        var state: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bitCount = UInt64(message.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) {
            padded.append(UInt8(truncatingIfNeeded: bitCount >> shift))
        }

        var words = [UInt32](repeating: 0, count: 80)
        for block in stride(from: 0, to: padded.count, by: 64) {
            for index in 0..<16 {
                var word: UInt32 = 0
                for byte in padded[(block + index * 4)..<(block + index * 4 + 4)] { word = word << 8 | UInt32(byte) }
                words[index] = word
            }
            for index in 16..<80 {
                let mixed: UInt32 = words[index - 3] ^ words[index - 8] ^ words[index - 14] ^ words[index - 16]
                words[index] = mixed << 1 | mixed >> 31
            }
            var a = state[0]
            var b = state[1]
            var c = state[2]
            var d = state[3]
            var e = state[4]
            for index in 0..<80 {
                let f: UInt32
                let k: UInt32
                switch index {
                case 0..<20:
                    f = (b & c) | (~b & d)
                    k = 0x5A82_7999
                case 20..<40:
                    f = b ^ c ^ d
                    k = 0x6ED9_EBA1
                case 40..<60:
                    f = (b & c) | (b & d) | (c & d)
                    k = 0x8F1B_BCDC
                default:
                    f = b ^ c ^ d
                    k = 0xCA62_C1D6
                }
                let rotated: UInt32 = a << 5 | a >> 27
                let next: UInt32 = rotated &+ f &+ e &+ k &+ words[index]
                e = d
                d = c
                c = b << 30 | b >> 2
                b = a
                a = next
            }
            state[0] = state[0] &+ a
            state[1] = state[1] &+ b
            state[2] = state[2] &+ c
            state[3] = state[3] &+ d
            state[4] = state[4] &+ e
        }
        var digest: [UInt8] = []
        digest.reserveCapacity(20)
        for word in state {
            for shift in stride(from: 24, through: 0, by: -8) {
                digest.append(UInt8(truncatingIfNeeded: word >> shift))
            }
        }
        return digest
    }
}

/// The client's side of the RFC 6455 opening handshake and frames.
enum WebSocketWire {
    /// RFC 6455's GUID, appended to the key before hashing (section 1.3).
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for `key`: base64(SHA-1(key + GUID)).
    static func acceptKey(for key: String) -> String {
        Data(SHA1.hash(Array((key + guid).utf8))).base64EncodedString()
    }

    /// Checks the SHA-1 above against RFC 6455's own example (section 1.3), so a mistake in it reads as one clear
    /// error instead of every handshake failing.
    static func selfTest() throws {
        let accept = acceptKey(for: "dGhlIHNhbXBsZSBub25jZQ==")
        guard accept == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" else {
            throw BenchError(
                "the built-in SHA-1 gives \(accept) for RFC 6455's example key, not s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        }
    }

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
