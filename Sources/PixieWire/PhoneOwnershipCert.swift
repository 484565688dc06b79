import Foundation
import SiblingsCrypto

/// The PhoneOwnershipCert: what phone-verify-svc mints once a device passes SMS-OTP for a number
/// (000_e422bd9a7c930342.txt). It proves control of a phone number and nothing else: no account, no
/// session. Two endpoints accept it in place of a session (`POST /v1/discovery/own` and
/// `POST /v1/approval-tokens/challenge`), and both verify it against a phone-verify key pinned in their
/// configuration, never one fetched on demand.
///
/// Encoding (docs/pixie-protocol.md, "PhoneOwnershipCert"), 3,430 bytes, opaque to devices:
///
/// ```
/// offset  size  field
///      0     1  version = 0x01
///      1    32  phone_id: HMAC-SHA-256 under phone-verify's phone-id key of "pixie/phone-id/v1" ‖ E.164
///     33     8  issued_at, Unix seconds, big-endian
///     41     8  expires_at, Unix seconds, big-endian
///     49     8  signer_key_id: the first 8 bytes of SHA-256(signer's hybrid public key)
///     57  3373  HybridSignature over bytes 0..<57, context "pixie/phone-ownership-cert/v1"
/// ```
///
/// The signature is Ed25519 and ML-DSA-65 over the same message, so the cert stands unless both are broken;
/// verification requires both halves.
public struct PhoneOwnershipCert: Sendable, Equatable {
    public static let version: UInt8 = 1
    public static let signedByteCount = 57
    public static let byteCount = signedByteCount + HybridSignature.signatureByteCount
    /// The HybridSignature context string that binds a signature to this purpose.
    public static let signatureContext = Data("pixie/phone-ownership-cert/v1".utf8)

    /// The keyed hash of the E.164 number; never the number itself.
    public let phoneID: Data
    public let issuedAt: Date
    public let expiresAt: Date
    public let signerKeyID: Data
    /// The whole encoded cert, signature included, exactly as minted.
    public let rawRepresentation: Data

    /// Mints a cert for `phoneID`, valid from `issuedAt` until `expiresAt`.
    public init(
        phoneID: Data, issuedAt: Date, expiresAt: Date, signedBy key: HybridSignature.PrivateKey
    ) throws(PixieWireError) {
        guard phoneID.count == 32 else {
            throw PixieWireError(.malformed, "a phone_id is 32 bytes, not \(phoneID.count)")
        }
        guard expiresAt > issuedAt else {
            throw PixieWireError(.malformed, "a PhoneOwnershipCert must expire after it is issued")
        }
        var signed = Data([Self.version])
        signed += phoneID
        signed += Self.bigEndian(issuedAt)
        signed += Self.bigEndian(expiresAt)
        let keyID = Self.keyID(of: key.publicKey)
        signed += keyID
        let signature: HybridSignature.Signature
        do {
            signature = try key.signature(for: signed, context: Self.signatureContext)
        } catch {
            throw PixieWireError(.badSignature, "signing the PhoneOwnershipCert failed: \(error)")
        }
        self.phoneID = phoneID
        self.issuedAt = Date(timeIntervalSince1970: TimeInterval(Self.seconds(issuedAt)))
        self.expiresAt = Date(timeIntervalSince1970: TimeInterval(Self.seconds(expiresAt)))
        self.signerKeyID = keyID
        self.rawRepresentation = signed + signature.rawRepresentation
    }

    /// Parses the fields without checking the signature or the times; use ``Verifier`` to accept a cert.
    public init(unverifiedRepresentation raw: some DataProtocol) throws(PixieWireError) {
        let raw = Data(raw)
        guard raw.count == Self.byteCount else {
            throw PixieWireError(
                .malformed,
                "a PhoneOwnershipCert is \(Self.byteCount) bytes, not \(raw.count); send the cert exactly as "
                    + "phone-verify-svc returned it")
        }
        guard raw[raw.startIndex] == Self.version else {
            throw PixieWireError(
                .malformed, "the PhoneOwnershipCert has version \(raw[raw.startIndex]); this build reads version 1")
        }
        phoneID = raw.subdata(in: 1..<33)
        issuedAt = Date(timeIntervalSince1970: TimeInterval(Self.readUInt64(raw, at: 33)))
        expiresAt = Date(timeIntervalSince1970: TimeInterval(Self.readUInt64(raw, at: 41)))
        signerKeyID = raw.subdata(in: 49..<57)
        rawRepresentation = raw
    }

    /// The 8-byte key id of a phone-verify public key: the first 8 bytes of SHA-256 of its raw form.
    public static func keyID(of key: HybridSignature.PublicKey) -> Data {
        Data(SHA256.hash(data: key.rawRepresentation).prefix(8))
    }

    /// Checks PhoneOwnershipCerts against the phone-verify keys pinned in configuration. With no pinned key
    /// it refuses every cert (``PixieWireError/Code/noPinnedKey``): without the key it cannot check the cert,
    /// and the caller's self-claimed phone_id must never become the authorization.
    public struct Verifier: Sendable {
        public let pinnedKeys: [HybridSignature.PublicKey]
        /// How far in the future `issued_at` may be, for clocks that disagree.
        public var allowedClockSkew: TimeInterval

        public init(pinnedKeys: [HybridSignature.PublicKey], allowedClockSkew: TimeInterval = 60) {
            self.pinnedKeys = pinnedKeys
            self.allowedClockSkew = allowedClockSkew
        }

        /// The cert, if it is well formed, signed (both halves) by a pinned key, and valid at `now`.
        public func verify(_ raw: some DataProtocol, now: Date) throws(PixieWireError) -> PhoneOwnershipCert {
            guard !pinnedKeys.isEmpty else {
                throw PixieWireError(
                    .noPinnedKey,
                    "no phone-verify key is pinned, so no PhoneOwnershipCert can be checked; configure the "
                        + "phone-verify public key (pixie-server trust-bundle prints it)")
            }
            let cert = try PhoneOwnershipCert(unverifiedRepresentation: raw)
            try SignedCredential.verify(
                SignedCredential.Fields(
                    name: "PhoneOwnershipCert", remedy: "verify the number again", raw: cert.rawRepresentation,
                    signedByteCount: PhoneOwnershipCert.signedByteCount, signerKeyID: cert.signerKeyID,
                    issuedAt: cert.issuedAt, expiresAt: cert.expiresAt, context: PhoneOwnershipCert.signatureContext),
                pinnedKeys: pinnedKeys, allowedClockSkew: allowedClockSkew, now: now)
            return cert
        }
    }

    private static func seconds(_ date: Date) -> UInt64 {
        UInt64(max(0, date.timeIntervalSince1970.rounded(.down)))
    }

    private static func bigEndian(_ date: Date) -> Data {
        withUnsafeBytes(of: seconds(date).bigEndian) { Data($0) }
    }

    private static func readUInt64(_ data: Data, at offset: Int) -> UInt64 {
        data[(data.startIndex + offset)..<(data.startIndex + offset + 8)].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
