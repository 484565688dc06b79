import Foundation
import SiblingsCrypto

/// A frame between devices that says nothing outside about who sent it (sealed sender): the relay sees the
/// recipient's subject, the SEND's token and wake class, and this opaque box. The sender's ``SenderCert`` and
/// the ``InnerMAC`` are inside.
///
/// HPKE base mode (RFC 9180) to the recipient's X-Wing sealing key (the one its roster entry lists), HKDF-SHA256
/// and AES-256-GCM, info `"pixie/sealed-sender/v1"`:
///
///     offset  size  field
///     0       1     version = 1
///     1       1120  enc
///     1121    n+16  ciphertext (aad: version ‖ recipient subject (32)) of
///                     u16 length ‖ sender_cert ‖ payload type (1) ‖ u32 length ‖ payload ‖ inner_mac (32)
///
/// Opening is two steps, because the channel key depends on who sent it: ``open(_:with:recipient:)`` gives the
/// unverified cert, and ``Opened/authenticate(channelKey:)`` checks the MAC. PixieDevice's ChannelKeys resolves
/// the key from the verified cert; with no key, the envelope is rejected.
public enum SealedSenderEnvelope {
    public static let version: UInt8 = 1
    static let info = Data("pixie/sealed-sender/v1".utf8)
    /// The largest payload an envelope carries: what fits the relay's default frame payload limit (64 KiB,
    /// `relay_max_payload_bytes`) beside the encapsulation, a SenderCert and the MAC.
    public static let maximumPayloadByteCount = 52 * 1024

    /// Seals `payload` from the holder of `senderCert` to the device at `recipient` whose sealing key is
    /// `recipientKey`, MAC'd under `channelKey`.
    public static func seal(
        _ type: PayloadType, _ payload: Data, senderCert: Data, channelKey: SymmetricKey,
        to recipientKey: XWing.PublicKey, recipient: RelaySubject
    ) throws -> Data {
        guard senderCert.count <= 8192, payload.count <= maximumPayloadByteCount else {
            throw PixieWireError(
                .malformed,
                "an envelope carries a sender cert of at most 8 KiB and at most \(maximumPayloadByteCount) bytes")
        }
        var sender = try HPKE.Sender(
            recipientKey: recipientKey, ciphersuite: DiscoveryBox.ciphersuite, info: info)
        var plaintext = Data()
        plaintext.appendShortField(senderCert)
        plaintext.append(type.rawValue)
        plaintext.appendUInt32(UInt32(payload.count))
        plaintext += payload
        plaintext += InnerMAC.compute(
            channelKey: channelKey, recipient: recipient, senderCert: senderCert, type: type, payload: payload)
        defer { plaintext.cleanse() }
        let header = Data([version])
        return header + sender.encapsulatedKey
            + (try sender.seal(plaintext, authenticating: header + recipient.rawRepresentation))
    }

    /// An envelope opened with the recipient's key, its MAC not yet checked.
    public struct Opened: Sendable {
        /// The sender's cert, unverified: check it (``SenderCert/Verifier``) before trusting its userIDHash.
        public let senderCert: Data
        public let type: PayloadType
        let payload: Data
        let mac: Data
        let recipient: RelaySubject

        /// The payload, once the MAC verifies under `channelKey`; ``PixieWireError/Code/badSignature`` otherwise
        /// (a frame written without the channel key, or under another account's).
        public func authenticate(channelKey: SymmetricKey) throws(PixieWireError) -> Data {
            let expected = InnerMAC.compute(
                channelKey: channelKey, recipient: recipient, senderCert: senderCert, type: type, payload: payload)
            guard safeCompare(expected, mac) else {
                throw PixieWireError(.badSignature, "the envelope's inner MAC is not under this channel key")
            }
            return payload
        }
    }

    /// Opens an envelope delivered to `recipient` with that inbox's sealing key.
    public static func open(
        _ envelope: some DataProtocol, with sealingKey: XWing.PrivateKey, recipient: RelaySubject
    ) throws(PixieWireError) -> Opened {
        let bytes = Data(envelope)
        let encapsulated = XWing.ciphertextByteCount
        guard bytes.count > 1 + encapsulated + 16, bytes[bytes.startIndex] == version else {
            throw PixieWireError(.malformed, "not a version-\(version) sealed-sender envelope")
        }
        let plaintext: Data
        do {
            var recipientContext = try HPKE.Recipient(
                privateKey: sealingKey, ciphersuite: DiscoveryBox.ciphersuite, info: info,
                encapsulatedKey: bytes.dropFirst(1).prefix(encapsulated))
            plaintext = try recipientContext.open(
                bytes.dropFirst(1 + encapsulated), authenticating: bytes.prefix(1) + recipient.rawRepresentation)
        } catch {
            throw PixieWireError(.malformed, "the envelope does not open under this inbox's sealing key")
        }
        var reader = WireReader(plaintext)
        guard let cert = reader.shortField() else { throw PixieWireError(.malformed, "the envelope is truncated") }
        let type = try PayloadType.decode(reader.byte(), in: "the envelope")
        guard let length = reader.uint32(), let payload = reader.bytes(Int(length)),
            let mac = reader.bytes(InnerMAC.byteCount), reader.isAtEnd
        else { throw PixieWireError(.malformed, "the envelope is truncated") }
        return Opened(senderCert: cert, type: type, payload: payload, mac: mac, recipient: recipient)
    }
}
