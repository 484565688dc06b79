import Foundation
import SiblingsCrypto

/// vault.json: the body's exact bytes and home's signature over them (docs/sempere-format.md).
public struct SignedVault: Sendable {
    public static let format = "sempere-vault-v1"
    static let signatureContext = Data("sempere/v1/vault-body".utf8)

    public let body: VaultBody
    /// The exact bytes that were signed.
    public let bodyBytes: Data
    public let signer: String
    public let signature: HybridSignature.Signature

    struct File: Codable {
        var format: String
        var body: String
        var signer: String
        var signature: Data
    }

    /// Signs `body` as `signer` (home's device id) with home's signing key.
    public static func sign(_ body: VaultBody, signer: String, key: HybridSignature.PrivateKey) throws -> SignedVault {
        let bytes = try body.encoded()
        return SignedVault(
            body: body, bodyBytes: bytes, signer: signer,
            signature: try key.signature(for: bytes, context: signatureContext))
    }

    /// vault.json's bytes.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return try encoder.encode(
            File(
                format: Self.format, body: String(decoding: bodyBytes, as: UTF8.self), signer: signer,
                signature: signature.rawRepresentation))
    }

    /// Parses vault.json. This is no trust decision: `accept(pinned:)` is.
    public init(parsing data: Data) throws {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch {
            throw SempereError(.malformedVault, "vault.json does not parse: \(plainDescription(of: error))")
        }
        guard file.format == Self.format else {
            throw SempereError(
                .malformedVault, "vault.json is format \"\(file.format)\"; this version of sempere reads \(Self.format)"
            )
        }
        let bytes = Data(file.body.utf8)
        do {
            self.init(
                body: try VaultBody.decode(bytes), bodyBytes: bytes, signer: file.signer,
                signature: try HybridSignature.Signature(rawRepresentation: file.signature))
        } catch let error as SempereError {
            throw error
        } catch {
            throw SempereError(.malformedVault, "vault.json's signature is malformed: \(plainDescription(of: error))")
        }
    }

    init(body: VaultBody, bodyBytes: Data, signer: String, signature: HybridSignature.Signature) {
        self.body = body
        self.bodyBytes = bodyBytes
        self.signer = signer
        self.signature = signature
    }

    public var bodySHA256: String { SHA256.hash(data: bodyBytes).description }

    /// Decides whether a device that has pinned `pinned` follows this vault.json, and returns the new
    /// pin. Refuses another vault, a signer other than the pinned home, a bad signature, an older
    /// generation (rollback) and a different list of the same generation (fork).
    public func accept(pinned: VaultPin) throws -> VaultPin {
        guard body.vaultID == pinned.vaultID else {
            throw SempereError(
                .wrongVault,
                "this vault.json is for vault \(body.vaultID), not \(pinned.vaultID): the folder was swapped")
        }
        let homeKey = try HybridSignature.PublicKey(rawRepresentation: pinned.homeSigningKey)
        guard signer == VaultKeys.identifier(for: homeKey), body.home == signer,
            body.device(signer)?.signingKey == pinned.homeSigningKey
        else {
            throw SempereError(
                .badSignature, "vault.json is signed by \(signer), not by the home device this device follows")
        }
        guard homeKey.isValidSignature(signature, for: bodyBytes, context: Self.signatureContext) else {
            throw SempereError(
                .badSignature, "vault.json's signature does not verify: it was altered after home signed it")
        }
        if body.generation < pinned.generation {
            throw SempereError(
                .rollback,
                "vault.json is generation \(body.generation), older than generation \(pinned.generation) already "
                    + "accepted: the storage provider served an old copy; wait for it to sync, and never act on it")
        }
        if body.generation == pinned.generation && bodySHA256 != pinned.bodySHA256 {
            throw SempereError(
                .fork, "two different device lists claim generation \(body.generation): the vault was tampered with")
        }
        return VaultPin(
            vaultID: pinned.vaultID, homeSigningKey: pinned.homeSigningKey, generation: body.generation,
            bodySHA256: bodySHA256)
    }
}

/// What a device remembers outside the vault folder: which vault it is in, whose list it follows, and the
/// newest list it has accepted.
public struct VaultPin: Codable, Sendable, Equatable {
    public var vaultID: String
    public var homeSigningKey: Data
    public var generation: UInt64
    public var bodySHA256: String

    public init(vaultID: String, homeSigningKey: Data, generation: UInt64, bodySHA256: String) {
        self.vaultID = vaultID
        self.homeSigningKey = homeSigningKey
        self.generation = generation
        self.bodySHA256 = bodySHA256
    }
}
