import Foundation
import SiblingsCrypto

/// The answers to one sign-in request (signin_ack, signin_approval), keyed from the shared secret the request's
/// KEM established, never sealed to the requester's public key (000_e422bd9a7c930342.txt: "a reply that anyone
/// could construct for that subject would let the relay itself forge an approval"). Both ends derive it from
/// their HPKE context of the ``DiscoveryBox`` (RFC 9180 §5.3, the exporter), so only a party that could open
/// the request can answer it.
///
///     reply key  = Export("pixie/signin/reply-key/v1", 32)
///     check code = Export("pixie/signin/check-code/v1", 8) as a big-endian integer, mod 10^8, 8 digits
///
/// A reply, sent to the request's reply subject:
///
///     offset  size  field
///     0       1     version = 1
///     1       1120  filler: fresh random bytes, where a DiscoveryBox has its encapsulation
///     1121    12    nonce (random)
///     1133    n+16  AES-256-GCM under the reply key (aad: bytes 0..<1133) of payload type (1) ‖ payload
///
/// The check code (beyond the seed, docs/pixie-protocol.md, "Differences from the seed") is shown on the new
/// device and typed on the sibling before Approve: 26 bits that a phishing request, one made by someone else
/// who passed SMS-OTP for the number (a SIM swap), cannot share with the device the person holds.
public struct SignInReplyChannel: Sendable {
    public static let version: UInt8 = 1
    static let headerByteCount = 1 + DiscoveryBox.encapsulatedKeyByteCount + 12
    public static let checkCodeDigits = 8

    private let key: SymmetricKey
    /// Eight decimal digits, the same on both ends of one request and unrelated across requests.
    public let checkCode: String

    init(exporting export: (Data, Int) throws -> SymmetricKey) throws {
        key = try export(Data("pixie/signin/reply-key/v1".utf8), 32)
        let code = try export(Data("pixie/signin/check-code/v1".utf8), 8).withUnsafeBytes {
            $0.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        let text = String(code % 100_000_000)
        checkCode = String(repeating: "0", count: Self.checkCodeDigits - text.count) + text
    }

    /// Whether `typed` is this request's check code (digits only; spaces and dashes a person adds are ignored),
    /// compared in constant time.
    public func matches(checkCode typed: String) -> Bool {
        let digits = typed.filter { $0 != " " && $0 != "-" }
        guard digits.utf8.count == Self.checkCodeDigits else { return false }
        return safeCompare(Data(digits.utf8), Data(checkCode.utf8))
    }

    /// Seals `message` as a reply.
    public func seal(_ message: SiblingMessage) throws -> Data { try seal(message.type, try message.encoded) }

    /// Seals a reply of `type` carrying `payload`.
    public func seal(_ type: PayloadType, _ payload: Data) throws -> Data {
        var header = Data([Self.version])
        header += SecureRandom.bytes(count: DiscoveryBox.encapsulatedKeyByteCount)
        let nonce = AES.GCM.Nonce()
        header += Data(nonce)
        var plaintext = Data([type.rawValue]) + payload
        defer { plaintext.cleanse() }
        let sealed = try AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: header)
        return header + sealed.ciphertext + sealed.tag
    }

    /// Opens a reply: its type and payload. Throws ``PixieWireError/Code/malformed`` for anything not sealed
    /// under this channel's key (a forgery, another request's reply, bytes altered).
    public func open(_ reply: some DataProtocol) throws(PixieWireError) -> (type: PayloadType, payload: Data) {
        let bytes = Data(reply)
        guard bytes.count >= Self.headerByteCount + 1 + 16, bytes[bytes.startIndex] == Self.version else {
            throw PixieWireError(.malformed, "not a version-\(Self.version) sign-in reply")
        }
        let header = bytes.prefix(Self.headerByteCount)
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: header.suffix(12)),
                ciphertext: bytes.dropFirst(Self.headerByteCount).dropLast(16), tag: bytes.suffix(16))
            plaintext = try AES.GCM.open(box, using: key, authenticating: header)
        } catch {
            throw PixieWireError(.malformed, "the reply was not sealed for this sign-in request")
        }
        var reader = WireReader(plaintext)
        let type = try PayloadType.decode(reader.byte(), in: "the sign-in reply")
        return (type, reader.rest())
    }
}
