import Foundation
import SiblingsCrypto

/// Whether `text` is fit to show a person as a name: 1 to 64 bytes of UTF-8 with no control characters (C0, DEL,
/// C1) and no bidirectional formatting characters, which could redraw a prompt or reorder what it says (a device
/// model that "shows" another check code). Device models and families in sign-in messages, and a device's name in
/// the roster (identity-svc), follow this one rule.
public func isDisplayableName(_ text: String) -> Bool {
    let bytes = text.utf8.count
    guard (1...64).contains(bytes) else { return false }
    return text.unicodeScalars.allSatisfy { scalar in
        let value = scalar.value
        if value < 0x20 || (0x7F...0x9F).contains(value) { return false }
        if (0x200E...0x200F).contains(value) || (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
            || value == 0x061C
        {
            return false
        }
        return scalar.properties.generalCategory != .lineSeparator
            && scalar.properties.generalCategory != .paragraphSeparator
    }
}

/// "May I join?": what a new device seals into a ``DiscoveryBox`` (type ``PayloadType/signInRequest``), with its
/// phone cert beside it in the box (000_e422bd9a7c930342.txt: "device model, a fresh random 32-byte reply
/// subject, its own X-Wing public key, a timestamp, and the cert").
///
///     u16 length ‖ device_model (UTF-8, 1 to 64 bytes, no control or bidirectional formatting characters)
///     reply_subject (32): a self-certifying subject of a fresh key (RelaySubjectKey), random-looking
///     sealing_key (1216): the new device's X-Wing public key
///     timestamp (8): Unix seconds, big-endian
public struct SignInRequest: Sendable, Equatable {
    public static let maximumDeviceModelByteCount = 64

    /// For people: "Pixel 9", "Linux laptop".
    public var deviceModel: String
    public var replySubject: RelaySubject
    public var sealingKey: XWing.PublicKey
    public var timestamp: Date

    public init(deviceModel: String, replySubject: RelaySubject, sealingKey: XWing.PublicKey, timestamp: Date) {
        self.deviceModel = deviceModel
        self.replySubject = replySubject
        self.sealingKey = sealingKey
        self.timestamp = timestamp
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            let model = Data(deviceModel.utf8)
            guard isDisplayableName(deviceModel) else {
                throw PixieWireError(
                    .malformed,
                    "a device model is 1 to \(Self.maximumDeviceModelByteCount) bytes of UTF-8 without control or "
                        + "bidirectional formatting characters")
            }
            var out = Data()
            out.appendShortField(model)
            out += replySubject.rawRepresentation
            out += sealingKey.rawRepresentation
            out.appendUInt64(UInt64(max(0, timestamp.timeIntervalSince1970.rounded(.down))))
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let model = reader.shortField(), (1...Self.maximumDeviceModelByteCount).contains(model.count),
            let modelText = String(data: model, encoding: .utf8), isDisplayableName(modelText),
            let subject = reader.bytes(RelaySubject.byteCount), let key = reader.bytes(XWing.publicKeyByteCount),
            let seconds = reader.uint64(), reader.isAtEnd, seconds <= UInt64(Int64.max)
        else { throw PixieWireError(.malformed, "not a sign-in request") }
        do {
            sealingKey = try XWing.PublicKey(rawRepresentation: key)
        } catch {
            throw PixieWireError(.malformed, "the sign-in request's sealing key is not an X-Wing public key")
        }
        deviceModel = modelText
        replySubject = try RelaySubject(rawRepresentation: subject)
        timestamp = Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}

/// A sibling's "I see you" (``PayloadType/signInAck``), sealed on the request's ``SignInReplyChannel`` once the
/// request passed every guard: its device family, so the new device can say "Approve on your iPhone".
///
///     u16 length ‖ device_family (UTF-8, 1 to 64 bytes, the same characters as a device model)
public struct SignInAck: Sendable, Equatable {
    public var deviceFamily: String

    public init(deviceFamily: String) { self.deviceFamily = deviceFamily }

    public var encoded: Data {
        get throws(PixieWireError) {
            let family = Data(deviceFamily.utf8)
            guard isDisplayableName(deviceFamily) else {
                throw PixieWireError(
                    .malformed, "a device family is 1 to 64 bytes of UTF-8 without control or formatting characters")
            }
            var out = Data()
            out.appendShortField(family)
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        guard let family = reader.shortField(), (1...64).contains(family.count), reader.isAtEnd,
            let text = String(data: family, encoding: .utf8), isDisplayableName(text)
        else { throw PixieWireError(.malformed, "not a sign-in acknowledgement") }
        deviceFamily = text
    }
}

/// The person's answer (``PayloadType/signInApproval``), sealed on the request's ``SignInReplyChannel``.
///
///     decision (1): 1 approved, 0 rejected; a rejection carries nothing more
///     approved:
///       u16 length ‖ grant (the `add` grant, as POST /v1/auth/devices/grant returned it; empty for a device
///                            that is enrolled already, by a six-digit code, and asked for the seeds alone)
///       account_seed (32): the account signing seed (HybridSignature seed)
///       u16 length ‖ kt_handle (the account's label in the transparency log)
///       discovery_seed (32): the discovery key's X-Wing seed (which also derives the discovery inbox's
///                            subscribe key, RelaySubjectKey(discoverySeed:))
///
/// The seed's approval carries the grant, the account seed and the KT handle; the discovery seed is ours, so
/// that the new device can answer the next sign-in itself (docs/pixie-protocol.md, "Differences from the seed").
public enum SignInApproval: Sendable, Equatable {
    case approved(Approved)
    /// "An approval is sealed back carrying no grant."
    case rejected

    public struct Approved: Sendable, Equatable {
        /// The grant to redeem; empty when the new device is enrolled already (the six-digit code flow).
        public var grant: String
        public var accountSeed: Data
        public var ktHandle: String
        public var discoverySeed: Data

        public init(grant: String, accountSeed: Data, ktHandle: String, discoverySeed: Data) {
            self.grant = grant
            self.accountSeed = accountSeed
            self.ktHandle = ktHandle
            self.discoverySeed = discoverySeed
        }
    }

    public var encoded: Data {
        get throws(PixieWireError) {
            guard case .approved(let approved) = self else { return Data([0]) }
            let grant = Data(approved.grant.utf8)
            let handle = Data(approved.ktHandle.utf8)
            guard grant.count <= 256, (1...256).contains(handle.count),
                approved.accountSeed.count == 32, approved.discoverySeed.count == 32
            else {
                throw PixieWireError(
                    .malformed,
                    "an approval carries a grant of at most 256 bytes, a KT handle of 1 to 256 and two 32-byte seeds")
            }
            var out = Data([1])
            out.appendShortField(grant)
            out += approved.accountSeed
            out.appendShortField(handle)
            out += approved.discoverySeed
            return out
        }
    }

    public init(decoding payload: some DataProtocol) throws(PixieWireError) {
        var reader = WireReader(Data(payload))
        switch reader.byte() {
        case 0 where reader.isAtEnd:
            self = .rejected
        case 1:
            guard let grant = reader.shortField(), grant.count <= 256,
                let grantText = String(data: grant, encoding: .utf8), let accountSeed = reader.bytes(32),
                let handle = reader.shortField(), (1...256).contains(handle.count),
                let handleText = String(data: handle, encoding: .utf8), let discoverySeed = reader.bytes(32),
                reader.isAtEnd
            else { throw PixieWireError(.malformed, "not a sign-in approval") }
            self = .approved(
                Approved(grant: grantText, accountSeed: accountSeed, ktHandle: handleText, discoverySeed: discoverySeed)
            )
        default:
            throw PixieWireError(.malformed, "not a sign-in approval")
        }
    }
}
