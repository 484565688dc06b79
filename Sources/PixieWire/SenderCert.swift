import Foundation
import SiblingsCrypto

/// The SenderCert (000_e422bd9a7c930342.txt): credential-svc's statement that a device key speaks for an
/// account, "computing compute_user_id_hash(user_id) from the session's account and signing the result with
/// the hybrid pair, classical and post-quantum both". A device gets a cert bearing an account's hash only by
/// holding a valid session for that account. Inside a sealed-sender envelope it is how the receiver learns
/// who sent a frame; `isSameAccount` compares its `userIDHash` with the device's own.
///
/// Encoding (docs/pixie-protocol.md, "SenderCert"):
///
/// ```
/// offset  size  field
///      0     1  version = 0x01
///      1    32  user_id_hash = compute_user_id_hash(account_id)
///     33     2  device_key length n (big-endian, 1 to 4096)
///     35     n  device_key: the device's roster pubkey
///   35+n     8  issued_at, Unix seconds, big-endian
///   43+n     8  expires_at, Unix seconds, big-endian
///   51+n     8  signer_key_id: the first 8 bytes of SHA-256(credential-svc's hybrid public key)
///   59+n  3373  HybridSignature over bytes 0..<59+n, context "pixie/sender-cert/v1"
/// ```
public struct SenderCert: Sendable, Equatable {
    public static let version: UInt8 = 1
    public static let signatureContext = Data("pixie/sender-cert/v1".utf8)
    public static let maximumDeviceKeyByteCount = 4096

    public let userIDHash: Data
    public let deviceKey: Data
    public let issuedAt: Date
    public let expiresAt: Date
    public let signerKeyID: Data
    public let rawRepresentation: Data

    /// compute_user_id_hash: SHA-256("pixie/user-id-hash/v1" ‖ 0x00 ‖ user_id), 32 bytes. The user_id is the
    /// account id, which only the account's own sessions and devices know.
    public static func computeUserIDHash(_ userID: String) -> Data {
        Data(SHA256.hash(data: Data("pixie/user-id-hash/v1".utf8) + Data([0]) + Data(userID.utf8)))
    }

    public init(
        userIDHash: Data, deviceKey: Data, issuedAt: Date, expiresAt: Date, signedBy key: HybridSignature.PrivateKey
    ) throws(PixieWireError) {
        guard userIDHash.count == 32 else {
            throw PixieWireError(.malformed, "a user_id_hash is 32 bytes, not \(userIDHash.count)")
        }
        guard (1...Self.maximumDeviceKeyByteCount).contains(deviceKey.count) else {
            throw PixieWireError(.malformed, "a SenderCert's device key is 1 to 4096 bytes, not \(deviceKey.count)")
        }
        guard expiresAt > issuedAt else {
            throw PixieWireError(.malformed, "a SenderCert must expire after it is issued")
        }
        var signed = Data([Self.version]) + userIDHash
        signed += Self.bigEndian(UInt16(deviceKey.count))
        signed += deviceKey
        signed += Self.bigEndian(Self.seconds(issuedAt))
        signed += Self.bigEndian(Self.seconds(expiresAt))
        let keyID = PhoneOwnershipCert.keyID(of: key.publicKey)
        signed += keyID
        let signature: HybridSignature.Signature
        do {
            signature = try key.signature(for: signed, context: Self.signatureContext)
        } catch {
            throw PixieWireError(.badSignature, "signing the SenderCert failed: \(error)")
        }
        try self.init(unverifiedRepresentation: signed + signature.rawRepresentation)
    }

    /// Parses the fields without checking the signature or the times; use ``Verifier`` to accept a cert.
    public init(unverifiedRepresentation raw: some DataProtocol) throws(PixieWireError) {
        let raw = Data(raw)
        func fail(_ reason: String) -> PixieWireError { PixieWireError(.malformed, "the SenderCert \(reason)") }
        guard raw.count >= 35 else { throw fail("is \(raw.count) bytes, too short for its fields") }
        guard raw[0] == Self.version else { throw fail("has version \(raw[0]); this build reads version 1") }
        let keyLength = Int(raw[33]) << 8 | Int(raw[34])
        guard (1...Self.maximumDeviceKeyByteCount).contains(keyLength) else {
            throw fail("declares a device key of \(keyLength) bytes; 1 to 4096 are allowed")
        }
        guard raw.count == 59 + keyLength + HybridSignature.signatureByteCount else {
            throw fail("is \(raw.count) bytes; with this device key it must be \(59 + keyLength + 3373)")
        }
        userIDHash = raw.subdata(in: 1..<33)
        deviceKey = raw.subdata(in: 35..<(35 + keyLength))
        issuedAt = Date(timeIntervalSince1970: TimeInterval(Self.readUInt64(raw, at: 35 + keyLength)))
        expiresAt = Date(timeIntervalSince1970: TimeInterval(Self.readUInt64(raw, at: 43 + keyLength)))
        signerKeyID = raw.subdata(in: (51 + keyLength)..<(59 + keyLength))
        rawRepresentation = raw
    }

    /// Checks SenderCerts against the credential-svc keys a device pins (the trust bundle's sender_cert_key).
    /// With no pinned key it refuses every cert.
    public struct Verifier: Sendable {
        public let pinnedKeys: [HybridSignature.PublicKey]
        public var allowedClockSkew: TimeInterval

        public init(pinnedKeys: [HybridSignature.PublicKey], allowedClockSkew: TimeInterval = 60) {
            self.pinnedKeys = pinnedKeys
            self.allowedClockSkew = allowedClockSkew
        }

        public func verify(_ raw: some DataProtocol, now: Date) throws(PixieWireError) -> SenderCert {
            let cert = try SenderCert(unverifiedRepresentation: raw)
            try SignedCredential.verify(
                SignedCredential.Fields(
                    name: "SenderCert", remedy: "the sender must fetch a new one", raw: cert.rawRepresentation,
                    signedByteCount: cert.rawRepresentation.count - HybridSignature.signatureByteCount,
                    signerKeyID: cert.signerKeyID, issuedAt: cert.issuedAt, expiresAt: cert.expiresAt,
                    context: SenderCert.signatureContext),
                pinnedKeys: pinnedKeys, allowedClockSkew: allowedClockSkew, now: now)
            return cert
        }
    }

    private static func seconds(_ date: Date) -> UInt64 { UInt64(max(0, date.timeIntervalSince1970.rounded(.down))) }

    private static func bigEndian<T: FixedWidthInteger>(_ value: T) -> Data {
        withUnsafeBytes(of: value.bigEndian) { Data($0) }
    }

    private static func readUInt64(_ data: Data, at offset: Int) -> UInt64 {
        data[offset..<(offset + 8)].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
