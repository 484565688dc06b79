import Foundation

/// The one coarse hint the relay gets about a frame (000_e422bd9a7c930342.txt: "the wake class being the one
/// coarse hint the relay gets about what sort of frame it is carrying"). Everything is ``silent`` except a
/// `SyncRequest`, the sole member of ``sync``, which the relay may turn into one alert-class push.
public enum WakeClass: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Forwarded to live connections only; never wakes a device.
    case silent = 0
    /// A `SyncRequest`: forwarded, and when no connection holds the subject, one push per wake episode.
    case sync = 1

    public var description: String {
        switch self {
        case .silent: "silent"
        case .sync: "sync"
        }
    }
}

/// A relay subject: the 32 bytes frames are routed by (a device inbox, an account's discovery inbox, a one-off
/// reply subject). Whoever knows a subject can subscribe it, so subjects are random and kept secret.
public struct RelaySubject: Sendable, Hashable, CustomStringConvertible {
    /// The subject's length in bytes.
    public static let byteCount = 32

    public let rawRepresentation: Data

    /// Throws ``PixieWireError`` (`malformed`) unless `rawRepresentation` is exactly 32 bytes.
    public init(rawRepresentation: some DataProtocol) throws(PixieWireError) {
        guard rawRepresentation.count == Self.byteCount else {
            throw PixieWireError(
                .malformed, "a relay subject is 32 bytes, not \(rawRepresentation.count); mint 32 random bytes")
        }
        self.rawRepresentation = Data(rawRepresentation)
    }

    /// The first 4 bytes in hex, for logs (never the whole subject).
    public var redacted: String { rawRepresentation.prefix(4).map { String(format: "%02x", $0) }.joined() + "…" }

    public var description: String { redacted }
}

/// Why the relay refused a request, carried in an ERROR frame as a 16-bit code. The set grows; a device treats
/// a code it does not know like ``malformed``.
public struct RelayErrorCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The frame does not parse (lengths, subject size, wake class); the relay then closes with 1002.
    public static let malformed = RelayErrorCode(rawValue: 1)
    /// The frame type byte is not one this relay knows; the relay then closes with 1002.
    public static let unknownType = RelayErrorCode(rawValue: 2)
    /// The SEND's token does not verify; the frame was dropped.
    public static let tokenInvalid = RelayErrorCode(rawValue: 3)
    /// The SEND's token was already spent; the frame was dropped.
    public static let tokenSpent = RelayErrorCode(rawValue: 4)
    /// SUBSCRIBE past the per-connection subject limit.
    public static let tooManySubjects = RelayErrorCode(rawValue: 5)
    /// The SEND's payload is longer than the relay forwards.
    public static let frameTooLarge = RelayErrorCode(rawValue: 6)
    /// UNSUBSCRIBE of a subject this connection does not hold.
    public static let notSubscribed = RelayErrorCode(rawValue: 7)
    /// The relay cannot check tokens right now (no spender configured, or it failed); the frame was dropped.
    public static let unavailable = RelayErrorCode(rawValue: 8)
    /// SUBSCRIBE without proof of holding the subject: its public key does not hash to it, or its signature over
    /// the connection's CHALLENGE does not verify. Refused; the holder's subscription and push target stay.
    public static let subjectNotProven = RelayErrorCode(rawValue: 9)
    /// Not an answer (request id 0): the relay ended this connection's subscription of a subject whose device was
    /// removed from the account, or of the account's discovery inbox that a removal rotated away
    /// (docs/pixie-protocol.md, "Revoking a device"). The reason names the subject's role.
    public static let deviceRemoved = RelayErrorCode(rawValue: 10)

    /// The snake_case name used in logs, metrics and docs.
    public var name: String {
        switch self {
        case .malformed: "malformed"
        case .unknownType: "unknown_type"
        case .tokenInvalid: "token_invalid"
        case .tokenSpent: "token_spent"
        case .tooManySubjects: "too_many_subjects"
        case .frameTooLarge: "frame_too_large"
        case .notSubscribed: "not_subscribed"
        case .unavailable: "unavailable"
        case .subjectNotProven: "subject_not_proven"
        case .deviceRemoved: "device_removed"
        default: "code_\(rawValue)"
        }
    }

    public var description: String { name }
}

/// A frame a device sends to the relay, as one binary WebSocket message (docs/pixie-protocol.md, "Relay").
///
/// Every frame starts with a type byte and a 4-byte big-endian request id the relay echoes in its OK or ERROR:
///
/// | type | name | body after type and request id |
/// |---|---|---|
/// | 0x01 | SUBSCRIBE | subject (32) · owner public key (32, Ed25519) · signature (64) · push token length (u16 BE, 0-512) · push token |
/// | 0x02 | UNSUBSCRIBE | subject (32) |
/// | 0x03 | SEND | subject (32) · wake class (1) · token length (u16 BE, 1-512) · token · payload (the rest) |
/// | 0x04 | PING | nothing |
public enum RelayClientFrame: Sendable, Equatable {
    /// `publicKey` must hash to `subject` and `signature` verify over the connection's CHALLENGE
    /// (``RelaySubject/subscribeMessage(challenge:subject:pushToken:)``); ``RelaySubjectKey/subscribe(requestID:challenge:pushToken:)``
    /// makes one.
    case subscribe(requestID: UInt32, subject: RelaySubject, publicKey: Data, signature: Data, pushToken: Data)
    case unsubscribe(requestID: UInt32, subject: RelaySubject)
    case send(requestID: UInt32, subject: RelaySubject, wake: WakeClass, token: Data, payload: Data)
    case ping(requestID: UInt32)

    /// The longest token and push token the frame format carries.
    public static let maximumTokenLength = 512

    static let subscribeType: UInt8 = 0x01
    static let unsubscribeType: UInt8 = 0x02
    static let sendType: UInt8 = 0x03
    static let pingType: UInt8 = 0x04

    public var requestID: UInt32 {
        switch self {
        case .subscribe(let id, _, _, _, _), .unsubscribe(let id, _), .send(let id, _, _, _, _), .ping(let id): id
        }
    }

    /// The frame's bytes. Token lengths past ``maximumTokenLength`` are not checked here: the relay refuses them.
    public func encoded() -> Data {
        var out = Data()
        switch self {
        case .subscribe(let id, let subject, let publicKey, let signature, let pushToken):
            out.reserveCapacity(135 + pushToken.count)
            out.append(Self.subscribeType)
            out.appendUInt32(id)
            out.append(subject.rawRepresentation)
            out.append(publicKey)
            out.append(signature)
            out.appendUInt16(UInt16(truncatingIfNeeded: pushToken.count))
            out.append(pushToken)
        case .unsubscribe(let id, let subject):
            out.append(Self.unsubscribeType)
            out.appendUInt32(id)
            out.append(subject.rawRepresentation)
        case .send(let id, let subject, let wake, let token, let payload):
            out.reserveCapacity(40 + token.count + payload.count)
            out.append(Self.sendType)
            out.appendUInt32(id)
            out.append(subject.rawRepresentation)
            out.append(wake.rawValue)
            out.appendUInt16(UInt16(truncatingIfNeeded: token.count))
            out.append(token)
            out.append(payload)
        case .ping(let id):
            out.append(Self.pingType)
            out.appendUInt32(id)
        }
        return out
    }

    /// Parses one frame strictly: exact lengths, a known type and wake class, tokens of 1-512 bytes (push
    /// tokens 0-512). Throws ``RelayFrameError`` carrying the request id when it could be read.
    public init(decoding bytes: some DataProtocol) throws(RelayFrameError) {
        var reader = WireReader(Data(bytes))
        guard let type = reader.byte(), let id = reader.uint32() else {
            throw RelayFrameError(
                .malformed, requestID: 0, "a relay frame starts with a type byte and a 4-byte request id")
        }
        func malformed(_ what: String) -> RelayFrameError { RelayFrameError(.malformed, requestID: id, what) }
        func subject() throws(RelayFrameError) -> RelaySubject {
            guard let raw = reader.bytes(RelaySubject.byteCount) else { throw malformed("the subject is cut short") }
            return try! RelaySubject(rawRepresentation: raw)
        }
        func token(allowEmpty: Bool, _ name: String) throws(RelayFrameError) -> Data {
            guard let length = reader.uint16() else { throw malformed("the \(name) length is cut short") }
            guard Int(length) <= Self.maximumTokenLength, allowEmpty || length > 0 else {
                throw malformed("the \(name) is \(length) bytes; it must be 1 to \(Self.maximumTokenLength)")
            }
            guard let bytes = reader.bytes(Int(length)) else { throw malformed("the \(name) is cut short") }
            return bytes
        }
        switch type {
        case Self.subscribeType:
            let subject = try subject()
            guard let publicKey = reader.bytes(32), let signature = reader.bytes(64) else {
                throw malformed("SUBSCRIBE is cut short before its 32-byte public key and 64-byte signature")
            }
            let pushToken = try token(allowEmpty: true, "push token")
            guard reader.isAtEnd else {
                throw malformed("SUBSCRIBE has \(reader.remaining) bytes after its push token")
            }
            self = .subscribe(
                requestID: id, subject: subject, publicKey: publicKey, signature: signature, pushToken: pushToken)
        case Self.unsubscribeType:
            let subject = try subject()
            guard reader.isAtEnd else { throw malformed("UNSUBSCRIBE has \(reader.remaining) bytes after its subject") }
            self = .unsubscribe(requestID: id, subject: subject)
        case Self.sendType:
            let subject = try subject()
            guard let wakeByte = reader.byte() else { throw malformed("SEND is cut short before its wake class") }
            guard let wake = WakeClass(rawValue: wakeByte) else {
                throw malformed("the wake class is \(wakeByte); it must be 0 (silent) or 1 (sync)")
            }
            let token = try token(allowEmpty: false, "token")
            self = .send(requestID: id, subject: subject, wake: wake, token: token, payload: reader.rest())
        case Self.pingType:
            guard reader.isAtEnd else { throw malformed("PING has \(reader.remaining) bytes after its request id") }
            self = .ping(requestID: id)
        default:
            throw RelayFrameError(
                .unknownType, requestID: id,
                "frame type 0x\(String(type, radix: 16)) is not one of SUBSCRIBE 1, UNSUBSCRIBE 2, SEND 3, PING 4")
        }
    }
}

/// A frame the relay sends to a device, as one binary WebSocket message:
///
/// | type | name | body after the type byte |
/// |---|---|---|
/// | 0x81 | DELIVER | subject (32) · wake class (1) · payload (the rest) |
/// | 0x82 | OK | request id (u32 BE) |
/// | 0x83 | ERROR | request id (u32 BE) · code (u16 BE) · reason (UTF-8, the rest) |
/// | 0x84 | CHALLENGE | nonce (32): the first frame of every connection, which each SUBSCRIBE signs |
public enum RelayServerFrame: Sendable, Equatable {
    case deliver(subject: RelaySubject, wake: WakeClass, payload: Data)
    case ok(requestID: UInt32)
    case error(requestID: UInt32, code: RelayErrorCode, reason: String)
    case challenge(nonce: Data)

    /// The CHALLENGE nonce's length.
    public static let challengeByteCount = 32

    static let deliverType: UInt8 = 0x81
    static let okType: UInt8 = 0x82
    static let errorType: UInt8 = 0x83
    static let challengeType: UInt8 = 0x84

    public func encoded() -> Data {
        var out = Data()
        switch self {
        case .deliver(let subject, let wake, let payload):
            out.reserveCapacity(34 + payload.count)
            out.append(Self.deliverType)
            out.append(subject.rawRepresentation)
            out.append(wake.rawValue)
            out.append(payload)
        case .ok(let id):
            out.append(Self.okType)
            out.appendUInt32(id)
        case .error(let id, let code, let reason):
            out.append(Self.errorType)
            out.appendUInt32(id)
            out.appendUInt16(code.rawValue)
            out.append(Data(reason.utf8))
        case .challenge(let nonce):
            out.append(Self.challengeType)
            out.append(nonce)
        }
        return out
    }

    /// Whether `frame` (as a bus carries it) is an ending: an ERROR with request id 0 and ``RelayErrorCode/deviceRemoved``,
    /// which identity-svc publishes to the subjects a removal ends. A DELIVER's type byte answers this at once.
    public static func isEnding(_ frame: Data) -> Bool {
        guard frame.first == errorType, frame.count >= 7 else { return false }
        let start = frame.startIndex
        return frame[start + 1..<start + 5].allSatisfy { $0 == 0 }
            && UInt16(frame[start + 5]) << 8 | UInt16(frame[start + 6]) == RelayErrorCode.deviceRemoved.rawValue
    }

    /// Parses one relay frame strictly (a device's side).
    public init(decoding bytes: some DataProtocol) throws(RelayFrameError) {
        var reader = WireReader(Data(bytes))
        func malformed(_ what: String) -> RelayFrameError { RelayFrameError(.malformed, requestID: 0, what) }
        guard let type = reader.byte() else { throw malformed("an empty relay frame") }
        switch type {
        case Self.deliverType:
            guard let raw = reader.bytes(RelaySubject.byteCount), let wakeByte = reader.byte() else {
                throw malformed("DELIVER is cut short")
            }
            guard let wake = WakeClass(rawValue: wakeByte) else { throw malformed("unknown wake class \(wakeByte)") }
            self = .deliver(subject: try! RelaySubject(rawRepresentation: raw), wake: wake, payload: reader.rest())
        case Self.okType:
            guard let id = reader.uint32(), reader.isAtEnd else { throw malformed("OK is 5 bytes") }
            self = .ok(requestID: id)
        case Self.errorType:
            guard let id = reader.uint32(), let code = reader.uint16() else { throw malformed("ERROR is cut short") }
            guard let reason = String(validating: reader.rest(), as: UTF8.self) else {
                throw malformed("the ERROR reason is not UTF-8")
            }
            self = .error(requestID: id, code: RelayErrorCode(rawValue: code), reason: reason)
        case Self.challengeType:
            guard let nonce = reader.bytes(Self.challengeByteCount), reader.isAtEnd else {
                throw malformed("CHALLENGE is 33 bytes")
            }
            self = .challenge(nonce: nonce)
        default:
            throw RelayFrameError(
                .unknownType, requestID: 0, "relay frame type 0x\(String(type, radix: 16)) is unknown")
        }
    }
}

/// A relay frame that does not parse: the ERROR code to answer with, the request id when it could be read,
/// and what was wrong.
public struct RelayFrameError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: RelayErrorCode
    public let requestID: UInt32
    public let reason: String

    public init(_ code: RelayErrorCode, requestID: UInt32, _ reason: String) {
        self.code = code
        self.requestID = requestID
        self.reason = reason
    }

    public var description: String { "RelayFrameError.\(code): \(reason)" }
}
