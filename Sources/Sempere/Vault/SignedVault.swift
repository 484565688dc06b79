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
    public static func sign(_ body: VaultBody, signer: String, key: some DeviceSigningKey) throws -> SignedVault {
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
    /// the role to, by a handoff record signed by the home before it, or one a takeover signed by the
    /// pinned recovery kit made home), a bad signature, a list from before a takeover this device has
    /// seen, an older generation (rollback) and a different list of the same generation (fork).
    public func accept(pinned: VaultPin, now: Date = Date()) throws -> VaultPin {
        var pin = try acceptSigners(pinned: pinned, now: now)
        carryKitState(from: pinned, to: &pin, now: Int64(now.timeIntervalSince1970))
        return pin
    }

    /// The kit this device trusts for a takeover: the pinned one; but while a kit that home replaced
    /// without its co-signature is in its grace, that old kit only (the new one is not in effect yet on
    /// this device, so a stolen home that skipped the delay cannot take over with a kit of its own).
    public static func trustedKits(_ pinned: VaultPin, now: Int64) -> [Data] {
        if let previous = pinned.previousRecoverySigningKey, let until = pinned.previousRecoveryValidUntil, now < until
        {
            return [previous]
        }
        return pinned.recoverySigningKey.map { [$0] } ?? []
    }

    /// Moves what the pin knows of kit replacements on to `pin`, the pin of this body.
    func carryKitState(from pinned: VaultPin, to pin: inout VaultPin, now: Int64) {
        let delay = max(pinned.kitReplacementDelay ?? 0, body.kitReplacementDelay)
        pin.kitReplacementDelay = delay
        pin.kitReplacementSeenAt = body.kitReplacement == nil ? nil : (pinned.kitReplacementSeenAt ?? now)
        // A takeover's kit signed it: it is the vault's kit, with no grace for the one it replaced.
        if body.takeoverGeneration > pinned.takeoverGeneration { return }
        pin.previousRecoverySigningKey = pinned.previousRecoverySigningKey
        pin.previousRecoveryValidUntil = pinned.previousRecoveryValidUntil
        if let old = pinned.recoverySigningKey, old != body.recovery.signingKey {
            let cosigned = body.kitChanges.contains { change in
                guard change.kitSigningKey == body.recovery.signingKey,
                    let key = try? HybridSignature.PublicKey(rawRepresentation: old),
                    let signature = try? HybridSignature.Signature(rawRepresentation: change.oldKitSignature)
                else { return false }
                return key.isValidSignature(
                    signature,
                    for: VaultBody.KitChange.signedBytes(vaultID: body.vaultID, newKey: change.kitSigningKey),
                    context: VaultBody.KitChange.context)
            }
            if cosigned {
                pin.previousRecoverySigningKey = nil
                pin.previousRecoveryValidUntil = nil
            } else {
                pin.previousRecoverySigningKey = old
                pin.previousRecoveryValidUntil = (pinned.kitReplacementSeenAt ?? now) + delay
            }
        }
        if pin.previousRecoverySigningKey == body.recovery.signingKey
            || (pin.previousRecoveryValidUntil.map { now >= $0 } ?? false)
        {
            pin.previousRecoverySigningKey = nil
            pin.previousRecoveryValidUntil = nil
        }
    }

    /// Two holders of the kit, each taking over: what a device says of the takeover it does not follow.
    static func rivalTakeover(home: String) -> SempereError {
        SempereError(
            .fork,
            "two takeovers with the recovery kit: the one this device follows, and another that makes "
                + "\(home.prefix(8)) home. Whoever holds the kit holds everything: if the other was "
                + "not yours, someone has your kit. Take over again with it now, from a device you hold")
    }

    /// Whether this list is a takeover of the same generation as `followed`'s but another one, signed by
    /// the kit `pin` trusts: a second holder of the kit. Such a list may also be older (a lower
    /// generation) than the one followed; it is then still shown as what it is, and never written over.
    func isRivalTakeover(of followed: VaultBody, pin: VaultPin) -> Bool {
        guard followed.takeoverGeneration > 0, body.vaultID == followed.vaultID,
            body.takeoverGeneration == followed.takeoverGeneration, let theirs = body.takeovers.last,
            theirs.takeoverGeneration == body.takeoverGeneration, theirs != followed.takeovers.last,
            let kit = pin.recoverySigningKey
        else { return false }
        return (try? verify(theirs, kitKey: kit)) != nil
    }

    func acceptSigners(pinned: VaultPin, now: Date) throws -> VaultPin {
        guard body.vaultID == pinned.vaultID else {
            throw SempereError(
                .wrongVault,
                "this vault.json is for vault \(body.vaultID), not \(pinned.vaultID): the folder was swapped")
        }
        if body.takeoverGeneration < pinned.takeoverGeneration {
            throw SempereError(
                .rollback,
                "this vault.json is from before a takeover this device has seen: the vault was taken over with the "
                    + "recovery kit since, and changes from the old home that the takeover did not see are dropped. "
                    + "It is never acted on")
        }
        if body.takeoverGeneration > pinned.takeoverGeneration {
            // A takeover beats any list from the old home, whatever its generation: its authority is the kit.
            let kits = Self.trustedKits(pinned, now: Int64(now.timeIntervalSince1970))
            guard !kits.isEmpty else {
                throw SempereError(
                    .badSignature,
                    "vault.json says the vault was taken over, but this device has not yet pinned the recovery kit's "
                        + "key to check it (its state is from sempere 0.1): take over from a device that has")
            }
            let first = body.takeovers.first { $0.takeoverGeneration == pinned.takeoverGeneration + 1 }
            let kit = kits.first { $0 == first?.kitSigningKey } ?? kits[0]
            let homeKey = try verifyTakeovers(after: pinned.takeoverGeneration, kitKey: kit)
            return try verifySigner(
                startingAt: homeKey, after: body.takeovers.last!.generation, pinned: nil)
        }
        if body.generation < pinned.generation {
            throw SempereError(
                .rollback,
                "vault.json is generation \(body.generation), older than generation \(pinned.generation) already "
                    + "accepted: the storage provider served an old copy; wait for it to sync, and never act on it")
        }
        do {
            return try verifySigner(startingAt: pinned.homeSigningKey, after: pinned.generation, pinned: pinned)
        } catch let error as SempereError where body.takeoverGeneration > 0 {
            // Two holders of the kit, each taking over: a second genuine takeover of the same generation.
            if let last = body.takeovers.last, last.takeoverGeneration == body.takeoverGeneration,
                last.homeSigningKey != pinned.homeSigningKey, let kit = pinned.recoverySigningKey,
                (try? verify(last, kitKey: kit)) != nil,
                body.handoffs.allSatisfy({ $0.generation <= last.generation })
            {
                throw Self.rivalTakeover(home: body.home)
            }
            throw error
        }
    }

    /// For a device that holds nothing but the recovery kit: accepts this vault.json when its chain of
    /// homes checks out from the first home, which the kit signed at creation, through every takeover
    /// (signed by the kit) and handoff since; returns the pin to keep.
    public func accept(kitSigningKey kitKey: HybridSignature.PublicKey) throws -> VaultPin {
        let kit = kitKey.rawRepresentation
        guard body.recovery.signingKey == kit else {
            throw SempereError(
                .wrongVault, "this recovery kit is not this vault's (or it was replaced): check the kit and the folder")
        }
        // The newest point the kit itself vouches for: the last takeover it signed, the replacement that
        // made it the vault's kit (signed by it at the time), or the first home (signed at creation).
        var anchor: (homeKey: Data, generation: UInt64)?
        if let change = body.kitChanges.last(where: { $0.kitSigningKey == kit }),
            let signature = try? HybridSignature.Signature(rawRepresentation: change.newKitSignature),
            kitKey.isValidSignature(
                signature,
                for: VaultBody.KitChange.anchorBytes(
                    vaultID: body.vaultID, generation: change.anchorGeneration, home: change.anchorHome,
                    homeKey: change.anchorHomeSigningKey),
                context: VaultBody.KitChange.anchorContext)
        {
            anchor = (change.anchorHomeSigningKey, change.anchorGeneration - 1)
        } else if body.kitChanges.isEmpty, let genesis = body.genesis,
            let signature = try? HybridSignature.Signature(rawRepresentation: genesis.kitSignature),
            kitKey.isValidSignature(
                signature, for: genesis.signedBytes(vaultID: body.vaultID), context: VaultBody.Genesis.context)
        {
            anchor = (genesis.homeSigningKey, 0)
        }
        if let last = body.takeovers.last(where: { $0.kitSigningKey == kit }),
            last.generation > anchor?.generation ?? 0, (try? verify(last, kitKey: kit)) != nil,
            body.takeovers.last == last
        {
            anchor = (last.homeSigningKey, last.generation)
        }
        guard let anchor else {
            throw SempereError(
                .badSignature,
                "nothing in vault.json is signed by this recovery kit (a vault made before sempere 0.2 has no such "
                    + "signature), so it cannot be checked from the kit alone: take over from a device of the vault")
        }
        guard body.takeovers.last.map({ $0.generation <= anchor.generation }) ?? true else {
            throw SempereError(
                .badSignature, "vault.json's last takeover is not signed by this recovery kit: it cannot be checked")
        }
        return try verifySigner(startingAt: anchor.homeKey, after: anchor.generation, pinned: nil)
    }

    /// Checks the takeovers after `after` (consecutive, each signed by the kit and by the home it names)
    /// and returns the last one's home key.
    func verifyTakeovers(after: UInt64, kitKey: Data) throws -> Data {
        let newer = body.takeovers.filter { $0.takeoverGeneration > after }
        guard newer.map(\.takeoverGeneration) == Array((after + 1)...max(after + 1, body.takeoverGeneration)),
            let last = newer.last, last.generation <= body.generation
        else {
            throw SempereError(
                .badSignature,
                "vault.json claims takeover \(body.takeoverGeneration) without the records of the takeovers since "
                    + "\(after): it was forged")
        }
        for record in newer { try verify(record, kitKey: kitKey) }
        return last.homeSigningKey
    }

    /// Checks one takeover record: signed by `kitKey` and by the home it names, which it keeps.
    func verify(_ record: VaultBody.Takeover, kitKey: Data) throws {
        let bytes = record.signedBytes(vaultID: body.vaultID)
        guard record.kitSigningKey == kitKey,
            let kit = try? HybridSignature.PublicKey(rawRepresentation: kitKey),
            let kitSignature = try? HybridSignature.Signature(rawRepresentation: record.kitSignature),
            kit.isValidSignature(kitSignature, for: bytes, context: VaultBody.Takeover.context)
        else {
            throw SempereError(
                .badSignature,
                "vault.json's takeover \(record.takeoverGeneration) is not signed by the recovery kit this device "
                    + "follows: it was forged, and is never acted on")
        }
        guard let home = try? HybridSignature.PublicKey(rawRepresentation: record.homeSigningKey),
            record.home == VaultKeys.identifier(for: home), record.kept.contains(record.home),
            let homeSignature = try? HybridSignature.Signature(rawRepresentation: record.homeSignature),
            home.isValidSignature(homeSignature, for: bytes, context: VaultBody.Takeover.context)
        else {
            throw SempereError(
                .badSignature,
                "vault.json's takeover \(record.takeoverGeneration) is not signed by the new home it names as well "
                    + "as by the kit: a takeover needs both")
        }
    }

    /// From the home key `startKey` (the pinned home, or a takeover's), follows every handoff after
    /// generation `after`, checks that the body names the home reached and is signed by it (or, for a
    /// handoff's own body, by the home that handed over), and returns the new pin. `pinned` is the pin
    /// when no takeover intervened (for the fork check, and to re-accept a handoff's own body).
    func verifySigner(startingAt startKey: Data, after: UInt64, pinned: VaultPin?) throws -> VaultPin {
        var homeKey = startKey
        var signers = [homeKey]
        for handoff in body.handoffs where handoff.generation > after {
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
                last.generation > after
                ? signers[signers.count - 2]
                : (bodySHA256 == pinned?.bodySHA256 ? body.device(signer)?.signingKey : nil)
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
        if let pinned, body.generation == pinned.generation, bodySHA256 != pinned.bodySHA256 {
            throw SempereError(
                .fork, "two different device lists claim generation \(body.generation): the vault was tampered with")
        }
        return VaultPin(
            vaultID: body.vaultID, homeSigningKey: homeKey, generation: body.generation, bodySHA256: bodySHA256,
            takeoverGeneration: body.takeoverGeneration, recoverySigningKey: body.recovery.signingKey)
    }
}

/// What a device remembers outside the vault folder: which vault it is in, whose list it follows, and the
/// newest list it has accepted.
public struct VaultPin: Codable, Sendable, Equatable {
    public var vaultID: String
    public var homeSigningKey: Data
    public var generation: UInt64
    public var bodySHA256: String
    /// How many takeovers the accepted list had seen: a list with fewer is one a takeover dropped.
    public var takeoverGeneration: UInt64
    /// The recovery kit's signing key in the accepted list: the only key that can authorise a takeover.
    /// (nil in a pin saved before sempere 0.2, until the next list is accepted.)
    public var recoverySigningKey: Data?
    /// A kit that home replaced without its co-signature, and until when (seconds since 1970, by this
    /// device's clock) it may still take over: the vault's delay, counted from when this device first saw
    /// the replacement, so a stolen home cannot shorten it by its own clock.
    public var previousRecoverySigningKey: Data?
    public var previousRecoveryValidUntil: Int64?
    /// When this device first saw the pending replacement (its clock), and the longest delay it has seen.
    public var kitReplacementSeenAt: Int64?
    public var kitReplacementDelay: Int64?

    public init(
        vaultID: String, homeSigningKey: Data, generation: UInt64, bodySHA256: String,
        takeoverGeneration: UInt64 = 0, recoverySigningKey: Data? = nil
    ) {
        self.vaultID = vaultID
        self.homeSigningKey = homeSigningKey
        self.generation = generation
        self.bodySHA256 = bodySHA256
        self.takeoverGeneration = takeoverGeneration
        self.recoverySigningKey = recoverySigningKey
    }

    enum CodingKeys: String, CodingKey {
        case vaultID, homeSigningKey, generation, bodySHA256, takeoverGeneration, recoverySigningKey
        case previousRecoverySigningKey, previousRecoveryValidUntil, kitReplacementSeenAt, kitReplacementDelay
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            vaultID: try container.decode(String.self, forKey: .vaultID),
            homeSigningKey: try container.decode(Data.self, forKey: .homeSigningKey),
            generation: try container.decode(UInt64.self, forKey: .generation),
            bodySHA256: try container.decode(String.self, forKey: .bodySHA256),
            // Absent in a pin saved by sempere 0.1.
            takeoverGeneration: try container.decodeIfPresent(UInt64.self, forKey: .takeoverGeneration) ?? 0,
            recoverySigningKey: try container.decodeIfPresent(Data.self, forKey: .recoverySigningKey))
        previousRecoverySigningKey = try container.decodeIfPresent(Data.self, forKey: .previousRecoverySigningKey)
        previousRecoveryValidUntil = try container.decodeIfPresent(Int64.self, forKey: .previousRecoveryValidUntil)
        kitReplacementSeenAt = try container.decodeIfPresent(Int64.self, forKey: .kitReplacementSeenAt)
        kitReplacementDelay = try container.decodeIfPresent(Int64.self, forKey: .kitReplacementDelay)
    }
}
