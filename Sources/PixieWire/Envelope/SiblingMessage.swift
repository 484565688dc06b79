import Foundation

/// A payload one device seals to another: in a ``SealedSenderEnvelope`` between siblings, in a ``DiscoveryBox`` to
/// the account's discovery inbox, or on a request's ``SignInReplyChannel``. Each is a type of its own that encodes
/// and decodes itself, and names its ``PayloadType``.
///
/// A payload's version is its type byte: a payload whose layout changes takes a new ``PayloadType`` value (the
/// way TLS gives a changed message a new code point rather than a version field), so a device that does not know
/// it drops the frame with a reason that says so instead of misreading it.
public protocol SiblingPayload: Sendable, Equatable {
    /// The type byte this payload travels under.
    static var payloadType: PayloadType { get }
    /// The payload's bytes (docs/pixie-protocol.md gives each layout).
    var encoded: Data { get throws(PixieWireError) }
    /// Reads the payload; throws ``PixieWireError`` (malformed) for anything else.
    init(decoding payload: some DataProtocol) throws(PixieWireError)
}

/// Every message devices seal to each other, decoded in one place: opening a frame gives its ``PayloadType`` and
/// bytes, and `SiblingMessage(type:payload:)` turns them into one typed case. A new message is one case here and
/// one ``SiblingPayload`` type.
public enum SiblingMessage: Sendable, Equatable {
    // To the discovery inbox, and back on the request's reply channel (000_e422bd9a7c930342.txt, "Sign in").
    case signInRequest(SignInRequest)
    case signInAck(SignInAck)
    case signInApproval(SignInApproval)
    case signInSettled(SignInSettlement.Outcome)
    // Between siblings on their own inboxes (000_e422bd9a7c930342.txt, "What do I know?").
    case syncRequest(SyncRequest)
    case syncPreparing(SyncPreparing)
    case syncOffer(SyncOffer)
    case syncAck(SyncAck)
    case syncFailed(SyncFailure)
    case syncCancel(SyncCancel)
    // Between siblings, the digest reconcile loop (docs/pixie-sync.md).
    case syncDigest(SyncDigests)
    case syncSketch(SyncSketch)
    case syncWant(SyncWant)
    case syncRows(SyncRows)

    /// Decodes `payload` as the message of type `type`. Throws for a type this build has no message for
    /// (`sync_delta`, reserved) or bytes that are not that message.
    public init(type: PayloadType, payload: some DataProtocol) throws(PixieWireError) {
        switch type {
        case .signInRequest: self = .signInRequest(try SignInRequest(decoding: payload))
        case .signInAck: self = .signInAck(try SignInAck(decoding: payload))
        case .signInApproval: self = .signInApproval(try SignInApproval(decoding: payload))
        case .signInSettled: self = .signInSettled(try SignInSettlement.Outcome(decoding: payload))
        case .syncRequest: self = .syncRequest(try SyncRequest(decoding: payload))
        case .syncPreparing: self = .syncPreparing(try SyncPreparing(decoding: payload))
        case .syncOffer: self = .syncOffer(try SyncOffer(decoding: payload))
        case .syncAck: self = .syncAck(try SyncAck(decoding: payload))
        case .syncFailed: self = .syncFailed(try SyncFailure(decoding: payload))
        case .syncCancel: self = .syncCancel(try SyncCancel(decoding: payload))
        case .syncDigest: self = .syncDigest(try SyncDigests(decoding: payload))
        case .syncSketch: self = .syncSketch(try SyncSketch(decoding: payload))
        case .syncWant: self = .syncWant(try SyncWant(decoding: payload))
        case .syncRows: self = .syncRows(try SyncRows(decoding: payload))
        case .syncDelta:
            throw PixieWireError(.malformed, "a \(type) frame, which this version does not read yet; update pixie")
        }
    }

    /// The payload inside.
    public var payload: any SiblingPayload {
        switch self {
        case .signInRequest(let payload): payload
        case .signInAck(let payload): payload
        case .signInApproval(let payload): payload
        case .signInSettled(let payload): payload
        case .syncRequest(let payload): payload
        case .syncPreparing(let payload): payload
        case .syncOffer(let payload): payload
        case .syncAck(let payload): payload
        case .syncFailed(let payload): payload
        case .syncCancel(let payload): payload
        case .syncDigest(let payload): payload
        case .syncSketch(let payload): payload
        case .syncWant(let payload): payload
        case .syncRows(let payload): payload
        }
    }

    /// The type byte it travels under.
    public var type: PayloadType { Swift.type(of: payload).payloadType }

    /// Its bytes.
    public var encoded: Data { get throws(PixieWireError) { try payload.encoded } }
}

extension SignInRequest: SiblingPayload { public static var payloadType: PayloadType { .signInRequest } }
extension SignInAck: SiblingPayload { public static var payloadType: PayloadType { .signInAck } }
extension SignInApproval: SiblingPayload { public static var payloadType: PayloadType { .signInApproval } }
extension SyncRequest: SiblingPayload { public static var payloadType: PayloadType { .syncRequest } }
extension SyncPreparing: SiblingPayload { public static var payloadType: PayloadType { .syncPreparing } }
extension SyncOffer: SiblingPayload { public static var payloadType: PayloadType { .syncOffer } }
extension SyncAck: SiblingPayload { public static var payloadType: PayloadType { .syncAck } }
extension SyncFailure: SiblingPayload { public static var payloadType: PayloadType { .syncFailed } }
extension SyncCancel: SiblingPayload { public static var payloadType: PayloadType { .syncCancel } }
extension SyncDigests: SiblingPayload { public static var payloadType: PayloadType { .syncDigest } }
extension SyncSketch: SiblingPayload { public static var payloadType: PayloadType { .syncSketch } }
extension SyncWant: SiblingPayload { public static var payloadType: PayloadType { .syncWant } }
extension SyncRows: SiblingPayload { public static var payloadType: PayloadType { .syncRows } }

extension SignInSettlement.Outcome: SiblingPayload {
    public static var payloadType: PayloadType { .signInSettled }

    /// outcome (1): 0 cancelled, 1 approved, 2 rejected.
    public var encoded: Data { Data([rawValue]) }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        let bytes = Data(payload)
        guard bytes.count == 1, let outcome = Self(rawValue: bytes[bytes.startIndex]) else {
            throw PixieWireError(.malformed, "the settlement does not carry an outcome")
        }
        self = outcome
    }
}
