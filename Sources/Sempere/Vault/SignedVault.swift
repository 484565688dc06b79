import Foundation
import SiblingsCrypto

/// vault.json: the body's exact bytes and home's signature over them (docs/sempere-format.md).
public struct SignedVault: Sendable {
    /// The format written: v2 adds compact records (``EpochFileList``) and handoffs to v1's body.
    public static let format = "sempere-vault-v2"
    /// The formats read: a vault made by sempere 0.1 is read as it is.
    static let readable = ["sempere-vault-v1", "sempere-vault-v2"]
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
        guard Self.readable.contains(file.format) else {
            throw SempereError(
                .malformedVault,
                "vault.json is format \"\(file.format)\"; this version of sempere reads "
                    + "\(Self.readable.joined(separator: " and ")): update sempere on this device"
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
    /// pin. Refuses another vault, a signer other than the home this device follows (or one it handed
    /// the role to, by a handoff record signed by the home before it), a bad signature, an older
    /// generation (rollback) and a different list of the same generation (fork).
    public func accept(pinned: VaultPin) throws -> VaultPin {
        guard body.vaultID == pinned.vaultID else {
            throw SempereError(
                .wrongVault,
                "this vault.json is for vault \(body.vaultID), not \(pinned.vaultID): the folder was swapped")
        }
        if body.generation < pinned.generation {
            throw SempereError(
                .rollback,
                "vault.json is generation \(body.generation), older than generation \(pinned.generation) already "
                    + "accepted: the storage provider served an old copy; wait for it to sync, and never act on it")
        }
        // Follow the home role from the pinned home through every handoff made since, each signed by the
        // home that handed it on.
        var homeKey = pinned.homeSigningKey
        var signers = [homeKey]
        for handoff in body.handoffs where handoff.generation > pinned.generation {
            let from = try HybridSignature.PublicKey(rawRepresentation: homeKey)
            guard handoff.from == VaultKeys.identifier(for: from), handoff.generation <= body.generation,
                let signature = try? HybridSignature.Signature(rawRepresentation: handoff.signature),
                from.isValidSignature(
                    signature, for: handoff.signedBytes(vaultID: body.vaultID), context: VaultBody.Handoff.context)
            else {
                throw SempereError(
                    .badSignature,
                    "vault.json hands the home role on in generation \(handoff.generation) without the signature of "
                        + "the home this device follows: it was forged")
            }
            homeKey = handoff.toSigningKey
            signers.append(homeKey)
        }
        // The body's home is the last one the chain reaches, listed with that key; the body is signed by it,
        // or, for the body of a handoff itself, by the home that handed over.
        guard let home = body.device(body.home), home.signingKey == homeKey else {
            throw SempereError(
                .badSignature,
                "vault.json names \(body.home.prefix(8)) as home, which no handoff from the home this device follows "
                    + "made home")
        }
        var signerKey: Data?
        if signer == body.home {
            signerKey = homeKey
        } else if let last = body.handoffs.last, last.generation == body.generation, last.from == signer {
            // The handoff's own body. Walked just now: the key before the last step. Accepted before (the
            // pin is this very body): the old home as this body lists it.
            signerKey =
                last.generation > pinned.generation
                ? signers[signers.count - 2]
                : (bodySHA256 == pinned.bodySHA256 ? body.device(signer)?.signingKey : nil)
        }
        guard let signerKey,
            VaultKeys.identifier(for: try HybridSignature.PublicKey(rawRepresentation: signerKey)) == signer
        else {
            throw SempereError(
                .badSignature, "vault.json is signed by \(signer), not by the home device this device follows")
        }
        guard
            try HybridSignature.PublicKey(rawRepresentation: signerKey).isValidSignature(
                signature, for: bodyBytes, context: Self.signatureContext)
        else {
            throw SempereError(
                .badSignature, "vault.json's signature does not verify: it was altered after home signed it")
        }
        if body.generation == pinned.generation && bodySHA256 != pinned.bodySHA256 {
            throw SempereError(
                .fork, "two different device lists claim generation \(body.generation): the vault was tampered with")
        }
        return VaultPin(
            vaultID: pinned.vaultID, homeSigningKey: homeKey, generation: body.generation, bodySHA256: bodySHA256)
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
