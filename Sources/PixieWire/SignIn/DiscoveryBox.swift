import Foundation
import SiblingsCrypto

/// A first-contact message to an account, sealed to its discovery key (000_e422bd9a7c930342.txt: the new device
/// "seals the request into a DiscoveryBox addressed to the account's discovery key, and posts it to the inbox").
///
/// HPKE base mode (RFC 9180) with X-Wing (draft-connolly-cfrg-xwing-kem), HKDF-SHA256 and AES-256-GCM, info
/// `"pixie/discovery-box/v1"`:
///
///     offset  size  field
///     0       1     version = 1
///     1       1120  enc: the X-Wing encapsulation to the discovery key
///     1121    n+16  ciphertext (aad: the version byte) of
///                     phone_cert (PhoneOwnershipCert.byteCount) ‖ payload type (1) ‖ payload
///
/// The sender's phone cert rides inside: a sibling checks it before it reads the payload (handleSignInRequest's
/// ladder). The same HPKE context gives both ends a ``SignInReplyChannel``, so only the holder of the discovery
/// key can answer.
public struct DiscoveryBox: Sendable, Equatable {
    public static let version: UInt8 = 1
    static let info = Data("pixie/discovery-box/v1".utf8)
    static let ciphersuite = HPKE.Ciphersuite.XWingMLKEM768X25519_SHA256_AES_GCM_256
    static let encapsulatedKeyByteCount = XWing.ciphertextByteCount
    /// The longest payload a box carries (a sign-in request is about 1.3 KB).
    public static let maximumPayloadByteCount = 16 * 1024

    /// The sender's PhoneOwnershipCert, unverified until the recipient checks it.
    public var phoneCert: Data
    public var type: PayloadType
    public var payload: Data

    public init(phoneCert: Data, type: PayloadType, payload: Data) {
        self.phoneCert = phoneCert
        self.type = type
        self.payload = payload
    }

    /// A box carrying `message`.
    public init(phoneCert: Data, message: SiblingMessage) throws(PixieWireError) {
        self.init(phoneCert: phoneCert, type: message.type, payload: try message.encoded)
    }

    /// Seals this box to `discoveryKey`; the sealed bytes, and the channel its answers come back on.
    public func sealed(to discoveryKey: XWing.PublicKey) throws -> (box: Data, replies: SignInReplyChannel) {
        guard phoneCert.count == PhoneOwnershipCert.byteCount else {
            throw PixieWireError(.malformed, "a DiscoveryBox carries a \(PhoneOwnershipCert.byteCount)-byte phone cert")
        }
        guard payload.count <= Self.maximumPayloadByteCount else {
            throw PixieWireError(.malformed, "a DiscoveryBox payload is at most \(Self.maximumPayloadByteCount) bytes")
        }
        var sender = try HPKE.Sender(recipientKey: discoveryKey, ciphersuite: Self.ciphersuite, info: Self.info)
        var plaintext = phoneCert
        plaintext.append(type.rawValue)
        plaintext += payload
        defer { plaintext.cleanse() }
        let header = Data([Self.version])
        let box = header + sender.encapsulatedKey + (try sender.seal(plaintext, authenticating: header))
        return (box, try SignInReplyChannel(exporting: { try sender.exportSecret(context: $0, outputByteCount: $1) }))
    }

    /// Opens `box` with the account's discovery key: the box (its cert not yet checked) and the channel to
    /// answer on. Throws ``PixieWireError/Code/malformed`` for anything that is not a box sealed to this key.
    public static func open(
        _ box: some DataProtocol, with discoveryKey: XWing.PrivateKey
    ) throws(PixieWireError) -> (
        box: DiscoveryBox, replies: SignInReplyChannel
    ) {
        let bytes = Data(box)
        guard bytes.count > 1 + encapsulatedKeyByteCount + 16, bytes[bytes.startIndex] == version else {
            throw PixieWireError(.malformed, "not a version-\(version) DiscoveryBox")
        }
        let header = bytes.prefix(1)
        do {
            var recipient = try HPKE.Recipient(
                privateKey: discoveryKey, ciphersuite: ciphersuite, info: info,
                encapsulatedKey: bytes.dropFirst(1).prefix(encapsulatedKeyByteCount))
            var plaintext = try recipient.open(
                bytes.dropFirst(1 + encapsulatedKeyByteCount), authenticating: header)
            defer { plaintext.cleanse() }
            var reader = WireReader(plaintext)
            guard let cert = reader.bytes(PhoneOwnershipCert.byteCount) else {
                throw PixieWireError(.malformed, "the DiscoveryBox is too short for a phone cert")
            }
            let type = try PayloadType.decode(reader.byte(), in: "the DiscoveryBox")
            let opened = DiscoveryBox(phoneCert: cert, type: type, payload: reader.rest())
            let replies = try SignInReplyChannel(exporting: {
                try recipient.exportSecret(context: $0, outputByteCount: $1)
            })
            return (opened, replies)
        } catch let error as PixieWireError {
            throw error
        } catch {
            throw PixieWireError(.malformed, "the DiscoveryBox does not open under this discovery key")
        }
    }
}
