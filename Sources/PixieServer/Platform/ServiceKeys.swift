import Foundation
import PixieWire
import PrivacyPass
import SiblingsCrypto

/// The services' own secrets, generated on first start into `<data-dir>/keys/` and read on every later one.
///
/// - `phone-verify.seed`: phone-verify-svc's HybridSignature seed (signs PhoneOwnershipCerts).
/// - `phone-id.key`: the 32-byte HMAC key that turns an E.164 number into a phone_id.
/// - `transparency-log.seed`: the transparency log's HybridSignature seed (signs checkpoints).
/// - `sender-cert.seed`: credential-svc's HybridSignature seed (signs SenderCerts).
/// - `token-oprf.seed`: credential-svc's VOPRF key seed (DeriveKeyPair, RFC 9497 §3.2.1), for rate-limit tokens.
///
/// Each file is 32 bytes, mode 0600, written atomically. A file that exists but cannot be read or has the
/// wrong length stops the server with an error: a key is never silently replaced, since every device that
/// pinned the old one would refuse the new one.
public struct ServiceKeys: Sendable {
    public let phoneVerify: HybridSignature.PrivateKey
    public let phoneIDKey: SymmetricKey
    public let transparencyLog: HybridSignature.PrivateKey
    public let senderCert: HybridSignature.PrivateKey
    public let tokenOPRF: VOPRF.PrivateKey
    /// The upload-class token key: tokens under it pay blob-svc uploads only, each for
    /// ``BlobService/Configuration/bytesPerUploadToken``, and are minted to sessions only. Derived from the same
    /// seed (`token-oprf.seed`) under another DeriveKeyPair info, so no new key file is needed.
    public let tokenUploadOPRF: VOPRF.PrivateKey

    public init(
        phoneVerify: HybridSignature.PrivateKey, phoneIDKey: SymmetricKey,
        transparencyLog: HybridSignature.PrivateKey, senderCert: HybridSignature.PrivateKey,
        tokenOPRF: VOPRF.PrivateKey, tokenUploadOPRF: VOPRF.PrivateKey
    ) {
        self.phoneVerify = phoneVerify
        self.phoneIDKey = phoneIDKey
        self.transparencyLog = transparencyLog
        self.senderCert = senderCert
        self.tokenOPRF = tokenOPRF
        self.tokenUploadOPRF = tokenUploadOPRF
    }

    /// The VOPRF key from its 32-byte seed (RFC 9497, DeriveKeyPair).
    static func tokenKey(seed: Data) throws -> VOPRF.PrivateKey {
        try VOPRF.PrivateKey(seed: seed, info: Data("pixie rate-limit tokens v1".utf8), mode: .voprf)
    }

    /// The upload-class VOPRF key from the same seed, under its own info.
    static func uploadTokenKey(seed: Data) throws -> VOPRF.PrivateKey {
        try VOPRF.PrivateKey(seed: seed, info: Data("pixie upload tokens v1".utf8), mode: .voprf)
    }

    /// Fresh random keys (what a first start writes to disk).
    public static func generate() -> ServiceKeys { generate(random: SystemRandom()) }

    /// Keys from `random` (`@_spi(Testing)`: tests make them deterministic).
    @_spi(Testing)
    public static func generate(random: some SecureRandomSource) -> ServiceKeys {
        func seed() -> Data { random.bytes(count: 32) }
        // Drawn in the order the key files are listed, the token seed last.
        let phoneVerify = try! HybridSignature.PrivateKey(seedRepresentation: seed())
        let phoneIDKey = SymmetricKey(data: seed())
        let transparencyLog = try! HybridSignature.PrivateKey(seedRepresentation: seed())
        let senderCert = try! HybridSignature.PrivateKey(seedRepresentation: seed())
        let tokenSeed = seed()
        return ServiceKeys(
            phoneVerify: phoneVerify, phoneIDKey: phoneIDKey, transparencyLog: transparencyLog, senderCert: senderCert,
            tokenOPRF: try! tokenKey(seed: tokenSeed), tokenUploadOPRF: try! uploadTokenKey(seed: tokenSeed))
    }

    /// Loads the keys under `directory`, generating each one that does not exist yet.
    public static func loadOrCreate(in directory: URL, logger: Logger) throws(ServerError) -> ServiceKeys {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ServerError(
                .configuration, "cannot create the key directory \(directory.path): \(error.localizedDescription)")
        }
        func secret(_ name: String) throws(ServerError) -> Data {
            let url = directory.appendingPathComponent(name)
            if FileManager.default.fileExists(atPath: url.path) {
                guard let data = try? Data(contentsOf: url) else {
                    throw ServerError(.configuration, "cannot read \(url.path); check its owner and permissions")
                }
                guard data.count == 32 else {
                    throw ServerError(
                        .configuration,
                        "\(url.path) is \(data.count) bytes, not 32; restore it from a backup (a new key would "
                            + "break every device that pinned the old one)")
                }
                return data
            }
            let data = SecureRandom.bytes(count: 32)
            do {
                let temporary = directory.appendingPathComponent(".\(name).\(UUID().uuidString)")
                guard
                    FileManager.default.createFile(
                        atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600])
                else { throw CocoaError(.fileWriteUnknown) }
                // link(2) fails if another process created the key meanwhile, so a key is never replaced.
                guard link(temporary.path, url.path) == 0 else {
                    let code = errno
                    try? FileManager.default.removeItem(at: temporary)
                    if code == EEXIST { return try secret(name) }
                    throw CocoaError(.fileWriteUnknown)
                }
                try FileManager.default.removeItem(at: temporary)
            } catch let error as ServerError {
                throw error
            } catch {
                throw ServerError(.configuration, "cannot write \(url.path): \(error.localizedDescription)")
            }
            logger.info("generated a new key", ["file": url.path])
            return data
        }
        do {
            return ServiceKeys(
                phoneVerify: try HybridSignature.PrivateKey(seedRepresentation: try secret("phone-verify.seed")),
                phoneIDKey: SymmetricKey(data: try secret("phone-id.key")),
                transparencyLog: try HybridSignature.PrivateKey(
                    seedRepresentation: try secret("transparency-log.seed")),
                senderCert: try HybridSignature.PrivateKey(seedRepresentation: try secret("sender-cert.seed")),
                tokenOPRF: try tokenKey(seed: try secret("token-oprf.seed")),
                tokenUploadOPRF: try uploadTokenKey(seed: try secret("token-oprf.seed")))
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.configuration, "a key in \(directory.path) is not valid: \(error)")
        }
    }

    /// The public keys a device pins, with the origin the transparency log signs under.
    /// The keys devices pin, and with `checkpoint` (a signed note of this log) the checkpoint they start from.
    /// `alsoPinned`: other phone-verify keys pinned during a rotation (``TrustBundle/additionalPhoneVerifyKeys``).
    public func trustBundle(
        logOrigin: String, checkpoint: String? = nil, alsoPinned: [HybridSignature.PublicKey] = []
    ) -> TrustBundle {
        TrustBundle(
            phoneVerifyKey: phoneVerify.publicKey, transparencyLogKey: transparencyLog.publicKey,
            transparencyLogOrigin: logOrigin, senderCertKey: senderCert.publicKey, transparencyCheckpoint: checkpoint,
            additionalPhoneVerifyKeys: alsoPinned.filter { $0 != phoneVerify.publicKey })
    }
}
